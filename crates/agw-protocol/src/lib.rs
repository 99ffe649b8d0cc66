//! agw-protocol — the wire contract of agw, as plain data.
//!
//! Owns: every SSE event type of the contract, emitted or protocol-only (`event`), the request
//! bodies with field-naming parse/validation (`request`), the upstream and semantic delta types
//! (`delta`), citations: records, markers and the streaming marker filter (`citation`), guardrail
//! stages, revocations and status codes (`guard`), the provider-neutral chat request a model turn
//! sends (`chat`), the event assembler that turns semantic deltas into numbered events with the
//! block state machine (`assembler`), id formats and the chat-name rule (`ids`), SSE framing: the
//! frame encoder plus an incremental decoder for clients and tests (`sse`), the chat history line
//! format "V3.1" with its lenient readers (`history`), and the snapshot replay of a chat built
//! from history lines (`replay`), the other protocols' pure mappings (`adapters`), and usage
//! normalising, summing and pricing (`usage`).
//!
//! Must never: do I/O, spawn tasks, read clocks except through the [`assembler::Clock`] it is
//! given ([`assembler::SystemClock`] is the wall-clock one), or depend on tokio/hyper. Other
//! crates and embedders use it to speak agw's protocol.
//!
//! Invariant: one upstream text/argument delta becomes exactly one delta event; events are
//! numbered 1..N without gaps; the terminal event (`run.complete` / `run.error`) is last and unique.

#![forbid(unsafe_code)]
pub mod adapters;
pub mod assembler;
pub mod attachment;
pub mod chat;
pub mod citation;
pub mod delta;
mod echoed;
pub mod event;
pub mod guard;
pub mod history;
pub mod ids;
pub mod replay;
pub mod request;
pub mod sse;
pub mod usage;

pub use assembler::{Assembler, BlockCounts, CANCELLED_RESULT, CallKind, Clock, ProtocolError, SystemClock};
pub use delta::{
    ActionStartMeta, AgentDelta, CallUsage, ChildEnd, ChildTask, FrontendMeta, LlmDelta, ToolCallFragment,
    ToolStartMeta,
};
pub use event::{ErrorCode, Event, EventPayload, PlanTask, RunErrorInfo, TaskError, TaskStatus};
pub use guard::{GuardNotice, GuardStage, Revocation};
pub use history::{
    ApprovalLine, HistoryLine, PlanSnapshot, QueryLine, ResumeAt, Stage, StepLine, StoredFunction, StoredMessage,
    StoredToolCall, SystemMessage, SystemSnapshot, SystemTool,
};
pub use replay::{chat_references, raw_messages, replay_chat};
pub use request::{OnDisconnect, QueryRequest, Reference, RequestError, Scene, SubmitRequest};
pub use sse::{HEARTBEAT_FRAME, SseDecoder, SseFrame, write_event};
