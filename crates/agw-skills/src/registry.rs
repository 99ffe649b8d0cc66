//! The skill registry (docs/contract/tools-skills-viewports.md §9): an immutable snapshot of `skills/<id>/SKILL.md`.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use crate::frontmatter;

/// File name of a skill's instructions (exact).
pub const SKILL_FILE: &str = "SKILL.md";

/// `SKILL.md` files larger than this are reported and skipped.
pub const MAX_SKILL_FILE_BYTES: u64 = 1024 * 1024;

/// One skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// Directory name, trimmed and lower-cased.
    pub id: String,
    /// Frontmatter `name`, else the id.
    pub name: String,
    /// Frontmatter `description`, else `""`.
    pub description: String,
    /// The instructions after the frontmatter, trimmed (untruncated).
    pub body: String,
    /// The skill directory (`<root>/<directory name>`, as found; not canonicalised).
    pub dir: PathBuf,
}

/// Something in the skills directory that could not be used (also logged as a warning).
pub use agw_tools::LoadProblem;

/// The skills of one directory, as loaded at one moment. Reloading builds a new registry.
#[derive(Debug, Clone, Default)]
pub struct SkillRegistry {
    root: PathBuf,
    skills: BTreeMap<String, Skill>,
    problems: Vec<LoadProblem>,
}

impl SkillRegistry {
    /// Loads every `<root>/<dir>/SKILL.md`. Entries are visited in file-name order; a missing root
    /// gives an empty registry. Never fails: a broken skill, a stray file directly in the root, a
    /// duplicate id or a directory that resolves outside the root is recorded in
    /// [`problems`](Self::problems) and skipped. Directories without `SKILL.md` are skipped
    /// silently (they may hold other material).
    pub fn load(root: &Path) -> SkillRegistry {
        let mut registry = SkillRegistry { root: root.to_path_buf(), ..SkillRegistry::default() };
        let entries = match fs::read_dir(root) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                tracing::debug!(root = %root.display(), "skills directory does not exist; no skills");
                return registry;
            }
            Err(e) => {
                registry.problem(root, format!("cannot read the skills directory: {e}"));
                return registry;
            }
        };
        let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
        entries.sort_by_key(|entry| entry.file_name());
        let canonical_root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
        for entry in entries {
            registry.load_entry(&canonical_root, &entry.path());
        }
        tracing::debug!(root = %root.display(), skills = registry.skills.len(), problems = registry.problems.len(), "skills loaded");
        registry
    }

    /// Keeps serving `previous`'s version of every skill that is now broken: a skill directory
    /// that still exists but whose `SKILL.md` no longer loads (hot reload's "last good version").
    pub fn with_fallback(mut self, previous: &SkillRegistry) -> SkillRegistry {
        for (id, skill) in &previous.skills {
            if self.skills.contains_key(id) || !skill.dir.exists() {
                continue;
            }
            let broken = self.problems.iter().any(|p| Path::new(&p.file).starts_with(&skill.dir));
            if broken {
                tracing::warn!(skill = %id, "skill is broken after an edit; keeping its last good version");
                self.skills.insert(id.clone(), skill.clone());
            }
        }
        self
    }

    fn load_entry(&mut self, canonical_root: &Path, path: &Path) {
        let metadata = match fs::metadata(path) {
            Ok(metadata) => metadata,
            Err(e) => return self.problem(path, format!("cannot read: {e}")),
        };
        if !metadata.is_dir() {
            return self.problem(
                path,
                format!(
                    "Invalid skill layout entry '{}'. Skill files must be placed at skills/<skill-id>/SKILL.md",
                    path.display()
                ),
            );
        }
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            return self.problem(path, "skill directory name is not valid UTF-8".to_owned());
        };
        let id = name.trim().to_lowercase();
        if id.is_empty() {
            return self.problem(path, "skill directory name is blank".to_owned());
        }
        let real_dir = match path.canonicalize() {
            Ok(real) if real.starts_with(canonical_root) && real != canonical_root => real,
            _ => return self.problem(path, "skill directory resolves outside the skills directory".to_owned()),
        };
        let file = path.join(SKILL_FILE);
        match fs::symlink_metadata(&file) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                tracing::debug!(dir = %path.display(), "no SKILL.md; not a skill");
                return;
            }
            Err(e) => return self.problem(&file, format!("cannot read: {e}")),
            Ok(_) => {}
        }
        if !file.canonicalize().is_ok_and(|real| real.starts_with(&real_dir)) {
            return self.problem(&file, "SKILL.md resolves outside its skill directory".to_owned());
        }
        let text = match read_skill_file(&file) {
            Ok(text) => text,
            Err(message) => return self.problem(&file, message),
        };
        let parsed = match frontmatter::parse(&text) {
            Ok(parsed) => parsed,
            Err(error) => return self.problem(&file, format!("invalid SKILL.md frontmatter: {error}")),
        };
        if let Some(first) = self.skills.get(&id) {
            let message = format!("duplicate skill id '{id}' (already defined by '{}'); skipped", first.dir.display());
            return self.problem(path, message);
        }
        let skill = Skill {
            name: parsed.name.unwrap_or_else(|| id.clone()),
            description: parsed.description.unwrap_or_default(),
            body: parsed.body,
            dir: path.to_path_buf(),
            id: id.clone(),
        };
        self.skills.insert(id, skill);
    }

    fn problem(&mut self, path: &Path, message: String) {
        tracing::warn!(path = %path.display(), "{message}");
        self.problems.push(LoadProblem { file: path.display().to_string(), message });
    }

    /// The skill with this id (trimmed and lower-cased before the lookup).
    pub fn get(&self, id: &str) -> Option<&Skill> {
        self.skills.get(&normalize_id(id))
    }

    /// Every skill id, sorted.
    pub fn ids(&self) -> Vec<&str> {
        self.skills.keys().map(String::as_str).collect()
    }

    /// Every skill, sorted by id.
    pub fn skills(&self) -> impl Iterator<Item = &Skill> {
        self.skills.values()
    }

    /// How many skills loaded.
    pub fn len(&self) -> usize {
        self.skills.len()
    }

    /// No skill loaded (problems may still have been found).
    pub fn is_empty(&self) -> bool {
        self.skills.is_empty()
    }

    /// What could not be loaded, in visiting order.
    pub fn problems(&self) -> &[LoadProblem] {
        &self.problems
    }

    /// The directory the registry was loaded from, as given.
    pub fn root(&self) -> &Path {
        &self.root
    }
}

/// Skill ids are trimmed and lower-cased wherever they are compared.
pub fn normalize_id(id: &str) -> String {
    id.trim().to_lowercase()
}

/// Reads a `SKILL.md` that must be a regular file (after following symlinks) of bounded size and
/// valid UTF-8.
fn read_skill_file(file: &Path) -> Result<String, String> {
    let metadata = fs::metadata(file).map_err(|e| format!("cannot read: {e}"))?;
    if !metadata.is_file() {
        return Err("SKILL.md is not a regular file".to_owned());
    }
    if metadata.len() > MAX_SKILL_FILE_BYTES {
        return Err(format!("SKILL.md is larger than {MAX_SKILL_FILE_BYTES} bytes"));
    }
    let mut bytes = Vec::new();
    fs::File::open(file)
        .and_then(|f| f.take(MAX_SKILL_FILE_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() as u64 > MAX_SKILL_FILE_BYTES {
        return Err(format!("SKILL.md is larger than {MAX_SKILL_FILE_BYTES} bytes"));
    }
    String::from_utf8(bytes).map_err(|_| "SKILL.md is not valid UTF-8".to_owned())
}
