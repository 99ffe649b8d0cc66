//! The seq ledger: where every run in flight notes, as it streams, the last seq it numbered and
//! the blocks it opened — so that a run resumed after a crash goes on from the next seq (no
//! number is given twice, none skipped) and can name the blocks its client must drop
//! (`run.resume`, `docs/run-lifecycle.md`).
//!
//! One file per process (`<memory dir>/_waiting/runs.ledger`) of fixed 128-byte slots, one per run in
//! flight. A note is one `pwrite(2)` of 32 bytes into the run's slot — into the page cache, no
//! flush: it survives the process (what recovery is for), not the machine. A slot never
//! crosses a page, so a note is whole or absent. Slot layout (little-endian):
//!
//! | bytes  | field                                   |
//! |--------|-----------------------------------------|
//! | 0..36  | run id (canonical UUID; zero: free)     |
//! | 36..40 | layout version (1)                      |
//! | 40..48 | last seq numbered                       |
//! | 48..56 | last seq the history (or mark) covers   |
//! | 56..60 | reasoning blocks opened                 |
//! | 60..64 | content blocks opened                   |
//! | 64..68 | reasoning blocks covered                |
//! | 68..72 | content blocks covered                  |

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agw_protocol::BlockCounts;

use crate::error::MemoryError;
use crate::ids::is_canonical;

const SLOT: u64 = 128;
const ID_LEN: usize = 36;
const VERSION: u32 = 1;
/// Most slots a ledger reads back (a corrupt file does not make recovery allocate without bound).
const MAX_SLOTS: u64 = 1 << 20;

/// Where a run stood in its stream when last noted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LedgerEntry {
    /// The last seq it numbered (0: none yet).
    pub last_seq: u64,
    /// The last seq its history (or run mark) covers: a resumed run supersedes what came after.
    pub durable_seq: u64,
    /// The blocks it opened.
    pub shown: BlockCounts,
    /// The blocks its history (or run mark) covers.
    pub durable: BlockCounts,
}

/// The ledger file of this process.
pub struct SeqLedger {
    file: File,
    path: PathBuf,
    slots: Mutex<Slots>,
}

#[derive(Default)]
struct Slots {
    /// One past the highest slot in use or held.
    len: u64,
    free: Vec<u64>,
    /// Slots of a previous process, held until [`SeqLedger::release_found`].
    found: Vec<u64>,
}

/// A run's slot; freed when dropped, unless [`LedgerSlot::keep`]: a run left for the next
/// process to resume.
pub struct LedgerSlot {
    ledger: Arc<SeqLedger>,
    index: u64,
    kept: bool,
}

