//! The few file operations chat memory needs, each with its crash story.
//!
//! * [`append`]: whole lines, one `write` on an `O_APPEND` handle. A line never interleaves
//!   with another writer's (the kernel serialises appends to one file), and a line torn by a
//!   crash mid-write is isolated before the next append (see there).
//! * [`append_existing`]: the same for a file known to end with a complete line (the chat
//!   index, whose identity the caller checked); returns the file's metadata after the write.
//!   Never fsyncs: the index makes its lines durable by group commit ([`sync_data`] through
//!   `group_sync.rs`), outside its lock.
//! * [`rewrite`]: temp file in the same directory + rename, so readers see the old or the new
//!   content, never a mix.
//!
//! All synchronous `std::fs`; the calls are short (one small write, or one small file).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::config::FsyncPolicy;
use crate::encoded::EncodedLines;
use crate::error::MemoryError;

/// Appends `payload` (complete `\n`-terminated lines) to `path` in one write, creating the file
/// and its directory when missing.
///
/// If the file does not end with `\n` — the last append was torn by a crash or a full disk — a
/// `\n` is written first, in the same write, so the fragment stays one invalid line of its own
/// (readers skip it) and the new lines stay intact.
///
/// If the write fails part-way (e.g. `ENOSPC`), the file is cut back to its previous length so
/// no partial line stays behind (best effort: the isolation above covers the case where even
/// that fails).
///
/// Durability per `policy`: [`FsyncPolicy::EveryStep`] fsyncs the data, and so does
/// [`FsyncPolicy::Complete`] when `last` (a run's last append: its end-of-run fsync, on the
/// handle that wrote); under [`FsyncPolicy::EveryRun`] a `last` append returns that handle for
/// the fsync thread (`flusher.rs`) instead. When the file was just created its directory needs
/// an fsync too (the file's own fsync does not cover its name): [`FsyncPolicy::EveryStep`] and
/// [`FsyncPolicy::Complete`] do it here, [`FsyncPolicy::EveryRun`] reports it
/// ([`Appended::created`]) for the fsync thread, which syncs the directory before (or with) the
/// run's end-of-run fsync — so no append on a run's path waits for a device flush.
pub(crate) fn append(
    path: &Path,
    lines: &EncodedLines,
    policy: FsyncPolicy,
    last: bool,
) -> Result<Appended, MemoryError> {
    let (mut file, created) = open_append(path)?;
    let len = file.metadata().map_err(MemoryError::io("inspect", path))?.len();
    let torn = len > 0 && last_byte(&mut file, len).map_err(MemoryError::io("read", path))? != b'\n';
    let buf = if torn {
        tracing::warn!(path = %path.display(), "chat history ends with a partial line; isolating it before appending");
        lines.after_separator()
    } else {
        lines.payload()
    };
    write_or_cut(&mut file, len, buf, path)?;
    if policy == FsyncPolicy::EveryStep || (last && policy == FsyncPolicy::Complete) {
        file.sync_data().map_err(MemoryError::io("fsync", path))?;
    }
    if created && matches!(policy, FsyncPolicy::EveryStep | FsyncPolicy::Complete) {
        sync_parent(path)?;
    }
    Ok(Appended {
        created: created && policy == FsyncPolicy::EveryRun,
        file: (last && policy == FsyncPolicy::EveryRun).then_some(file),
    })
}

/// What an [`append`] leaves to the fsync thread under [`FsyncPolicy::EveryRun`].
pub(crate) struct Appended {
    /// The handle that wrote a run's last lines, for their fdatasync.
    pub(crate) file: Option<File>,
    /// The file was created: its directory entry awaits an fsync.
    pub(crate) created: bool,
}

/// Appends `payload` (complete lines) to an existing file that ends with a complete line, in
/// one write; cut back to the previous length if the write fails part-way. Returns the file's
/// metadata after the write (the caller's record of what the file now is). No fsync: see
/// [`sync_data`].
pub(crate) fn append_existing(path: &Path, payload: &[u8]) -> Result<fs::Metadata, MemoryError> {
    let mut file = OpenOptions::new().append(true).open(path).map_err(MemoryError::io("open", path))?;
    let len = file.metadata().map_err(MemoryError::io("inspect", path))?.len();
    write_or_cut(&mut file, len, payload, path)?;
    file.metadata().map_err(MemoryError::io("inspect", path))
}

