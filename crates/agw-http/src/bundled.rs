//! The demo agents bundled into the binary, used when no agents directory is configured, so the
//! first `agw serve` on a fresh machine has something to run. Tools and viewports are bundled by
//! agw-tools.

/// `(file name, contents)` of every bundled agent file (`fixtures/agents/`).
pub const AGENT_FILES: &[(&str, &str)] = &[
    ("demoAction.json", include_str!("../../../fixtures/agents/demoAction.json")),
    ("demoConfirmDialog.json", include_str!("../../../fixtures/agents/demoConfirmDialog.json")),
    ("demoMathSkill.json", include_str!("../../../fixtures/agents/demoMathSkill.json")),
    ("demoModePlain.json", include_str!("../../../fixtures/agents/demoModePlain.json")),
    ("demoModePlainTooling.json", include_str!("../../../fixtures/agents/demoModePlainTooling.json")),
    ("demoModePlanExecute.json", include_str!("../../../fixtures/agents/demoModePlanExecute.json")),
    ("demoModeReact.json", include_str!("../../../fixtures/agents/demoModeReact.json")),
    ("demoModeThinking.json", include_str!("../../../fixtures/agents/demoModeThinking.json")),
    ("demoViewport.json", include_str!("../../../fixtures/agents/demoViewport.json")),
];
