//! `agw.database.*`, `agw.redis.*`, `agw.node.id`, `agw.cluster.*`: running several replicas
//! on PostgreSQL (chat memory) and Redis (live runs) — `docs/deployment.md`.

use std::time::Duration;

use agw_cluster::ClusterSecret;

use super::source::Source;
use super::table::{
    AGW_CLUSTER_CONTROL_DEADLINE, AGW_CLUSTER_LEASE, AGW_CLUSTER_SECRET, AGW_CLUSTER_SECRET_FILE,
    AGW_DATABASE_POOL_SIZE, AGW_DATABASE_SCHEMA, AGW_DATABASE_URL, AGW_NODE_ID, AGW_REDIS_PREFIX, AGW_REDIS_URL,
};
use super::value::{self, ValueError};
use super::{ConfigError, SettingSpec};

/// Where shared state lives when agw runs as several replicas. Both unset: one process, chats
/// in files, runs in memory (the default).
#[derive(Clone, PartialEq, Eq)]
pub struct ClusterSettings {
    /// `agw.database.url`: chat memory in PostgreSQL.
    pub database: Option<DatabaseSettings>,
    /// `agw.redis.url`: run records, event streams and control messages in Redis.
    pub redis: Option<RedisSettings>,
    /// `agw.node.id`: this replica's id (a random one when unset).
    pub node_id: String,
    /// `agw.cluster.lease`: how long a replica's lease lasts without renewal.
    pub lease: Duration,
    /// `agw.cluster.secret` / `secret-file`: what replicas sign control requests and run records
    /// with (docs/security.md, "Cluster trust boundary"). Always set when `redis` is.
    pub secret: Option<ClusterSecret>,
    /// `agw.cluster.control-deadline`: how long a forwarded request is valid and awaited.
    pub control_deadline: Duration,
}

/// `agw.database.*`.
#[derive(Clone, PartialEq, Eq)]
pub struct DatabaseSettings {
    /// The connection URL (may hold a password: never logged).
    pub url: String,
    /// Schema of agw's tables.
    pub schema: String,
    /// Connections kept.
    pub pool_size: u32,
}

/// `agw.redis.*`.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisSettings {
    /// The connection URL (may hold a password: never logged).
    pub url: String,
    /// Prefix of every key.
    pub prefix: String,
}

impl Default for ClusterSettings {
    fn default() -> Self {
        Self {
            database: None,
            redis: None,
            node_id: random_node_id(),
            lease: Duration::from_secs(10),
            secret: None,
            control_deadline: Duration::from_secs(5),
        }
    }
}

/// A URL with its password replaced by `***`, for logs and `Debug`.
pub fn masked_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    let (authority, path) = rest.split_once('/').map_or((rest, None), |(a, p)| (a, Some(p)));
    let Some((userinfo, host)) = authority.rsplit_once('@') else { return url.to_owned() };
    let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
    let masked = if userinfo.contains(':') { format!("{user}:***") } else { user.to_owned() };
    match path {
        Some(path) => format!("{scheme}://{masked}@{host}/{path}"),
        None => format!("{scheme}://{masked}@{host}"),
    }
}

impl std::fmt::Debug for ClusterSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterSettings")
            .field("database", &self.database.as_ref().map(|d| (masked_url(&d.url), &d.schema, d.pool_size)))
            .field("redis", &self.redis.as_ref().map(|r| (masked_url(&r.url), &r.prefix)))
            .field("node_id", &self.node_id)
            .field("lease", &self.lease)
            .field("secret", &self.secret)
            .field("control_deadline", &self.control_deadline)
            .finish()
    }
}

impl std::fmt::Debug for DatabaseSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatabaseSettings")
            .field("url", &masked_url(&self.url))
            .field("schema", &self.schema)
            .field("pool_size", &self.pool_size)
            .finish()
    }
}

impl std::fmt::Debug for RedisSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisSettings").field("url", &masked_url(&self.url)).field("prefix", &self.prefix).finish()
    }
}