/// One `write_all` of `buf` to an append handle; if it fails part-way the file is cut back to
/// `len`, its length before, so no partial line stays behind (best effort).
fn write_or_cut(file: &mut File, len: u64, buf: &[u8], path: &Path) -> Result<(), MemoryError> {
    let Err(source) = file.write_all(buf) else { return Ok(()) };
    if let Err(cut) = file.set_len(len) {
        tracing::warn!(path = %path.display(), error = %cut, "could not remove a partially written line");
    }
    Err(MemoryError::Io { op: "append to", path: path.to_owned(), source })
}

/// Reads the whole file; `None` when it does not exist.
pub(crate) fn read(path: &Path) -> Result<Option<Vec<u8>>, MemoryError> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(MemoryError::Io { op: "read", path: path.to_owned(), source: e }),
    }
}

/// fdatasyncs the file now at `path` (no-op when there is none): everything written to it
/// before the call is durable when it returns `Ok`.
pub(crate) fn sync_data(path: &Path) -> io::Result<()> {
    match OpenOptions::new().append(true).open(path) {
        Ok(file) => file.sync_data(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// fsyncs an existing file (no-op when it does not exist).
pub(crate) fn sync(path: &Path) -> Result<(), MemoryError> {
    match OpenOptions::new().append(true).open(path) {
        Ok(file) => file.sync_data().map_err(MemoryError::io("fsync", path)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(MemoryError::Io { op: "open", path: path.to_owned(), source: e }),
    }
}

/// Replaces `path` with `content` atomically: temp file in the same directory, optional fsync,
/// rename. The temp file is removed when anything fails.
pub(crate) fn rewrite(path: &Path, content: &[u8], sync: bool) -> Result<(), MemoryError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = parent(path);
    create_dir(dir)?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let temp = dir.join(format!(".{name}.tmp-{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed)));

    let result = (|| {
        let mut file =
            OpenOptions::new().write(true).create_new(true).open(&temp).map_err(MemoryError::io("create", &temp))?;
        file.write_all(content).map_err(MemoryError::io("write", &temp))?;
        if sync {
            file.sync_all().map_err(MemoryError::io("fsync", &temp))?;
        }
        drop(file);
        fs::rename(&temp, path).map_err(MemoryError::io("replace", path))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result
}

/// Creates `dir` and its parents.
pub(crate) fn create_dir(dir: &Path) -> Result<(), MemoryError> {
    fs::create_dir_all(dir).map_err(MemoryError::io("create directory", dir))
}

fn parent(path: &Path) -> &Path {
    path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// Opens for appending (and reading the last byte); creates the file and directory when
/// missing. Returns whether the file was created.
fn open_append(path: &Path) -> Result<(File, bool), MemoryError> {
    let mut options = OpenOptions::new();
    options.read(true).append(true);
    match options.open(path) {
        Ok(file) => return Ok((file, false)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(MemoryError::Io { op: "open", path: path.to_owned(), source: e }),
    }
    create_dir(parent(path))?;
    let file = options.create(true).open(path).map_err(MemoryError::io("create", path))?;
    Ok((file, true))
}

fn last_byte(file: &mut File, len: u64) -> io::Result<u8> {
    file.seek(SeekFrom::Start(len - 1))?;
    let mut byte = [0u8; 1];
    file.read_exact(&mut byte)?;
    Ok(byte[0])
}

/// Makes a new directory entry durable.
fn sync_parent(path: &Path) -> Result<(), MemoryError> {
    sync_dir(parent(path))
}

/// fsyncs a directory (its entries).
#[cfg(unix)]
pub(crate) fn sync_dir(dir: &Path) -> Result<(), MemoryError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(MemoryError::io("fsync", dir))
}

#[cfg(not(unix))]
pub(crate) fn sync_dir(_dir: &Path) -> Result<(), MemoryError> {
    Ok(())
}
