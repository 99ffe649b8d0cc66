//! agw-tools — the tool registry and the built-in tools.
//!
//! Will own: loading `*.backend` / `*.frontend` / `*.action` definition files, the `Tool` trait
//! for backend tools, the registry the modes query by name, and the built-ins (`_bash_`,
//! `city_datetime`, the `mock_*` tools, `agent_file_create`, later the plan tools).
//!
//! Must never: talk to a model provider, write SSE, or know about HTTP. `_bash_` must never run a
//! command outside its allow-list or touch a path outside its allowed roots.
//!
//! Status: empty until the tools/REACT issue lands; nothing here pretends to work yet.
