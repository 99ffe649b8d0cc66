//! The one error type of chat memory.

use std::io;
use std::path::PathBuf;

/// A storage operation failed. Carries the path and the OS error (files) or the operation, the
/// chat and the driver's error (PostgreSQL); the run that hit it ends with `run.error` code
/// `internal`. A full or read-only disk or an unreachable database lands here, never in a panic,
/// and never leaves a partial line behind that later reads would choke on (see
/// [`crate::ChatStore::append`]).
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
        /// The file the line was meant for (PostgreSQL: `postgres:<schema>/history/<chatId>`).
        path: PathBuf,
        /// The serializer's error.
        #[source]
        source: serde_json::Error,
    },
    /// A database operation failed (the PostgreSQL backend, feature `postgres`): the server
    /// could not be reached or refused the connection, no pooled connection was free within the
    /// connect timeout, a statement failed (its transaction is rolled back: nothing of it is
    /// stored), or the configuration is unusable.
    #[error("chat memory: database: cannot {op}{}: {source}", for_chat(.chat_id.as_deref()))]
    Database {
        /// What was attempted (`connect to the database`, `append to the history`, …).
        op: &'static str,
        /// The chat the operation was on, when there is one.
        chat_id: Option<String>,
        /// The driver's or the pool's error (never the connection URL or a password).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

fn for_chat(chat_id: Option<&str>) -> String {
    chat_id.map(|id| format!(" of chat {id}")).unwrap_or_default()
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
            Self::Encode { .. } | Self::Database { .. } => None,
        }
    }
}
