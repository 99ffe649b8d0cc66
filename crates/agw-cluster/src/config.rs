//! Settings of the cluster connection.

use std::fmt;
use std::time::Duration;

use crate::ClusterSecret;

/// Where the shared Redis is and how this node behaves in the cluster.
#[derive(Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    /// Redis URL, e.g. `redis://127.0.0.1:6379/` or `rediss://user:pass@host:6380/0`.
    pub url: String,
    /// Prefix of every key this crate writes (default `agw`); replicas of one deployment share it.
    pub prefix: String,
    /// This node's id (default: a random UUID). Must be non-empty and contain no `|`.
    pub node_id: String,
    /// How long this node's lease lives without a refresh (default 10 s). The heartbeat refreshes
    /// it every lease/3; other nodes treat this node as dead once it is gone.
    pub lease: Duration,
    /// Approximate cap on the frames kept per run (`XADD MAXLEN ~`, default 10 000). 0: no cap.
    pub stream_max_events: usize,
    /// How long a finished run's record and frames stay (default 300 s).
    pub retention: Duration,
    /// Bound on each Redis command and on connecting (default 2 s).
    pub op_timeout: Duration,
    /// The secret every node of the deployment shares: control requests, their replies and run
    /// records are signed with it. Required: [`crate::Cluster::connect`] refuses `None`.
    pub secret: Option<ClusterSecret>,
    /// The longest a control request is valid (default 5 s): [`crate::Cluster::send_control`]
    /// waits at most this long, and a node refuses a request whose deadline lies further ahead
    /// (beyond 2 s of clock skew). Nodes of one deployment should agree on it.
    pub control_ttl: Duration,
}

/// Why a [`ClusterConfig`] or a [`ClusterSecret`] is not usable; carried by
/// [`crate::ClusterError::Config`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterConfigError {
    /// [`ClusterConfig::prefix`] is empty.
    #[error("prefix must not be empty")]
    EmptyPrefix,
    /// [`ClusterConfig::node_id`] is empty or contains `|`; carries it.
    #[error("node id {0:?} must be non-empty and contain no '|'")]
    NodeId(String),
    /// [`ClusterConfig::lease`] is under 30 ms; carries it.
    #[error("lease {0:?} is too short (at least 30 ms)")]
    LeaseTooShort(Duration),
    /// [`ClusterConfig::op_timeout`] is zero.
    #[error("op_timeout must be positive")]
    ZeroOpTimeout,
    /// [`ClusterConfig::secret`] is `None`.
    #[error(
        "a cluster secret is required: nodes sign control requests and run records with it, so that a write to Redis alone cannot act on a run"
    )]
    MissingSecret,
    /// [`ClusterConfig::control_ttl`] is under 100 ms; carries it.
    #[error("control_ttl {0:?} is too short (at least 100 ms)")]
    ControlTtlTooShort(Duration),
    /// The secret given to [`ClusterSecret::new`] is shorter than [`ClusterSecret::MIN_LEN`].
    #[error("the cluster secret has {len} bytes; at least {} are required", ClusterSecret::MIN_LEN)]
    SecretTooShort {
        /// Its length in bytes.
        len: usize,
    },
}

impl ClusterConfig {
    /// The defaults with the given Redis URL.
    pub fn new(url: impl Into<String>) -> Self {
        Self { url: url.into(), ..Self::default() }
    }

    /// Checks the values [`crate::Cluster::connect`] relies on.
    pub(crate) fn validate(&self) -> Result<(), ClusterConfigError> {
        if self.prefix.is_empty() {
            return Err(ClusterConfigError::EmptyPrefix);
        }
        if self.node_id.is_empty() || self.node_id.contains('|') {
            return Err(ClusterConfigError::NodeId(self.node_id.clone()));
        }
        if self.lease < Duration::from_millis(30) {
            return Err(ClusterConfigError::LeaseTooShort(self.lease));
        }
        if self.op_timeout.is_zero() {
            return Err(ClusterConfigError::ZeroOpTimeout);
        }
        if self.secret.is_none() {
            return Err(ClusterConfigError::MissingSecret);
        }
        if self.control_ttl < Duration::from_millis(100) {
            return Err(ClusterConfigError::ControlTtlTooShort(self.control_ttl));
        }
        Ok(())
    }
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            url: "redis://127.0.0.1:6379/".into(),
            prefix: "agw".into(),
            node_id: uuid::Uuid::new_v4().to_string(),
            lease: Duration::from_secs(10),
            stream_max_events: 10_000,
            retention: Duration::from_secs(300),
            op_timeout: Duration::from_secs(2),
            secret: None,
            control_ttl: Duration::from_secs(5),
        }
    }
}

// Hand-written so that a password in the URL never reaches a log line.
impl fmt::Debug for ClusterConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterConfig")
            .field("url", &redact_url(&self.url))
            .field("prefix", &self.prefix)
            .field("node_id", &self.node_id)
            .field("lease", &self.lease)
            .field("stream_max_events", &self.stream_max_events)
            .field("retention", &self.retention)
            .field("op_timeout", &self.op_timeout)
            .field("secret", &self.secret)
            .field("control_ttl", &self.control_ttl)
            .finish()
    }
}

/// The URL with any user info (`user:password@`) replaced by `***@`.
pub(crate) fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else { return url.to_owned() };
    let rest = &url[scheme_end + 3..];
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{}://***@{}", &url[..scheme_end], &rest[at + 1..]),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_their_credentials_in_logs() {
        assert_eq!(redact_url("redis://127.0.0.1:6379/"), "redis://127.0.0.1:6379/");
        assert_eq!(redact_url("redis://:secret@host:6379/0"), "redis://***@host:6379/0");
        assert_eq!(redact_url("rediss://user:p@ss@host"), "rediss://***@host");
        assert_eq!(redact_url("redis://host/db@x"), "redis://host/db@x");
        let cfg = ClusterConfig::new("redis://u:hunter2@h/");
        assert!(!format!("{cfg:?}").contains("hunter2"));
    }

    fn with_secret() -> ClusterConfig {
        ClusterConfig { secret: Some(ClusterSecret::new([7u8; 32]).unwrap()), ..ClusterConfig::default() }
    }

    #[test]
    fn a_secret_is_required_and_never_shown() {
        assert_eq!(ClusterConfig::default().validate(), Err(ClusterConfigError::MissingSecret));
        let cfg = ClusterConfig {
            secret: Some(ClusterSecret::new("s3cret-s3cret-s3cret-s3cret-s3cret").unwrap()),
            ..ClusterConfig::default()
        };
        assert!(cfg.validate().is_ok());
        assert!(!format!("{cfg:?}").contains("s3cret"));
    }

    #[test]
    fn bad_node_ids_are_refused() {
        let mut cfg = with_secret();
        assert!(cfg.validate().is_ok());
        cfg.node_id = "a|b".into();
        assert_eq!(cfg.validate().unwrap_err().to_string(), "node id \"a|b\" must be non-empty and contain no '|'");
        cfg.node_id = String::new();
        assert!(cfg.validate().is_err());
    }
}
