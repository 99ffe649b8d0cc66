//! Shared cool-downs: a key `{prefix}:cooldown:{name}` per thing that is to be left alone for a
//! while (agw: a model that just failed), set with a PX expiry, so every replica sees it until it
//! expires and nobody has to clean up.

use std::time::Duration;

use crate::conn::millis;
use crate::{Cluster, ClusterError};

impl Cluster {
    /// Starts (or restarts) the cool-down `name` for `ttl` from now; the value is this node's id,
    /// for whoever looks. A later call sets a new end, shorter or longer. A zero `ttl` does
    /// nothing.
    pub async fn set_cooldown(&self, name: &str, ttl: Duration) -> Result<(), ClusterError> {
        if ttl.is_zero() {
            return Ok(());
        }
        let key = self.inner.keys.cooldown(name);
        let mut cmd = redis::cmd("SET");
        cmd.arg(&key).arg(self.node_id()).arg("PX").arg(millis(ttl).max(1));
        self.query::<()>(|| format!("SET {key}"), &cmd).await
    }

    /// Which of `names` are cooling down now, in order, in one round trip (`MGET`).
    pub async fn cooling(&self, names: &[&str]) -> Result<Vec<bool>, ClusterError> {
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let mut cmd = redis::cmd("MGET");
        for name in names {
            cmd.arg(self.inner.keys.cooldown(name));
        }
        let values: Vec<Option<String>> = self.query(|| format!("MGET {} cool-downs", names.len()), &cmd).await?;
        Ok(values.into_iter().map(|v| v.is_some()).collect())
    }
}