impl SeqLedger {
    /// Opens (or creates) the ledger at `path` and reads what a previous process left in it:
    /// run id → its last note. Those slots stay held until [`Self::release_found`], so a crash
    /// during recovery finds them again.
    pub fn open(path: &Path) -> Result<(Arc<SeqLedger>, HashMap<String, LedgerEntry>), MemoryError> {
        if let Some(dir) = path.parent() {
            crate::file::create_dir(dir)?;
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(MemoryError::io("open", path))?;
        let len = file.metadata().map_err(MemoryError::io("stat", path))?.len();
        let count = len.div_ceil(SLOT).min(MAX_SLOTS);
        let mut found = HashMap::new();
        let mut slots = Slots { len: count, ..Slots::default() };
        let mut buf = [0u8; SLOT as usize];
        for index in 0..count {
            buf.fill(0);
            let read = file.read_at(&mut buf, index * SLOT).map_err(MemoryError::io("read", path))?;
            match (read > 72).then(|| decode(&buf)).flatten() {
                Some((run_id, entry)) => {
                    slots.found.push(index);
                    found.insert(run_id, entry);
                }
                None => slots.free.push(index),
            }
        }
        // Lowest first: `pop` takes from the end.
        slots.free.reverse();
        Ok((Arc::new(SeqLedger { file, path: path.to_owned(), slots: Mutex::new(slots) }), found))
    }

    /// Frees the slots of the previous process (once its runs were resumed, each with a slot
    /// of its own, or given up).
    pub fn release_found(&self) {
        let found = std::mem::take(&mut self.lock().found);
        for index in &found {
            self.clear(*index);
        }
        let mut slots = self.lock();
        slots.free.extend(found);
        slots.free.sort_unstable_by(|a, b| b.cmp(a));
    }

    /// A slot for `run_id`, noted with `entry`. `None` when the file cannot be written (logged):
    /// the run streams anyway, a resume after a crash then starts numbering after its mark.
    pub fn slot(self: &Arc<Self>, run_id: &str, entry: LedgerEntry) -> Option<LedgerSlot> {
        if !is_canonical(run_id) {
            return None;
        }
        let index = {
            let mut slots = self.lock();
            slots.free.pop().unwrap_or_else(|| {
                slots.len += 1;
                slots.len - 1
            })
        };
        let mut buf = [0u8; SLOT as usize];
        buf[..ID_LEN].copy_from_slice(run_id.as_bytes());
        buf[36..40].copy_from_slice(&VERSION.to_le_bytes());
        encode(&entry, &mut buf[40..72]);
        if let Err(e) = self.file.write_at(&buf, index * SLOT) {
            tracing::warn!(path = %self.path.display(), error = %e, "seq ledger: no slot for the run");
            self.lock().free.push(index);
            return None;
        }
        Some(LedgerSlot { ledger: self.clone(), index, kept: false })
    }

    fn clear(&self, index: u64) {
        let _ = self.file.write_at(&[0u8; ID_LEN], index * SLOT);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Slots> {
        self.slots.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl LedgerSlot {
    /// Notes where the run stands. A failed write is ignored: the ledger is a hint for a
    /// resume, never a reason to stop a run.
    pub fn note(&self, entry: &LedgerEntry) {
        let mut buf = [0u8; 32];
        encode(entry, &mut buf);
        let _ = self.ledger.file.write_at(&buf, self.index * SLOT + 40);
    }
}

impl LedgerSlot {
    /// Leaves the slot as it is for the next process (the run stops here and is resumed
    /// there).
    pub fn keep(mut self) {
        self.kept = true;
    }
}

impl Drop for LedgerSlot {
    fn drop(&mut self) {
        if self.kept {
            return;
        }
        self.ledger.clear(self.index);
        self.ledger.lock().free.push(self.index);
    }
}

fn encode(entry: &LedgerEntry, out: &mut [u8]) {
    out[0..8].copy_from_slice(&entry.last_seq.to_le_bytes());
    out[8..16].copy_from_slice(&entry.durable_seq.to_le_bytes());
    out[16..20].copy_from_slice(&entry.shown.reasoning.to_le_bytes());
    out[20..24].copy_from_slice(&entry.shown.content.to_le_bytes());
    out[24..28].copy_from_slice(&entry.durable.reasoning.to_le_bytes());
    out[28..32].copy_from_slice(&entry.durable.content.to_le_bytes());
}

fn decode(slot: &[u8; SLOT as usize]) -> Option<(String, LedgerEntry)> {
    let run_id = std::str::from_utf8(&slot[..ID_LEN]).ok().filter(|id| is_canonical(id))?;
    if u32::from_le_bytes(slot[36..40].try_into().ok()?) != VERSION {
        return None;
    }
    let u64_at = |at: usize| slot[at..at + 8].try_into().ok().map(u64::from_le_bytes);
    let u32_at = |at: usize| slot[at..at + 4].try_into().ok().map(u32::from_le_bytes);
    let entry = LedgerEntry {
        last_seq: u64_at(40)?,
        durable_seq: u64_at(48)?,
        shown: BlockCounts { reasoning: u32_at(56)?, content: u32_at(60)? },
        durable: BlockCounts { reasoning: u32_at(64)?, content: u32_at(68)? },
    };
    Some((run_id.to_owned(), entry))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Scratch(PathBuf);

    impl Scratch {
        fn new(tag: &str) -> Self {
            let dir = std::env::temp_dir().join(format!("agw-ledger-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            Self(dir)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    const RUN: &str = "0b9c3f1e-6d3a-4c1b-9a55-1f2e3d4c5b6a";
    const OTHER: &str = "1c9c3f1e-6d3a-4c1b-9a55-1f2e3d4c5b6a";

    #[test]
    fn a_note_survives_the_process_and_a_dropped_slot_is_forgotten() {
        let dir = Scratch::new("note");
        let path = dir.0.join("_runs.ledger");
        let (ledger, found) = SeqLedger::open(&path).unwrap();
        assert!(found.is_empty());
        let slot = ledger.slot(RUN, LedgerEntry::default()).unwrap();
        let ended = ledger.slot(OTHER, LedgerEntry::default()).unwrap();
        let entry = LedgerEntry {
            last_seq: 41,
            durable_seq: 30,
            shown: BlockCounts { reasoning: 2, content: 3 },
            durable: BlockCounts { reasoning: 1, content: 1 },
        };
        slot.note(&entry);
        drop(ended);
        // A crash: the slot is never dropped.
        std::mem::forget(slot);
        drop(ledger);

        let (ledger, found) = SeqLedger::open(&path).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[RUN], entry);
        // Held until released: a new run takes another slot.
        let next = ledger.slot(OTHER, LedgerEntry::default()).unwrap();
        assert_ne!(next.index, 0);
        ledger.release_found();
        drop(next);
        let (_, found) = SeqLedger::open(&path).unwrap();
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn garbage_reads_as_free_slots() {
        let dir = Scratch::new("garbage");
        let path = dir.0.join("_runs.ledger");
        std::fs::create_dir_all(&dir.0).unwrap();
        std::fs::write(&path, vec![0xffu8; 1000]).unwrap();
        let (ledger, found) = SeqLedger::open(&path).unwrap();
        assert!(found.is_empty());
        assert!(ledger.slot(RUN, LedgerEntry::default()).is_some());
        assert!(ledger.slot("not-a-uuid", LedgerEntry::default()).is_none());
    }
}
