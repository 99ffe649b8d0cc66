//! The nonces of control requests a node accepted, each kept until its request's deadline has
//! passed (after that the deadline check refuses it anyway): bounded in time and in size.

use std::collections::HashMap;

use crate::envelope::Refusal;

/// Most nonces remembered at once. Only requests whose MAC verified get here, so only replicas
/// can fill it: at the default 5 s deadline this is over 10,000 forwarded requests a second.
pub(crate) const CAPACITY: usize = 65_536;
/// Least time between two sweeps of expired nonces (one is also made when the cache is full).
const SWEEP_EVERY_MS: u64 = 1_000;

/// Nonce → the deadline of its request (Unix ms).
#[derive(Debug)]
pub(crate) struct ReplayCache {
    seen: HashMap<String, u64>,
    capacity: usize,
    last_sweep_ms: u64,
}

impl ReplayCache {
    pub(crate) fn new(capacity: usize) -> Self {
        Self { seen: HashMap::new(), capacity, last_sweep_ms: 0 }
    }

    /// Records `nonce` (valid until `deadline_ms`) at `now_ms`; refused when it was seen, or
    /// when the cache is full of requests still within their deadline.
    pub(crate) fn admit(&mut self, nonce: &str, deadline_ms: u64, now_ms: u64) -> Result<(), Refusal> {
        if self.seen.len() >= self.capacity || now_ms >= self.last_sweep_ms.saturating_add(SWEEP_EVERY_MS) {
            self.seen.retain(|_, deadline| *deadline >= now_ms);
            self.last_sweep_ms = now_ms;
        }
        if self.seen.contains_key(nonce) {
            return Err(Refusal::Replayed);
        }
        if self.seen.len() >= self.capacity {
            return Err(Refusal::ReplayCacheFull);
        }
        self.seen.insert(nonce.to_owned(), deadline_ms);
        Ok(())
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.seen.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nonce_is_admitted_once_while_its_deadline_lasts() {
        let mut cache = ReplayCache::new(8);
        assert_eq!(cache.admit("n1", 5_000, 1_000), Ok(()));
        assert_eq!(cache.admit("n1", 5_000, 1_001), Err(Refusal::Replayed));
        assert_eq!(cache.admit("n1", 5_000, 5_000), Err(Refusal::Replayed), "still within its deadline");
        assert_eq!(cache.admit("n2", 5_000, 1_002), Ok(()));
    }

    #[test]
    fn expired_nonces_are_forgotten_and_the_size_is_bounded() {
        let mut cache = ReplayCache::new(4);
        for (i, nonce) in ["a", "b", "c", "d"].iter().enumerate() {
            assert_eq!(cache.admit(nonce, 2_000 + i as u64, 1_000), Ok(()));
        }
        assert_eq!(cache.admit("e", 9_000, 1_500), Err(Refusal::ReplayCacheFull), "all four still live");
        // Past the first two deadlines those two are swept; the others stay.
        assert_eq!(cache.admit("e", 9_000, 2_002), Ok(()));
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.admit("c", 9_000, 2_002), Err(Refusal::Replayed));
        // The periodic sweep keeps it small without being full.
        assert_eq!(cache.admit("f", 9_000, 8_000), Ok(()));
        assert_eq!(cache.len(), 2, "only e and f are within their deadline");
    }
}
