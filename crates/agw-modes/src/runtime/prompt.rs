//! Effective system prompt of one turn (`docs/contract/modes.md` §6).

/// The parts of a stage's system prompt that stay the same for every turn of the stage: the stage
/// prompt (for the plan stage already augmented, §5.2) and the tool appendix (§6.1). The skill
/// sections are added per turn by [`StagePrompt::effective`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct StagePrompt {
    pub stage: String,
    pub tool_descriptions: String,
    /// Empty in plan-draft / plan-generate turns.
    pub after_call_hints: String,
    /// How to cite, for an agent with citable tools (issue 35); empty otherwise.
    pub citations: String,
}

impl StagePrompt {
    /// The system prompt of one turn: stage prompt, skill catalog, deferred skill disclosure,
    /// tool descriptions, after-call hints, the citation instruction — joined by [`assemble`].
    pub fn effective(&self, skill_catalog: &str, skill_disclosure: &str) -> String {
        assemble(&[
            &self.stage,
            skill_catalog,
            skill_disclosure,
            &self.tool_descriptions,
            &self.after_call_hints,
            &self.citations,
        ])
    }
}

/// Joins the non-blank parts with a blank line and trims the result.
pub fn assemble(parts: &[&str]) -> String {
    let joined: Vec<&str> = parts.iter().copied().filter(|p| !p.trim().is_empty()).collect();
    joined.join("\n\n").trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_parts_are_skipped_and_result_trimmed() {
        assert_eq!(assemble(&["  You are A.", "", "  ", "tools:\n- x: y\n"]), "You are A.\n\ntools:\n- x: y");
        assert_eq!(assemble(&["", " "]), "");
    }

    #[test]
    fn skill_sections_sit_between_stage_prompt_and_tool_appendix() {
        let prompt = StagePrompt {
            stage: "You are A.".into(),
            tool_descriptions: "Tools:\n- t: d".into(),
            after_call_hints: "Hints:\n- t: h".into(),
            citations: String::new(),
        };
        assert_eq!(
            prompt.effective("Skills:\n\nskillId: s", "Now:\n\nskillId: s\ninstructions:\nbody"),
            "You are A.\n\nSkills:\n\nskillId: s\n\nNow:\n\nskillId: s\ninstructions:\nbody\n\nTools:\n- t: d\n\nHints:\n- t: h"
        );
        assert_eq!(prompt.effective("", " "), "You are A.\n\nTools:\n- t: d\n\nHints:\n- t: h");
        assert_eq!(StagePrompt::default().effective("", ""), "");
    }
}
