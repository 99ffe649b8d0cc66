//! The values exchanged with the cluster.

use serde::{Deserialize, Serialize};

/// What every replica knows about a run: who runs it and how far it got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The run's id.
    pub run_id: String,
    /// The chat the run belongs to.
    pub chat_id: String,
    /// The agent that runs it.
    pub agent_key: String,
    /// The node executing the run (changed by adoption, [`crate::Cluster::set_run_node`]).
    pub node_id: String,
    /// The run's owner as opaque JSON (whoever may read or control it), if any. Signed with the
    /// cluster secret together with the run, chat and agent ids: a record whose signature fails
    /// is not returned ([`crate::Cluster::get_run`]).
    pub owner: Option<String>,
    /// `running`, `waiting`, `completed`, `failed` or `cancelled`.
    pub status: String,
}

/// One event frame of a run: its sequence number (from 1, strictly increasing) and opaque bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The frame's sequence number; the stream entry id is `{seq}-0`.
    pub seq: u64,
    /// The frame as the producer encoded it.
    pub bytes: bytes::Bytes,
}

/// How a fenced write of a run's frames went ([`crate::Cluster::mirror_frames`],
/// [`crate::Cluster::finish_run`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Appended {
    /// Written (frames already in the stream skipped).
    Done,
    /// Refused: the run's record names another node, which took the run over. Nothing was
    /// written; the caller must stop speaking for the run.
    TakenOver,
}

/// What a follower of a run's frames yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FollowItem {
    /// The next frame.
    Frame(Frame),
    /// Nothing arrived within about a second (lets the caller check liveness or send a
    /// heartbeat).
    Idle,
}

/// What a control request asks of the replica running the run. A request whose kind is none of
/// these does not decode, so it is refused with the forged and malformed ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ControlKind {
    /// Stop the run (its body names the run).
    Interrupt,
    /// Add a message the run takes at its next model turn (the body is the steer request).
    Steer,
    /// Answer what the run waits for: a frontend tool, an ask, an approval (the body is the
    /// submit request).
    Submit,
}

impl ControlKind {
    /// The name on the wire and in logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Interrupt => "interrupt",
            Self::Steer => "steer",
            Self::Submit => "submit",
        }
    }
}

impl std::fmt::Display for ControlKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A request to the node that owns a run (interrupt, steer, submit). It travels signed with the
/// cluster secret (sender, target, deadline and a nonce included), so the receiving node's
/// handler only ever sees requests another node of the deployment sent, once, in time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ControlRequest {
    /// What is asked.
    pub kind: ControlKind,
    /// The run the request is about.
    pub run_id: String,
    /// The request's payload.
    pub body: serde_json::Value,
    /// Who asks, as opaque JSON (like [`RunRecord::owner`]); `None` when the sender had no
    /// authenticated caller. The handler checks it against the run's owner.
    #[serde(default)]
    pub principal: Option<serde_json::Value>,
}

/// The answer of a control handler.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ControlReply {
    /// 200: answered (the answer is the body's `data`); anything else: refused (agw's run
    /// service puts its typed refusal in the body's `error`).
    pub status: u16,
    /// The reply's payload.
    pub body: serde_json::Value,
}
