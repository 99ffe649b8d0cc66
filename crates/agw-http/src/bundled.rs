//! The demo agents bundled into the binary, used when no agents directory is configured, so the
//! first `agw serve` on a fresh machine has something to run.

/// `(file name, contents)` of every bundled agent file (`fixtures/agents/`).
pub const AGENT_FILES: &[(&str, &str)] = &[
    ("demoModePlain.json", include_str!("../../../fixtures/agents/demoModePlain.json")),
    ("demoModeThinking.json", include_str!("../../../fixtures/agents/demoModeThinking.json")),
];
