//! The demo agents bundled into the binary, used when no agents directory is configured, so the
//! first `agw serve` on a fresh machine has something to run. They use the `demo` provider (this
//! crate's model) and the tools, viewports and skills bundled by agw-tools and agw-skills.

/// `(file name, contents)` of every bundled agent file (`agents/`, also at `fixtures/agents/`).
pub const AGENT_FILES: &[(&str, &str)] = &[
    ("demoAction.json", include_str!("../agents/demoAction.json")),
    ("demoApprovals.json", include_str!("../agents/demoApprovals.json")),
    ("demoCitations.json", include_str!("../agents/demoCitations.json")),
    ("demoConfirmDialog.json", include_str!("../agents/demoConfirmDialog.json")),
    ("demoCredits.json", include_str!("../agents/demoCredits.json")),
    ("demoGuardrails.json", include_str!("../agents/demoGuardrails.json")),
    ("demoMathSkill.json", include_str!("../agents/demoMathSkill.json")),
    ("demoModePlain.json", include_str!("../agents/demoModePlain.json")),
    ("demoModePlainTooling.json", include_str!("../agents/demoModePlainTooling.json")),
    ("demoModePlanExecute.json", include_str!("../agents/demoModePlanExecute.json")),
    ("demoModeReact.json", include_str!("../agents/demoModeReact.json")),
    ("demoModeThinking.json", include_str!("../agents/demoModeThinking.json")),
    ("demoStructuredOutput.json", include_str!("../agents/demoStructuredOutput.json")),
    ("demoTeam.json", include_str!("../agents/demoTeam.json")),
    ("demoViewport.json", include_str!("../agents/demoViewport.json")),
];
