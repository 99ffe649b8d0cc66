//! Hot reload of the agent, tool and viewport directories.
//!
//! Two triggers, one path: file-system events (`notify`) and a periodic rescan (the safety net for
//! file systems without events, e.g. some network mounts). Either one asks for a reload of a
//! directory; a reload only happens when the directory's fingerprint (names, sizes, mtimes)
//! changed. A reload rebuilds the whole registry from the directory and swaps it in atomically
//! (`arc-swap`); runs in flight keep the snapshots they started with.
//!
//! A file that becomes invalid is reported and its **last good version keeps serving**: every
//! directory keeps the last text of each file that validated, and an invalid file is replaced by
//! it when the registry is rebuilt. A deleted file is gone at the next reload.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;

use agw_modes::definition::{AgentCatalog, AgentDefinition, DefinitionError};
use agw_skills::SkillRegistry;
use agw_tools::ToolRegistry;
use agw_tools::definition::validate_file as validate_tool_file;
use agw_tools::viewport::ViewportRegistry;

use crate::state::AppState;

/// Which registry a directory feeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Catalog {
    /// Agent definition files.
    Agents,
    /// Tool definition files.
    Tools,
    /// Viewport files.
    Viewports,
    /// `skills/<id>/SKILL.md` (+ scripts): watched recursively.
    Skills,
    /// MCP server files (`*.json`, one server each).
    Mcp,
    /// Remote A2A agent files (`*.json`, one agent each).
    A2aAgents,
    /// Guardrails rule files (`<name>.json`, one rule set each).
    Guardrails,
}

/// One watched directory.
#[derive(Debug, Clone)]
pub struct WatchedDir {
    /// The registry it feeds.
    pub catalog: Catalog,
    /// The directory watched (not recursively, except for skills).
    pub dir: PathBuf,
    /// Period of the safety-net rescan.
    pub rescan_every: Duration,
}

/// `(name, size, mtime)` of every entry: cheap to compute, changes with any edit.
type Fingerprint = Vec<(String, u64, Option<SystemTime>)>;

fn fingerprint(dir: &Path, catalog: Catalog) -> Fingerprint {
    let mut out = entries_fingerprint(dir);
    if catalog == Catalog::Skills {
        // A skill is edited inside its directory: include every SKILL.md.
        let skill_files: Vec<_> = out.iter().map(|(name, _, _)| dir.join(name).join("SKILL.md")).collect();
        for file in skill_files {
            if let Ok(meta) = std::fs::metadata(&file) {
                out.push((file.display().to_string(), meta.len(), meta.modified().ok()));
            }
        }
    }
    out
}

