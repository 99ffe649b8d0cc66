//! agw-skills — the skill catalog (`skills/<id>/SKILL.md` + scripts).
//!
//! Will own: discovering skills, parsing SKILL.md frontmatter, rendering the catalog and the
//! deferred disclosure for system prompts, and running skill scripts inside their directory.
//!
//! Must never: let a script path leave its skill directory, or know about HTTP/SSE.
//!
//! Status: empty until the skills issue lands; nothing here pretends to work yet.
