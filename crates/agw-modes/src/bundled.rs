//! The tool definition files of the tools agw-modes implements (`bundled/tools/`), embedded like
//! [`agw_tools::bundled::TOOL_FILES`]: a gateway lists them with those and copies them into the
//! tools directory the same way.

/// `(file name, contents)` of every bundled tool definition file of this crate.
pub const TOOL_FILES: &[(&str, &str)] =
    &[("agent_file_create.backend", include_str!("../bundled/tools/agent_file_create.backend"))];
