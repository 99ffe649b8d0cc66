//! The one error type of the cluster layer.

/// A cluster operation failed. The variants are tuple or unit variants on purpose except
/// [`ClusterError::NoReply`], so that both `Redis(..)` and `Redis { .. }` patterns match.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// Redis was unreachable or a command failed. The string says what was attempted (the
    /// command and key, or `connect to <url>` with any password redacted).
    #[error("cluster: {0}: {1}")]
    Redis(String, #[source] redis::RedisError),
    /// Redis did not answer within [`crate::ClusterConfig::op_timeout`].
    #[error("cluster: redis did not answer within the operation timeout")]
    Timeout,
    /// The node a control request was sent to did not answer in time (it may be dead, or not
    /// serving control requests).
    #[error("cluster: node {node} did not answer the control request in time")]
    NoReply {
        /// The node the request was sent to.
        node: String,
    },
    /// A value read from Redis (or a control message) could not be decoded.
    #[error("cluster: cannot decode {0}")]
    Decode(String),
    /// The [`crate::ClusterConfig`] is not usable (e.g. a node id containing `|`).
    #[error("cluster: invalid configuration: {0}")]
    Config(#[from] crate::ClusterConfigError),
}

impl ClusterError {
    /// Whether the error says Redis itself is unavailable (unreachable, connection lost or too
    /// slow), as opposed to a refused command or bad data.
    pub fn is_unavailable(&self) -> bool {
        match self {
            Self::Timeout => true,
            Self::Redis(_, e) => {
                e.is_io_error() || e.is_timeout() || e.is_connection_refusal() || e.is_unrecoverable_error()
            }
            Self::NoReply { .. } | Self::Decode(_) | Self::Config(_) => false,
        }
    }
}
