//! This replica's membership of a cluster.

use agw_cluster::Cluster;

/// This replica's membership: the Redis connection and its lease.
pub struct Node {
    /// The shared Redis state.
    pub cluster: Cluster,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node").field("id", &self.cluster.node_id()).finish()
    }
}

impl Node {
    /// This replica's id.
    pub fn id(&self) -> &str {
        self.cluster.node_id()
    }
}
