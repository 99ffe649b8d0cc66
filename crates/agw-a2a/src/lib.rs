//! agw-a2a — the A2A (Agent2Agent 1.0) client side of agw: remote A2A agents offered to models as
//! agw tools (`docs/a2a.md`).
//!
//! Owns:
//! * remote agent declarations: one `*.json` file per agent in a directory (its URL, the
//!   variable holding its bearer token, timeouts, streaming, enabled) ([`RemoteAgentConfig`],
//!   [`load_dir`]); a broken file is a [`LoadProblem`] and the others still load;
//! * [`RemoteAgentTool`]: each remote agent as the [`agw_tools::Tool`] `a2a__<name>` — its card
//!   read (and cached) for its description, skills and endpoint; a call sends the model's
//!   message (streaming when the card offers it, over the JSON-RPC binding), continues the same
//!   remote conversation for the same chat (a `contextId` derived from the chat), answers with
//!   the remote task's state and final text, lets the model answer a remote task that asks for
//!   input (its `taskId`), and cancels the remote task when the call is dropped (an interrupt).
//!
//! Must never: send a token to anything but the declared agent's origin (a card naming another
//! origin is not followed), follow a redirect, read more of a remote answer than its caps, wait
//! longer than the agent's timeout, write a token to a log, `Debug` output or error, panic on a
//! remote that misbehaves, or know about agents, modes, HTTP routes or model providers.

#![forbid(unsafe_code)]

mod client;
mod config;
mod tool;

pub use client::CallError;
pub use config::{ConfigError, LoadProblem, RemoteAgentConfig, load_dir, parse_agent};
pub use tool::{RemoteAgentTool, tools_of};
