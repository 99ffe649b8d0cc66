//! agw-skills — reusable know-how for agents: `skills/<id>/SKILL.md` plus optional `scripts/`,
//! `references/`, `assets/`.
//!
//! Owns:
//! * the [`SkillRegistry`]: an immutable snapshot of a skills directory (id = directory name,
//!   trimmed and lower-cased; `SKILL.md` frontmatter parsed as YAML, only `name`/`description`
//!   used). A broken skill, a stray file in the root, a duplicate id or a directory resolving
//!   outside the root is reported as a [`LoadProblem`] and skipped — loading never fails;
//! * the two system-prompt sections built from it (docs/contract/modes.md §6.2–§6.3):
//!   [`SkillRegistry::catalog_prompt`] (id, name, description — never the body) and
//!   [`SkillRegistry::disclosure_prompt`] (the full instructions, cut by [`truncate_body`]);
//! * the `_skill_run_script_` tool ([`SkillRunScript`], docs/contract/tools-skills-viewports.md §4.5);
//! * the skills bundled with agw ([`bundled`]): `math_basic`, `math_stats`, `text_utils` and the
//!   `screenshot` smoke test, embedded and written to a directory by [`bundled::materialize`].
//!
//! Contract: docs/contract/tools-skills-viewports.md §9 and §4.5, docs/contract/modes.md §6.2–§6.3, docs/contract/config.md §2 and §10 of the
//! shared spec. Which skills an agent has, when a disclosure is due (once per skill per run) and
//! where the bundled skills are materialised are decided by the caller.
//!
//! Must never: let a script path (symlinks followed) or a skill argument leave its directory, run a
//! script through a shell or with the gateway's environment (API keys), leave a script's process or
//! inline-code file behind, put a skill body into the catalog, write anything but
//! [`bundled::materialize`]'s files, or know about HTTP, SSE, chat memory or modes.

#![forbid(unsafe_code)]
pub mod bundled;
mod frontmatter;
mod prompt;
mod registry;
mod script;

pub use frontmatter::{FrontmatterError, SkillText, parse as parse_skill_md};
pub use prompt::{DEFAULT_MAX_PROMPT_CHARS, truncate_body};
pub use registry::{LoadProblem, MAX_SKILL_FILE_BYTES, SKILL_FILE, Skill, SkillRegistry, normalize_id};
pub use script::{
    DEFAULT_TIMEOUT, INLINE_MAX_CHARS, MAX_TIMEOUT, NAME as SKILL_RUN_SCRIPT, OUTPUT_CAP_CHARS, SkillRunScript,
    SkillScriptConfig,
};