fn entries_fingerprint(dir: &Path) -> Fingerprint {
    let mut out: Fingerprint = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| {
                    let meta = std::fs::metadata(e.path()).ok()?;
                    Some((e.file_name().to_string_lossy().into_owned(), meta.len(), meta.modified().ok()))
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// The last text of each file that validated, per directory.
#[derive(Debug, Default)]
pub(crate) struct LastGood {
    files: BTreeMap<String, String>,
}

impl LastGood {
    /// The directory's regular files (symlinks to files included, dot-files skipped), each invalid
    /// one replaced by its last good version when there is one. `validate` says why a file is
    /// invalid in its own error type; the reason is only logged.
    pub fn sources<E: std::fmt::Display>(
        &mut self,
        dir: &Path,
        validate: impl Fn(&str, &str) -> Result<(), E>,
    ) -> Vec<(String, String)> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .filter(|e| std::fs::metadata(e.path()).is_ok_and(|m| m.is_file()))
                    .filter_map(|e| e.file_name().to_str().map(str::to_string))
                    .filter(|n| !n.starts_with('.'))
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        self.files.retain(|name, _| names.contains(name));
        let mut out = Vec::with_capacity(names.len());
        for name in names {
            let text = std::fs::read(dir.join(&name))
                .map_err(|e| e.to_string())
                .and_then(|bytes| String::from_utf8(bytes).map_err(|_| "not UTF-8".to_string()));
            match text.and_then(|t| validate(&name, &t).map(|()| t).map_err(|e| e.to_string())) {
                Ok(text) => {
                    self.files.insert(name.clone(), text.clone());
                    out.push((name, text));
                }
                Err(message) => match self.files.get(&name) {
                    Some(previous) => {
                        tracing::warn!(file = %dir.join(&name).display(), "invalid after an edit, keeping its last good version: {message}");
                        out.push((name, previous.clone()));
                    }
                    // Never valid: hand it on so the loader reports it the usual way.
                    None => {
                        if let Ok(bytes) = std::fs::read(dir.join(&name)) {
                            out.push((name, String::from_utf8_lossy(&bytes).into_owned()));
                        }
                    }
                },
            }
        }
        out
    }
}

/// An MCP server file that no longer parses keeps its last good version (like every catalog).
fn validate_mcp_file(name: &str, text: &str) -> Result<(), agw_mcp::ConfigError> {
    if !name.to_ascii_lowercase().ends_with(".json") {
        return Ok(());
    }
    let stem = std::path::Path::new(name).file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    agw_mcp::parse_server(&stem, text).map(|_| ())
}

fn validate_agent(name: &str, text: &str) -> Result<(), DefinitionError> {
    if !name.ends_with(".json") {
        return Ok(());
    }
    AgentDefinition::from_json(name, text).map(|_| ())
}

/// Rebuilds registries from their directories.
pub struct Reloader {
    state: AppState,
    dirs: Vec<WatchedDir>,
    last_good: Mutex<BTreeMap<PathBuf, (LastGood, Option<Fingerprint>)>>,
}

impl Reloader {
    /// A reloader of `dirs` into `state`; nothing is read until the first reload.
    pub fn new(state: AppState, dirs: Vec<WatchedDir>) -> Arc<Self> {
        Arc::new(Self { state, dirs, last_good: Mutex::new(BTreeMap::new()) })
    }

    /// Reloads `dir` if its fingerprint changed (or `force`). Returns whether a swap happened.
    pub fn reload(&self, watched: &WatchedDir, force: bool) -> bool {
        let mut guard = self.last_good.lock().unwrap_or_else(PoisonError::into_inner);
        let (last_good, seen) = guard.entry(watched.dir.clone()).or_default();
        let now = fingerprint(&watched.dir, watched.catalog);
        if !force && seen.as_ref() == Some(&now) {
            return false;
        }
        *seen = Some(now);
        let dir = &watched.dir;
        match watched.catalog {
            Catalog::Agents => {
                let catalog = AgentCatalog::from_sources(last_good.sources(dir, validate_agent));
                tracing::info!(dir = %dir.display(), agents = catalog.len(), problems = catalog.problems().len(), "agents reloaded");
                self.state.catalogs().agents.store(Arc::new(catalog));
            }
            Catalog::Tools => {
                let builtins = self.state.catalogs().tools.load().builtins();
                let registry = ToolRegistry::from_sources(last_good.sources(dir, validate_tool_file), builtins);
                tracing::info!(dir = %dir.display(), tools = registry.list().len(), "tools reloaded");
                self.state.catalogs().tools.store(Arc::new(registry));
            }
            Catalog::Viewports => {
                let registry = ViewportRegistry::from_sources(last_good.sources(dir, ViewportRegistry::validate_file));
                tracing::info!(dir = %dir.display(), viewports = registry.len(), "viewports reloaded");
                self.state.catalogs().viewports.store(Arc::new(registry));
            }
            Catalog::Mcp => {
                let (configs, problems) = agw_mcp::load_sources(last_good.sources(dir, validate_mcp_file));
                for problem in problems {
                    tracing::warn!(file = %problem.file, "MCP server file skipped: {}", problem.message);
                }
                if let Some(mcp) = &self.state.mcp {
                    mcp.reconfigure(&self.state.catalogs().tools, configs);
                }
            }
            Catalog::A2aAgents => {
                let (dir, tools) = (dir.clone(), self.state.catalogs().tools.clone());
                tokio::spawn(async move { crate::a2a_agents::load(&dir, &tools).await });
            }
            Catalog::Guardrails => {
                // Its own last-good rule (a file that broke keeps its set), and its own file
                // checks: rule files are never followed through links.
                let (catalog, problems) = self.state.catalogs().guard_rules.load().reload_dir(dir);
                let catalog = catalog.or_sets_of(&agw_guard::GuardCatalog::bundled());
                for problem in problems {
                    tracing::warn!(dir = %dir.display(), "guardrails rule file skipped: {problem}");
                }
                tracing::info!(dir = %dir.display(), rule_sets = catalog.len(), "guardrails reloaded");
                self.state.catalogs().guard_rules.store(Arc::new(catalog));
            }
            Catalog::Skills => {
                let registry = SkillRegistry::load(dir).with_fallback(&self.state.catalogs().skills.load());
                tracing::info!(dir = %dir.display(), skills = registry.len(), "skills reloaded");
                self.state.catalogs().skills.store(Arc::new(registry));
            }
        }
        true
    }

    /// Loads every directory once (seeding the last-good texts), then watches them: file events
    /// trigger a reload after a short debounce, and each directory is rescanned periodically.
    /// The returned handle stops everything when dropped.
    pub fn start(self: Arc<Self>) -> ReloadHandle {
        for watched in &self.dirs {
            self.reload(watched, true);
        }
        let (tx, mut rx) = mpsc::unbounded_channel::<PathBuf>();
        let watcher = {
            let tx = tx.clone();
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                if let Ok(event) = event {
                    for path in event.paths {
                        let dir = path.parent().map(Path::to_path_buf).unwrap_or(path);
                        let _ = tx.send(dir);
                    }
                }
            })
        };
        let watcher = match watcher {
            Ok(mut w) => {
                for watched in &self.dirs {
                    let mode = if watched.catalog == Catalog::Skills {
                        RecursiveMode::Recursive
                    } else {
                        RecursiveMode::NonRecursive
                    };
                    if let Err(e) = w.watch(&watched.dir, mode) {
                        tracing::warn!(dir = %watched.dir.display(), error = %e, "cannot watch directory; relying on the periodic rescan");
                    }
                }
                Some(w)
            }
            Err(e) => {
                tracing::warn!(error = %e, "file watching unavailable; relying on the periodic rescan");
                None
            }
        };
        let mut tasks = Vec::new();
        let this = self.clone();
        tasks.push(tokio::spawn(async move {
            while let Some(dir) = rx.recv().await {
                // Debounce: editors write in bursts; collect for a moment, then reload once.
                tokio::time::sleep(Duration::from_millis(150)).await;
                let mut dirs = vec![dir];
                while let Ok(more) = rx.try_recv() {
                    dirs.push(more);
                }
                for watched in &this.dirs {
                    let hit = dirs.iter().any(|d| {
                        same_dir(d, &watched.dir) || (watched.catalog == Catalog::Skills && d.starts_with(&watched.dir))
                    });
                    if hit {
                        let (r, w) = (this.clone(), watched.clone());
                        let _ = tokio::task::spawn_blocking(move || r.reload(&w, false)).await;
                    }
                }
            }
        }));
        for watched in self.dirs.clone() {
            let this = self.clone();
            tasks.push(tokio::spawn(async move {
                let mut tick = tokio::time::interval(watched.rescan_every.max(Duration::from_millis(50)));
                tick.tick().await;
                loop {
                    tick.tick().await;
                    let (r, w) = (this.clone(), watched.clone());
                    let _ = tokio::task::spawn_blocking(move || r.reload(&w, false)).await;
                }
            }));
        }
        ReloadHandle { _watcher: watcher, tasks }
    }
}

