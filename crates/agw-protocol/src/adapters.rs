//! Other wire protocols for agw's runs (issue 16): pure mappings from agw's [`Event`]s to the
//! frames of each protocol, one mapper per stream, tested event by event. The HTTP layer picks
//! the adapter by endpoint; the native dialect (`sse`) stays the default.
//!
//! [`Event`]: crate::Event

pub mod ag_ui;
pub mod ai_sdk;
pub mod openai_chat;