fn random_node_id() -> String {
    format!("node-{}", &agw_protocol::ids::new_run_id().replace('-', "")[..12])
}

fn identifier(s: &str) -> Result<String, ValueError> {
    let s = s.trim();
    let ok = !s.is_empty()
        && s.len() <= 63
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == ':' || c == '.');
    if ok { Ok(s.to_owned()) } else { Err(ValueError::Expected("1–63 characters of a-z, 0-9, _, -, :, .")) }
}

pub(super) fn load(src: &Source) -> Result<ClusterSettings, ConfigError> {
    let database = match src.parse_opt(&AGW_DATABASE_URL, value::text)? {
        Some(url) => {
            let schema = src.parse(&AGW_DATABASE_SCHEMA, identifier)?;
            if schema.contains(['-', ':', '.']) {
                return Err(ConfigError::Invalid {
                    property: AGW_DATABASE_SCHEMA.property,
                    env: AGW_DATABASE_SCHEMA.env,
                    message: "a schema name is letters, digits and _".into(),
                });
            }
            let pool_size: u32 = src.parse(&AGW_DATABASE_POOL_SIZE, value::whole)?;
            Some(DatabaseSettings { url, schema, pool_size: pool_size.max(1) })
        }
        None => None,
    };
    let redis = match src.parse_opt(&AGW_REDIS_URL, value::text)? {
        Some(url) => Some(RedisSettings { url, prefix: src.parse(&AGW_REDIS_PREFIX, identifier)? }),
        None => None,
    };
    let node_id = src.parse_opt(&AGW_NODE_ID, identifier)?.unwrap_or_else(random_node_id);
    let lease = src.parse(&AGW_CLUSTER_LEASE, value::duration)?;
    if lease < Duration::from_millis(300) {
        return Err(ConfigError::Invalid {
            property: AGW_CLUSTER_LEASE.property,
            env: AGW_CLUSTER_LEASE.env,
            message: "must be at least 300ms".into(),
        });
    }
    let secret = secret(src)?;
    if redis.is_some() && secret.is_none() {
        return Err(invalid(
            &AGW_CLUSTER_SECRET,
            format!(
                "required when agw.redis.url is set: replicas sign the requests and run records they exchange through Redis with it, so that a write to Redis alone cannot act on a run. Give every replica the same random value of at least {} bytes (e.g. `openssl rand -base64 48`), here or in agw.cluster.secret-file (AGW_CLUSTER_SECRET_FILE)",
                ClusterSecret::MIN_LEN
            ),
        ));
    }
    let control_deadline = src.parse(&AGW_CLUSTER_CONTROL_DEADLINE, value::duration)?;
    if !(Duration::from_millis(100)..=Duration::from_secs(60)).contains(&control_deadline) {
        return Err(invalid(&AGW_CLUSTER_CONTROL_DEADLINE, "must be between 100ms and 60s".into()));
    }
    Ok(ClusterSettings { database, redis, node_id, lease, secret, control_deadline })
}

fn invalid(spec: &SettingSpec, message: String) -> ConfigError {
    ConfigError::Invalid { property: spec.property, env: spec.env, message }
}

