//! `agw.database.*`, `agw.redis.*`, `agw.node.id`, `agw.cluster.lease`: running several replicas
//! on PostgreSQL (chat memory) and Redis (live runs) — `docs/deployment.md`.

use std::time::Duration;

use super::source::Source;
use super::table::{
    AGW_CLUSTER_LEASE, AGW_DATABASE_POOL_SIZE, AGW_DATABASE_SCHEMA, AGW_DATABASE_URL, AGW_NODE_ID, AGW_REDIS_PREFIX,
    AGW_REDIS_URL,
};
use super::{ConfigError, value};

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
        Self { database: None, redis: None, node_id: random_node_id(), lease: Duration::from_secs(10) }
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

fn identifier(s: &str) -> Result<String, String> {
    let s = s.trim();
    let ok = !s.is_empty()
        && s.len() <= 63
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == ':' || c == '.');
    if ok { Ok(s.to_owned()) } else { Err("expected 1–63 characters of a-z, 0-9, _, -, :, .".into()) }
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
    Ok(ClusterSettings { database, redis, node_id, lease })
}

#[cfg(test)]
mod tests {
    use super::masked_url;

    #[test]
    fn passwords_never_show() {
        assert_eq!(masked_url("postgres://agw:s3cret@db:5432/agw"), "postgres://agw:***@db:5432/agw");
        assert_eq!(masked_url("redis://:pw@cache:6379/0"), "redis://:***@cache:6379/0");
        assert_eq!(masked_url("redis://cache:6379/"), "redis://cache:6379/");
        assert_eq!(masked_url("postgres://agw@db/agw"), "postgres://agw@db/agw");
    }
}
