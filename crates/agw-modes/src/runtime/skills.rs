//! Skills in the system prompt (`docs/contract/modes.md` §6.2–§6.3): the catalog of the agent's skills
//! in every turn, and the deferred disclosure of a skill's full instructions in the one turn after
//! the model ran one of its scripts through `_skill_run_script_`.
//!
//! The state lives in the run ([`super::RunState`]) and nowhere else: system prompts are never
//! recorded, so a disclosure is never persisted and a new run starts with nothing disclosed.

use std::collections::HashSet;

use agw_skills::{SKILL_RUN_SCRIPT, normalize_id};
use serde_json::Value;

use super::RunContext;

/// The skill sections of one run's system prompts.
#[derive(Debug, Default)]
pub(crate) struct SkillPrompts {
    /// The catalog section, the same in every turn; `""` when no configured skill exists.
    catalog: String,
    /// Skills whose instructions the next turn discloses, in call order.
    pending: Vec<String>,
    /// Skills disclosed earlier in this run; they are never disclosed again.
    disclosed: HashSet<String>,
}

impl SkillPrompts {
    /// The run's catalog, built once from the agent's skills and the run's skill registry.
    pub fn for_run(ctx: &RunContext) -> SkillPrompts {
        let header = &ctx.agent.runtime_prompts.skill_catalog_header;
        let catalog = ctx.services.skills.catalog_prompt(&ctx.agent.skills, header);
        SkillPrompts { catalog, ..SkillPrompts::default() }
    }

    pub fn catalog(&self) -> &str {
        &self.catalog
    }

    /// Notes one executed tool call. A `_skill_run_script_` call whose `skill` (trimmed,
    /// lower-cased) names a skill the agent configures and the registry has, not yet disclosed in
    /// this run, queues that skill's disclosure for the next turn; any other skill is ignored with
    /// a warning.
    pub fn note_call(&mut self, ctx: &RunContext, tool: &str, args: &Value) {
        if tool != SKILL_RUN_SCRIPT {
            return;
        }
        let id = normalize_id(args.get("skill").and_then(Value::as_str).unwrap_or_default());
        if id.is_empty() {
            return;
        }
        if !ctx.agent.skills.contains(&id) || ctx.services.skills.get(&id).is_none() {
            tracing::warn!(
                run_id = %ctx.run_id,
                agent = %ctx.agent.key,
                skill = %id,
                "skill disclosure requested unknown skill '{id}' (not configured for the agent, or not in the skills directory); ignored"
            );
            return;
        }
        if !self.disclosed.contains(&id) && !self.pending.contains(&id) {
            self.pending.push(id);
        }
    }

    /// The disclosure section of the turn about to be sent, `""` when none is due. The queue is
    /// emptied and its skills count as disclosed for the rest of the run.
    pub fn take_disclosure(&mut self, ctx: &RunContext) -> String {
        if self.pending.is_empty() {
            return String::new();
        }
        let ids = std::mem::take(&mut self.pending);
        let prompts = &ctx.agent.runtime_prompts;
        let section = ctx.services.skills.disclosure_prompt(
            &ids,
            &prompts.skill_disclosure_header,
            &prompts.skill_instructions_label,
            ctx.services.skill_max_prompt_chars,
        );
        tracing::debug!(run_id = %ctx.run_id, skills = ?ids, "skill instructions disclosed in this turn");
        self.disclosed.extend(ids);
        section
    }
}