/// `agw.cluster.secret` or the file `agw.cluster.secret-file` names (surrounding whitespace,
/// such as the file's last newline, is not part of it).
fn secret(src: &Source) -> Result<Option<ClusterSecret>, ConfigError> {
    let inline = src.text(&AGW_CLUSTER_SECRET).filter(|s| !s.trim().is_empty());
    let file = src.text(&AGW_CLUSTER_SECRET_FILE).filter(|p| !p.trim().is_empty());
    let (text, spec) = match (inline, file) {
        (None, None) => return Ok(None),
        (Some(_), Some(_)) => {
            return Err(invalid(
                &AGW_CLUSTER_SECRET_FILE,
                "set only one of agw.cluster.secret (AGW_CLUSTER_SECRET) and agw.cluster.secret-file".into(),
            ));
        }
        (Some(text), None) => (text, &AGW_CLUSTER_SECRET),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path.trim())
                .map_err(|e| invalid(&AGW_CLUSTER_SECRET_FILE, format!("cannot read {:?}: {e}", path.trim())))?;
            (text, &AGW_CLUSTER_SECRET_FILE)
        }
    };
    // The error names the length, never the value.
    ClusterSecret::new(text.trim()).map(Some).map_err(|_| {
        invalid(
            spec,
            format!(
                "the secret has {} bytes; at least {} are required (e.g. `openssl rand -base64 48`)",
                text.trim().len(),
                ClusterSecret::MIN_LEN
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::masked_url;
    use crate::config::Settings;

    const SECRET: &str = "0123456789abcdef0123456789abcdef-cluster";

    fn load(pairs: &[(&str, &str)]) -> Result<Settings, String> {
        Settings::load(None, pairs.iter().map(|(k, v)| (k.to_string(), v.to_string()))).map_err(|e| e.to_string())
    }

    #[test]
    fn clustered_mode_needs_a_secret_of_32_bytes_that_never_shows() {
        let redis = ("AGW_REDIS_URL", "redis://127.0.0.1:6379/");
        let err = load(&[redis]).unwrap_err();
        assert!(err.contains("agw.cluster.secret") && err.contains("AGW_CLUSTER_SECRET"), "{err}");
        assert!(err.contains("required when agw.redis.url is set"), "{err}");
        let err = load(&[redis, ("AGW_CLUSTER_SECRET", "short-but-not-empty")]).unwrap_err();
        assert!(err.contains("19 bytes; at least 32"), "{err}");
        assert!(!err.contains("short-but-not-empty"), "the value is never shown: {err}");

        let s = load(&[redis, ("AGW_CLUSTER_SECRET", SECRET)]).unwrap();
        assert_eq!(s.cluster.secret, Some(agw_cluster::ClusterSecret::new(SECRET).unwrap()));
        assert_eq!(s.cluster.control_deadline, Duration::from_secs(5));
        assert!(!format!("{s:?}").contains(SECRET), "masked in Debug");

        // From a file (its last newline is not part of it); not both.
        let file = std::env::temp_dir().join(format!("agw-cluster-secret-{}", std::process::id()));
        std::fs::write(&file, format!("{SECRET}\n")).unwrap();
        let path = file.display().to_string();
        let s = load(&[redis, ("AGW_CLUSTER_SECRET_FILE", &path)]).unwrap();
        assert_eq!(s.cluster.secret, Some(agw_cluster::ClusterSecret::new(SECRET).unwrap()));
        let err = load(&[redis, ("AGW_CLUSTER_SECRET_FILE", &path), ("AGW_CLUSTER_SECRET", SECRET)]).unwrap_err();
        assert!(err.contains("set only one"), "{err}");
        std::fs::remove_file(&file).unwrap();
        let err = load(&[redis, ("AGW_CLUSTER_SECRET_FILE", &path)]).unwrap_err();
        assert!(err.contains("agw.cluster.secret-file") && err.contains("cannot read"), "{err}");

        // One process needs none; a deadline out of range names its setting.
        assert!(load(&[]).unwrap().cluster.secret.is_none());
        let err = load(&[redis, ("AGW_CLUSTER_SECRET", SECRET), ("AGW_CLUSTER_CONTROL_DEADLINE", "5m")]).unwrap_err();
        assert!(err.contains("agw.cluster.control-deadline"), "{err}");
    }

    #[test]
    fn passwords_never_show() {
        assert_eq!(masked_url("postgres://agw:s3cret@db:5432/agw"), "postgres://agw:***@db:5432/agw");
        assert_eq!(masked_url("redis://:pw@cache:6379/0"), "redis://:***@cache:6379/0");
        assert_eq!(masked_url("redis://cache:6379/"), "redis://cache:6379/");
        assert_eq!(masked_url("postgres://agw@db/agw"), "postgres://agw@db/agw");
    }
}
