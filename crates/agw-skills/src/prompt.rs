//! The two skill sections of a system prompt (docs/contract/modes.md §6.2–§6.3): the catalog, shown in every turn
//! of an agent that configures skills, and the deferred disclosure of a skill's full instructions,
//! shown in the one turn after the model ran one of its scripts.

use std::collections::HashSet;

use crate::registry::{Skill, SkillRegistry, normalize_id};

/// Default of `agent.skill.max-prompt-chars`.
pub const DEFAULT_MAX_PROMPT_CHARS: usize = 8000;

/// Separator between skill blocks.
const BLOCK_SEPARATOR: &str = "\n\n---\n\n";

/// A skill body cut to `max_chars` characters (Unicode scalar values, never inside one), followed by
/// `\n\n[TRUNCATED: skill prompt exceeds maxPromptChars=<max_chars>]` when it was longer. `0` means
/// unlimited.
pub fn truncate_body(body: &str, max_chars: usize) -> String {
    if max_chars == 0 {
        return body.to_owned();
    }
    match body.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}\n\n[TRUNCATED: skill prompt exceeds maxPromptChars={max_chars}]", &body[..cut]),
        None => body.to_owned(),
    }
}

impl SkillRegistry {
    /// The skill catalog (§6.2): `<header>\n\n` + one block per configured skill that exists, in
    /// the order of `ids`, joined by `\n\n---\n\n`; a block is `skillId: <id>` + `\nname: <name>`
    /// (if non-blank) + `\ndescription: <description>` (if non-blank). Unknown ids are skipped with
    /// a warning, repeated ids count once. `""` when no configured skill exists. Never contains a
    /// body.
    pub fn catalog_prompt(&self, ids: &[String], header: &str) -> String {
        let blocks: Vec<String> = self.resolve(ids, "catalog").map(summary).collect();
        sections(header, &blocks)
    }

    /// The deferred disclosure (§6.3): `<header>\n\n` + one block per requested skill that exists
    /// and has a non-empty body, joined by `\n\n---\n\n`; a block is the catalog block +
    /// `\n<instructions_label>\n<body cut by [`truncate_body`]>`. The label is printed as given
    /// (agw's `RuntimePrompts` already ends it with `:`). Unknown ids are skipped with a warning
    /// (`requested unknown skill`), repeated ids count once. `""` when no block remains.
    pub fn disclosure_prompt(
        &self,
        ids: &[String],
        header: &str,
        instructions_label: &str,
        max_chars: usize,
    ) -> String {
        let blocks: Vec<String> = self
            .resolve(ids, "disclosure")
            .filter(|skill| !skill.body.is_empty())
            .map(|skill| format!("{}\n{instructions_label}\n{}", summary(skill), truncate_body(&skill.body, max_chars)))
            .collect();
        sections(header, &blocks)
    }

    /// The skills named by `ids` (normalised, first occurrence kept) that exist.
    fn resolve<'a>(&'a self, ids: &'a [String], purpose: &'static str) -> impl Iterator<Item = &'a Skill> + 'a {
        let mut seen = HashSet::new();
        ids.iter()
            .map(|id| normalize_id(id))
            .filter(move |id| !id.is_empty() && seen.insert(id.clone()))
            .filter_map(move |id| {
                let skill = self.get(&id);
                if skill.is_none() {
                    tracing::warn!(skill = %id, root = %self.root().display(), "skill {purpose} requested unknown skill '{id}'; skipped");
                }
                skill
            })
    }
}

fn summary(skill: &Skill) -> String {
    let mut block = format!("skillId: {}", skill.id);
    if !skill.name.trim().is_empty() {
        block.push_str("\nname: ");
        block.push_str(&skill.name);
    }
    if !skill.description.trim().is_empty() {
        block.push_str("\ndescription: ");
        block.push_str(&skill.description);
    }
    block
}

fn sections(header: &str, blocks: &[String]) -> String {
    if blocks.is_empty() { String::new() } else { format!("{header}\n\n{}", blocks.join(BLOCK_SEPARATOR)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation() {
        assert_eq!(truncate_body("abc", 0), "abc");
        assert_eq!(truncate_body("abc", 3), "abc");
        assert_eq!(truncate_body("abcd", 3), "abc\n\n[TRUNCATED: skill prompt exceeds maxPromptChars=3]");
        assert_eq!(truncate_body("", 1), "");
    }

    #[test]
    fn truncation_counts_characters_not_bytes() {
        // 'é' is 2 bytes, '数' 3 bytes, '🦀' 4 bytes: the cut lands between characters.
        assert_eq!(truncate_body("é数🦀x", 3), "é数🦀\n\n[TRUNCATED: skill prompt exceeds maxPromptChars=3]");
        assert_eq!(truncate_body("é数🦀x", 1), "é\n\n[TRUNCATED: skill prompt exceeds maxPromptChars=1]");
        assert_eq!(truncate_body("é数🦀", 3), "é数🦀");
    }
}
