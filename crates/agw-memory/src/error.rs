//! The one error type of chat memory.

use std::io;
use std::path::PathBuf;

/// A storage operation failed. Carries the path and the OS error; the run that hit it ends with
/// `run.error` code `internal`. A full or read-only disk lands here, never in a panic, and never
/// leaves a partial line behind that later reads would choke on (see [`crate::ChatStore::append`]).
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// Reading, writing or creating a file or directory failed.
    #[error("chat memory: cannot {op} {}: {source}", path.display())]
    Io {
        /// What was attempted (`append to`, `read`, `create directory`, …).
        op: &'static str,
        /// The file or directory the operation was on.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Serialising a line failed. Unreachable with agw's own types (string keys, finite
    /// numbers), kept as an error rather than a panic.
    #[error("chat memory: cannot encode a line for {}: {source}", path.display())]
    Encode {
        /// The file the line was meant for.
        path: PathBuf,
        /// The serializer's error.
        #[source]
        source: serde_json::Error,
    },
}

impl MemoryError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> Self {
        let path = path.into();
        move |source| Self::Io { op, path, source }
    }

    /// The OS error, when there is one (e.g. to tell a full disk from a permission problem).
    pub fn io_error(&self) -> Option<&io::Error> {
        match self {
            Self::Io { source, .. } => Some(source),
            Self::Encode { .. } => None,
        }
    }
}
