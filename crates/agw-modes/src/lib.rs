//! agw-modes — agent definitions and the sealed mode state machines.
//!
//! Owns: parsing and validating agent files (`definition`: the `"""` prompt syntax, comments,
//! rejected legacy fields, modelConfig/toolConfig inheritance, the catalog of a directory) and
//! running an agent (`runtime`: ONESHOT / REACT / PLAN_EXECUTE as a sealed enum, model turns,
//! system-prompt assembly, budgets), emitting semantic [`agw_protocol::AgentDelta`]s into a
//! [`runtime::DeltaSink`].
//!
//! Must never: know about HTTP, SSE framing or event numbering (the sink's assembler owns those),
//! or speak a provider wire format (agw-llm does). A broken agent file must never stop the others
//! from loading, and parsing must never panic on any input.

#![forbid(unsafe_code)]
pub mod definition;
pub mod runtime;
