//! agw-modes — agent definitions and the sealed mode state machines.
//!
//! Owns: parsing and validating agent files (`definition`: the `"""` prompt syntax, comments,
//! rejected legacy fields, modelConfig/toolConfig inheritance, the catalog of a directory),
//! writing them (`agent_file_create`, [`definition::AgentFileCreate`], with its bundled definition
//! file in [`bundled`]: a typed file checked by the same parser, within the operator's
//! allow-lists) and running an agent (`runtime`: ONESHOT / REACT / PLAN_EXECUTE as a sealed enum, model turns,
//! system-prompt assembly, budgets, tool approvals), emitting semantic
//! [`agw_protocol::AgentDelta`]s into a [`runtime::DeltaSink`].
//!
//! ```
//! use agw_modes::definition::{AgentDefinition, AgentMode};
//!
//! // An agent file as an operator writes it: comments and `"""` prompts are allowed.
//! let agent = AgentDefinition::from_json(
//!     "ops.json",
//!     r#"{
//!       // Looks things up before answering.
//!       "key": "ops",
//!       "mode": "REACT",
//!       "modelConfig": { "providerKey": "lab", "model": "deepseek-chat" },
//!       "toolConfig": { "backends": ["city_datetime"] },
//!       "react": { "maxSteps": 4, "systemPrompt": """
//!           Use tools for facts.
//!       """ }
//!     }"#,
//! )
//! .expect("a valid agent");
//! assert_eq!(agent.key, "ops");
//! assert_eq!(agent.mode_kind(), AgentMode::React);
//!
//! // Legacy fields are errors that name the field (the catalog adds the file).
//! let error = AgentDefinition::from_json("bad.json", r#"{"key":"x","mode":"REACT","tools":[]}"#).unwrap_err();
//! assert!(error.to_string().contains("tools"), "{error}");
//! ```
//!
//! Running one: [`runtime::execute`] with a [`runtime::RunContext`] and any [`runtime::DeltaSink`]
//! (see `examples/react_tool.rs`).
//!
//! Must never: know about HTTP, SSE framing or event numbering (the sink's assembler owns those),
//! or speak a provider wire format (agw-llm does). A broken agent file must never stop the others
//! from loading, and parsing must never panic on any input. `agent_file_create` must never write
//! outside the agents directory, grant a tool or skill off the operator's allow-lists, replace an
//! existing or bundled agent unless the operator allows it, or choose a provider or model (the
//! loader's defaults apply). Approval rules must never read a
//! `_bash_` command other than through [`agw_tools::BashCommand`] (what `_bash_` runs), and a
//! frontend tool or action a rule denies or asks about must never stream before it is decided
//! (the client acts on its start; `docs/approvals.md`).

#![forbid(unsafe_code)]
pub mod bundled;
pub mod definition;
pub mod runtime;
