//! Per-client accounting at the door: open connections per IP and requests per IP per minute.
//!
//! Both are off (zero) by default on loopback, where the one client is the user, and on by
//! default elsewhere, so one client cannot starve the others (issue 14). Counters live in memory
//! for this process.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use dashmap::DashMap;

use crate::config::ConnectionLimits;

/// Length of one rate window.
const WINDOW: Duration = Duration::from_secs(60);
/// Tracked addresses beyond which stale entries are swept on the next check.
const SWEEP_AT: usize = 10_000;

/// Shared by the accept loop and every connection.
#[derive(Debug, Default)]
pub struct ClientLimits {
    limits: Option<ConnectionLimits>,
    open: AtomicUsize,
    per_ip: DashMap<IpAddr, usize>,
    requests: DashMap<IpAddr, (Instant, u32)>,
}

/// Held for the life of one admitted connection; frees its slots when dropped.
#[derive(Debug)]
pub struct ConnectionSlot {
    owner: Arc<ClientLimits>,
    ip: IpAddr,
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        self.owner.open.fetch_sub(1, Ordering::AcqRel);
        if let dashmap::Entry::Occupied(mut entry) = self.owner.per_ip.entry(self.ip) {
            *entry.get_mut() -= 1;
            if *entry.get() == 0 {
                entry.remove();
            }
        }
    }
}

/// Why a connection was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The server holds `server.max-connections` connections.
    Server,
    /// This address holds `server.max-connections-per-ip` connections.
    Client,
}

impl ClientLimits {
    /// Accounting under `limits`.
    pub fn new(limits: ConnectionLimits) -> Arc<Self> {
        Arc::new(Self { limits: Some(limits), ..Self::default() })
    }

    /// Admits a new connection from `ip`, or says which cap it hit.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<ConnectionSlot, Refusal> {
        let limits =
            self.limits.unwrap_or(ConnectionLimits { max_connections: 0, max_connections_per_ip: 0, ..DEFAULT_LIMITS });
        let open = self.open.fetch_add(1, Ordering::AcqRel) + 1;
        if limits.max_connections > 0 && open > limits.max_connections {
            self.open.fetch_sub(1, Ordering::AcqRel);
            return Err(Refusal::Server);
        }
        let mut count = self.per_ip.entry(ip).or_insert(0);
        if limits.max_connections_per_ip > 0 && *count >= limits.max_connections_per_ip {
            drop(count);
            self.open.fetch_sub(1, Ordering::AcqRel);
            return Err(Refusal::Client);
        }
        *count += 1;
        Ok(ConnectionSlot { owner: Arc::clone(self), ip })
    }

    /// Counts one request from `ip`; `Err(retry_after)` when it is over the per-minute cap.
    pub fn request(&self, ip: IpAddr) -> Result<(), Duration> {
        let cap = self.limits.map_or(0, |l| l.max_requests_per_ip_per_minute);
        if cap == 0 {
            return Ok(());
        }
        let now = Instant::now();
        if self.requests.len() > SWEEP_AT {
            self.requests.retain(|_, (start, _)| now.duration_since(*start) < WINDOW);
        }
        let mut entry = self.requests.entry(ip).or_insert((now, 0));
        let (start, count) = &mut *entry;
        if now.duration_since(*start) >= WINDOW {
            *start = now;
            *count = 0;
        }
        if *count >= cap {
            return Err(WINDOW.saturating_sub(now.duration_since(*start)).max(Duration::from_secs(1)));
        }
        *count += 1;
        Ok(())
    }

    /// Connections open right now.
    #[cfg(test)]
    pub fn open_connections(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }
}

/// Used only when no limits were configured (tests building state by hand).
const DEFAULT_LIMITS: ConnectionLimits = ConnectionLimits {
    header_read_timeout: Duration::from_secs(10),
    body_read_timeout: Duration::from_secs(30),
    max_connections: 0,
    max_connections_per_ip: 0,
    max_requests_per_ip_per_minute: 0,
    max_token_bytes: 16 * 1024,
};

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(total: usize, per_ip: usize, per_minute: u32) -> ConnectionLimits {
        ConnectionLimits {
            max_connections: total,
            max_connections_per_ip: per_ip,
            max_requests_per_ip_per_minute: per_minute,
            ..DEFAULT_LIMITS
        }
    }

    #[test]
    fn connections_are_capped_in_total_and_per_address_and_freed_on_drop() {
        let l = ClientLimits::new(limits(3, 2, 0));
        let (a, b) = (IpAddr::from([10, 0, 0, 1]), IpAddr::from([10, 0, 0, 2]));
        let a1 = l.admit(a).unwrap();
        let _a2 = l.admit(a).unwrap();
        assert_eq!(l.admit(a).unwrap_err(), Refusal::Client);
        let _b1 = l.admit(b).unwrap();
        assert_eq!(l.admit(b).unwrap_err(), Refusal::Server);
        drop(a1);
        assert_eq!(l.open_connections(), 2);
        assert!(l.admit(b).is_ok(), "a freed slot is reusable");
    }

    #[test]
    fn requests_are_rate_limited_per_address() {
        let l = ClientLimits::new(limits(0, 0, 2));
        let (a, b) = (IpAddr::from([10, 0, 0, 1]), IpAddr::from([10, 0, 0, 2]));
        assert!(l.request(a).is_ok() && l.request(a).is_ok());
        let retry = l.request(a).unwrap_err();
        assert!(retry <= WINDOW && retry >= Duration::from_secs(1));
        assert!(l.request(b).is_ok(), "other clients are not affected");
        let off = ClientLimits::new(limits(0, 0, 0));
        assert!((0..10_000).all(|_| off.request(a).is_ok()));
    }
}