fn same_dir(a: &Path, b: &Path) -> bool {
    a == b || std::fs::canonicalize(a).ok().zip(std::fs::canonicalize(b).ok()).is_some_and(|(a, b)| a == b)
}

/// Keeps the watcher and the reload tasks alive; dropping it stops them.
pub struct ReloadHandle {
    _watcher: Option<notify::RecommendedWatcher>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for ReloadHandle {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// The configured directories of `settings` with their rescan periods (bundled-only catalogs are
/// not watched: they cannot change).
pub fn watched_dirs(settings: &crate::Settings) -> Vec<WatchedDir> {
    let mut dirs = Vec::new();
    let mut add = |catalog, dir: &Option<PathBuf>, every| {
        if let Some(dir) = dir {
            dirs.push(WatchedDir { catalog, dir: dir.clone(), rescan_every: every });
        }
    };
    let r = &settings.resources;
    add(Catalog::Agents, &r.agents.dir, r.agents.refresh);
    add(Catalog::Tools, &r.tools.dir, r.tools.refresh);
    add(Catalog::Mcp, &r.mcp_dir, r.tools.refresh);
    add(Catalog::A2aAgents, &r.a2a_dir, r.tools.refresh);
    add(Catalog::Viewports, &r.viewports.dir, r.viewports.refresh);
    add(Catalog::Skills, &r.skills.dir, r.skills.refresh);
    let rules = &settings.guardrails.rules;
    add(Catalog::Guardrails, &rules.dir, rules.refresh);
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_files_fall_back_to_their_last_good_version_and_deleted_files_go() {
        let dir = std::env::temp_dir().join(format!("agw-lastgood-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ok = |n: &str, t: &str| if t.contains("bad") { Err(format!("{n} is bad")) } else { Ok(()) };
        let mut lg = LastGood::default();
        std::fs::write(dir.join("a.json"), "v1").unwrap();
        std::fs::write(dir.join("b.json"), "bad from the start").unwrap();
        std::fs::write(dir.join(".hidden"), "x").unwrap();
        assert_eq!(
            lg.sources(&dir, ok),
            [("a.json".to_string(), "v1".to_string()), ("b.json".to_string(), "bad from the start".to_string())]
        );
        std::fs::write(dir.join("a.json"), "bad edit").unwrap();
        assert_eq!(lg.sources(&dir, ok)[0], ("a.json".to_string(), "v1".to_string()), "last good keeps serving");
        std::fs::write(dir.join("a.json"), "v2").unwrap();
        assert_eq!(lg.sources(&dir, ok)[0].1, "v2");
        std::fs::remove_file(dir.join("a.json")).unwrap();
        std::fs::write(dir.join("a.json"), "bad again").unwrap();
        std::fs::remove_file(dir.join("a.json")).unwrap();
        assert!(lg.sources(&dir, ok).iter().all(|(n, _)| n != "a.json"), "a deleted file is gone");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
