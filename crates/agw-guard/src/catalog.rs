//! The named rule sets available: [`GuardCatalog`], loaded from a directory of `<name>.json`
//! files, bundled, or built from sets.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{CatalogError, RuleError};
use crate::limits::MAX_FILE_BYTES;
use crate::rules::RuleSet;

/// The bundled demo set's file, embedded.
const DEMO: &str = include_str!("../bundled/demo.json");

/// Rule sets by name, sorted by name. Immutable and cheap to clone (the sets are shared).
#[derive(Debug, Clone, Default)]
pub struct GuardCatalog {
    sets: BTreeMap<String, Arc<RuleSet>>,
}

impl GuardCatalog {
    /// Loads every `<name>.json` file of `dir`, in name order. Loading never fails as a whole:
    /// a file that cannot be read, a symbolic link (never followed), an entry that is not a
    /// regular file, a name outside `[A-Za-z0-9_-]{1,64}` or a file over
    /// [`crate::MAX_FILE_BYTES`] or with any rule error is skipped and returned as an error for
    /// the caller to log. Entries whose names do not end in `.json`, and hidden ones (`.…`), are
    /// ignored. A directory that cannot be listed (or does not exist) gives an empty catalog and
    /// one [`CatalogError::ReadDir`].
    ///
    /// The only I/O of the crate: listing `dir` and reading its files.
    pub fn load_dir(dir: impl AsRef<Path>) -> (GuardCatalog, Vec<CatalogError>) {
        let dir = dir.as_ref();
        let mut errors = Vec::new();
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(source) => {
                errors.push(CatalogError::ReadDir { path: dir.to_path_buf(), source });
                return (GuardCatalog::default(), errors);
            }
        };
        let mut files: Vec<(String, PathBuf)> = Vec::new();
        for entry in entries {
            match entry {
                Ok(entry) => {
                    let Ok(file_name) = entry.file_name().into_string() else { continue };
                    if let Some(stem) = file_name.strip_suffix(".json")
                        && !file_name.starts_with('.')
                    {
                        files.push((stem.to_owned(), entry.path()));
                    }
                }
                Err(source) => errors.push(CatalogError::ReadDir { path: dir.to_path_buf(), source }),
            }
        }
        files.sort();
        let mut sets = BTreeMap::new();
        for (name, path) in files {
            match load_file(&name, &path) {
                Ok(set) => {
                    sets.insert(name, Arc::new(set));
                }
                Err(error) => errors.push(error),
            }
        }
        (GuardCatalog { sets }, errors)
    }

    /// The sets bundled with agw: `demo` (blocks a forbidden topic, warns on medical advice,
    /// redacts email addresses and card numbers).
    pub fn bundled() -> GuardCatalog {
        // The embedded file is parsed by the `the_bundled_demo_set_loads` test: it cannot fail.
        let demo = RuleSet::parse("demo", DEMO).expect("the bundled demo rule set is valid");
        GuardCatalog { sets: BTreeMap::from([("demo".to_owned(), Arc::new(demo))]) }
    }

    /// A catalog of the given sets (for embedders and tests); two sets with one name are an
    /// error.
    pub fn from_sets<S: Into<Arc<RuleSet>>>(sets: impl IntoIterator<Item = S>) -> Result<GuardCatalog, CatalogError> {
        let mut map = BTreeMap::new();
        for set in sets {
            let set: Arc<RuleSet> = set.into();
            let name = set.name().to_owned();
            if map.contains_key(&name) {
                return Err(CatalogError::Duplicate { name });
            }
            map.insert(name, set);
        }
        Ok(GuardCatalog { sets: map })
    }

    /// `dir` loaded again ([`Self::load_dir`]) while this catalog is in use: a file that was
    /// loaded before and now fails keeps its set from this catalog (an edit with a typo must
    /// not drop a guard); the errors are returned all the same, for the caller to log.
    pub fn reload_dir(&self, dir: impl AsRef<Path>) -> (GuardCatalog, Vec<CatalogError>) {
        let (mut fresh, errors) = GuardCatalog::load_dir(dir);
        for error in &errors {
            let kept = error
                .path()
                .and_then(|path| path.file_name()?.to_str()?.strip_suffix(".json").map(str::to_owned))
                .and_then(|name| Some((self.sets.get(&name)?.clone(), name)));
            if let Some((set, name)) = kept {
                fresh.sets.entry(name).or_insert(set);
            }
        }
        (fresh, errors)
    }

    /// This catalog with every set of `fallback` whose name it does not have (the bundled sets
    /// stay available next to a directory's).
    pub fn or_sets_of(mut self, fallback: &GuardCatalog) -> GuardCatalog {
        for (name, set) in &fallback.sets {
            self.sets.entry(name.clone()).or_insert_with(|| set.clone());
        }
        self
    }

    /// The set named `name`.
    pub fn get(&self, name: &str) -> Option<Arc<RuleSet>> {
        self.sets.get(name).cloned()
    }

    /// The sets' names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> + '_ {
        self.sets.keys().map(String::as_str)
    }

    /// How many sets there are.
    pub fn len(&self) -> usize {
        self.sets.len()
    }

    /// Whether there is no set.
    pub fn is_empty(&self) -> bool {
        self.sets.is_empty()
    }
}

/// Reads and parses one rule file: a regular file (never a link), at most `MAX_FILE_BYTES`,
/// checked before it is read and again while reading (it may grow).
fn load_file(name: &str, path: &Path) -> Result<RuleSet, CatalogError> {
    let rules = |source| CatalogError::Rules { path: path.to_path_buf(), source };
    let read = |source| CatalogError::Read { path: path.to_path_buf(), source };
    let meta = std::fs::symlink_metadata(path).map_err(read)?;
    if meta.file_type().is_symlink() {
        return Err(CatalogError::Symlink { path: path.to_path_buf() });
    }
    if !meta.is_file() {
        return Err(CatalogError::NotAFile { path: path.to_path_buf() });
    }
    if !crate::rules::is_valid_name(name) {
        return Err(rules(RuleError::BadName(name.to_owned())));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(rules(RuleError::TooLarge { size: meta.len(), limit: MAX_FILE_BYTES }));
    }
    let file = std::fs::File::open(path).map_err(read)?;
    // The file opened must be the one checked: a link swapped in meanwhile is refused.
    if !same_file(&meta, &file.metadata().map_err(read)?) {
        return Err(CatalogError::Changed { path: path.to_path_buf() });
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(read)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(rules(RuleError::TooLarge { size: bytes.len() as u64, limit: MAX_FILE_BYTES }));
    }
    let text = String::from_utf8(bytes)
        .map_err(|e| read(std::io::Error::new(std::io::ErrorKind::InvalidData, e.utf8_error())))?;
    RuleSet::parse(name, &text).map_err(rules)
}

#[cfg(unix)]
fn same_file(checked: &std::fs::Metadata, opened: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    opened.is_file() && checked.dev() == opened.dev() && checked.ino() == opened.ino()
}

#[cfg(not(unix))]
fn same_file(_checked: &std::fs::Metadata, opened: &std::fs::Metadata) -> bool {
    opened.is_file()
}

#[cfg(test)]
mod tests;
