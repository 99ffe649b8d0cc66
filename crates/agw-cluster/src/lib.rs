//! agw-cluster — the state several agw replicas share through Redis.
//!
//! Owns: everything several agw replicas share, under one key prefix (default `agw`, see
//! [`ClusterConfig::prefix`]):
//! - node leases: `{prefix}:node:{id}`, set with a PX expiry and refreshed by a heartbeat task
//!   every lease/3; a node whose key is gone is dead ([`Cluster::node_alive`]);
//! - run records: `{prefix}:run:{id}` (a hash, [`RunRecord`]), without expiry while the run is
//!   live and kept for [`ClusterConfig::retention`] once it finished; the run, chat and agent ids
//!   and the owner are signed (field `mac`), a record whose signature fails reads as absent;
//! - each run's event frames: `{prefix}:run:{id}:frames`, a Redis stream whose entry ids are
//!   `{seq}-0` (field `f` = the frame's bytes, `m` = its MAC), appended idempotently
//!   ([`Cluster::append_frames`]) and followed from a cursor by any replica ([`Cluster::follow`]),
//!   which skips an entry whose MAC does not verify; the node running the run writes them fenced
//!   ([`Cluster::mirror_frames`]: refused once the record names another node) with a signed
//!   progress note on the record (`progress`, `progress_mac`) for whoever takes the run over;
//! - request/reply control messages to the node that owns a run: an inbox list per node
//!   `{prefix}:node:{id}:inbox` and one short-lived reply list per request
//!   `{prefix}:reply:{request id}` ([`Cluster::serve_control`], [`Cluster::send_control`]),
//!   each signed (`envelope.rs`);
//! - one run per chat across replicas: `{prefix}:chat:{id}:run` = `node|run`
//!   ([`Cluster::acquire_chat`]);
//! - exactly-once claims `{prefix}:claim:{key}` ([`Cluster::claim`]) and shared quotas: member
//!   sets `{prefix}:limit:{key}`, fixed windows `{prefix}:window:{key}`, counters
//!   `{prefix}:counter:{key}` and reservations against a limit `{prefix}:reserve:{key}` (a hash
//!   of `node|member` fields, [`Cluster::reserve`]);
//! - cool-downs `{prefix}:cooldown:{name}` with a PX expiry ([`Cluster::set_cooldown`],
//!   [`Cluster::cooling`]): agw keeps a model that just failed aside for every replica.
//!
//! Invariants:
//! - Redis is not trusted with authority: whatever a node acts on or forwards for another node
//!   (a control request and its reply, the owner in a run record, a run's frames) carries an HMAC-SHA256 made with the deployment's
//!   [`ClusterSecret`] and is refused when it does not verify; a control request is also
//!   refused past its deadline, on any node but its target, and when its nonce was seen.
//!   Refusals are logged (`warn`), never handed to the caller's handler.
//! - Every command on the shared path goes through one auto-reconnecting multiplexed connection
//!   and is bounded by [`ClusterConfig::op_timeout`]: a Redis outage yields [`ClusterError`]s,
//!   never a hang. Blocking commands (`XREAD BLOCK`, `BLPOP`) run on dedicated connections, never
//!   on the shared one, so they cannot stall other commands.
//! - Checks that decide between replicas (chat lock, limited sets, reservations, idempotent
//!   appends, status changes) are single Lua scripts, hence atomic. A holder or member whose
//!   node lease is gone does not count.
//! - A graceful [`Cluster::shutdown`] deletes the node's lease at once: leaving is not a loss.
//!
//! Must never: know about HTTP, SSE or agw's event types (frames are opaque bytes, owners opaque
//! JSON), depend on another agw crate, or keep state only in one replica's memory that another
//! replica would need. The Lua scripts touch node-lease keys they do not declare, so this crate
//! targets a single Redis (or a primary with replicas), not Redis Cluster.

#![forbid(unsafe_code)]

mod budgets;
mod cluster;
mod config;
mod conn;
mod control;
mod cooldowns;
mod envelope;
mod error;
mod frames;
mod keys;
mod replay;
mod scripts;
mod secret;
mod types;

pub use budgets::Reservation;
pub use cluster::Cluster;
pub use config::{ClusterConfig, ClusterConfigError};
pub use error::ClusterError;
pub use secret::ClusterSecret;
pub use types::{Appended, ControlKind, ControlReply, ControlRequest, FollowItem, Frame, RunRecord};

// The HTTP layer shares one cluster handle between tasks and moves followers into body streams.
const _: () = {
    const fn assert_send_sync<T: Send + Sync + 'static>() {}
    assert_send_sync::<Cluster>();
    assert_send_sync::<ClusterError>();
    assert_send_sync::<ClusterConfig>();
    assert_send_sync::<ClusterSecret>();
};
