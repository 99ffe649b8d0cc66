//! Shared daily budgets: counters of what was spent, and reservations that runs in flight hold
//! against a limit until their real spend is known. A reservation is a field `node|member` of
//! a hash `{prefix}:reserve:{key}`; fields of nodes whose lease is gone do not count (and are
//! dropped by the next [`Cluster::reserve`]), so a lost replica's runs free what they held.

use std::time::Duration;

use crate::conn::millis;
use crate::{Cluster, ClusterError};

/// What [`Cluster::reserve`] decided, with what it saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reservation {
    /// The reservation was taken: the counter plus the other members' live reservations was
    /// below the limit.
    pub granted: bool,
    /// The counter's value.
    pub spent: i64,
    /// The live reservations of other members.
    pub held: i64,
}

/// A TTL as the scripts take it: milliseconds, 0 for none.
fn ttl_ms(ttl: Duration) -> u64 {
    if ttl.is_zero() { 0 } else { millis(ttl) }
}

impl Cluster {
    /// Reserves `amount` for `member` in `reservations` (refreshing it when `member` already
    /// holds one) when the counter `counter` plus the other live reservations is below `limit`;
    /// atomic across replicas. A new reservation hash expires after `ttl` (zero: never). An `amount` of 0
    /// only checks.
    pub async fn reserve(
        &self,
        counter: &str,
        reservations: &str,
        member: &str,
        amount: u64,
        limit: u64,
        ttl: Duration,
    ) -> Result<Reservation, ClusterError> {
        let (counter, reservations) = (self.inner.keys.counter(counter), self.inner.keys.reservations(reservations));
        let mut inv = self.inner.scripts.reserve.key(&counter);
        inv.key(&reservations)
            .arg(self.member(member))
            .arg(amount)
            .arg(limit)
            .arg(ttl_ms(ttl))
            .arg(self.inner.keys.node_prefix());
        let (granted, spent, held): (i64, i64, i64) = self.eval(|| format!("reserve {reservations}"), &inv).await?;
        Ok(Reservation { granted: granted == 1, spent, held })
    }

    /// One spend, atomically: adds each amount to its counter (a new counter expires after
    /// `ttl`, zero: never; zero amounts are skipped) and takes `settled` off `member`'s reservation in each
    /// of `reservations` (never below 0; a member without one is left alone).
    pub async fn spend(
        &self,
        counters: &[(&str, i64)],
        reservations: &[&str],
        member: &str,
        settled: u64,
        ttl: Duration,
    ) -> Result<(), ClusterError> {
        let mut inv = self.inner.scripts.spend.prepare_invoke();
        for (key, _) in counters {
            inv.key(self.inner.keys.counter(key));
        }
        for key in reservations {
            inv.key(self.inner.keys.reservations(key));
        }
        inv.arg(counters.len()).arg(ttl_ms(ttl)).arg(self.member(member)).arg(settled);
        for (_, amount) in counters {
            inv.arg(*amount);
        }
        self.eval::<i64>(|| format!("spend on {} counters", counters.len()), &inv).await.map(drop)
    }

    /// Removes `member`'s reservation from each of `reservations`.
    pub async fn release_reservation(&self, reservations: &[&str], member: &str) -> Result<(), ClusterError> {
        let field = self.member(member);
        for key in reservations {
            let key = self.inner.keys.reservations(key);
            let mut cmd = redis::cmd("HDEL");
            cmd.arg(&key).arg(&field);
            self.query::<()>(|| format!("HDEL {key}"), &cmd).await?;
        }
        Ok(())
    }

    /// Several counters in one round trip (`MGET`); 0 for a counter that does not exist.
    pub async fn get_counters(&self, keys: &[&str]) -> Result<Vec<i64>, ClusterError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let mut cmd = redis::cmd("MGET");
        for key in keys {
            cmd.arg(self.inner.keys.counter(key));
        }
        let values: Vec<Option<i64>> = self.query(|| format!("MGET {} counters", keys.len()), &cmd).await?;
        Ok(values.into_iter().map(Option::unwrap_or_default).collect())
    }

    /// This node's name for `member` in shared sets and hashes.
    fn member(&self, member: &str) -> String {
        format!("{}|{member}", self.node_id())
    }
}
