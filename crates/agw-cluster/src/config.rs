//! Settings of the cluster connection.

use std::fmt;
use std::time::Duration;

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
}

impl ClusterConfig {
    /// The defaults with the given Redis URL.
    pub fn new(url: impl Into<String>) -> Self {
        Self { url: url.into(), ..Self::default() }
    }

    /// Checks the values [`crate::Cluster::connect`] relies on.
    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.prefix.is_empty() {
            return Err("prefix must not be empty".into());
        }
        if self.node_id.is_empty() || self.node_id.contains('|') {
            return Err(format!("node id {:?} must be non-empty and contain no '|'", self.node_id));
        }
        if self.lease < Duration::from_millis(30) {
            return Err(format!("lease {:?} is too short (at least 30 ms)", self.lease));
        }
        if self.op_timeout.is_zero() {
            return Err("op_timeout must be positive".into());
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

    #[test]
    fn bad_node_ids_are_refused() {
        let mut cfg = ClusterConfig::default();
        assert!(cfg.validate().is_ok());
        cfg.node_id = "a|b".into();
        assert!(cfg.validate().is_err());
        cfg.node_id = String::new();
        assert!(cfg.validate().is_err());
    }
}
