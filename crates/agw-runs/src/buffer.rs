//! One run's event buffer: the SSE frames of its events in seq order, bounded by a number of
//! events and of bytes, oldest dropped first. Every observer reads it by cursor (the last seq it
//! has), so observers share the frames instead of each holding a queue of its own. A run whose
//! observers map events to another protocol also keeps each event typed next to its frame, so
//! they never decode agw's own bytes back.

use std::collections::VecDeque;
use std::sync::Arc;

use agw_protocol::Event;
use bytes::{Bytes, BytesMut};

/// How much one buffer may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferLimits {
    /// Most frames kept.
    pub max_events: usize,
    /// Most bytes of frames kept (the newest frame is always kept, however large).
    pub max_bytes: usize,
}

/// What an observer at a cursor gets next.
#[derive(Debug, PartialEq, Eq)]
pub enum Read {
    /// Frames after the cursor, concatenated into one chunk; `last` is the seq of the last one.
    Frames {
        /// The frames, in seq order.
        bytes: Bytes,
        /// The new cursor.
        last: u64,
    },
    /// Nothing after the cursor yet.
    Nothing,
    /// The next frame the observer needs was dropped: it cannot be served without a gap.
    Expired {
        /// The oldest seq still held.
        oldest: u64,
        /// The newest seq.
        latest: u64,
    },
}

/// What an observer reading typed events at a cursor gets next.
#[derive(Debug)]
pub enum ReadEvents {
    /// Events after the cursor; `last` is the seq of the last one.
    Events {
        /// The events, in seq order.
        events: Vec<Arc<Event>>,
        /// The new cursor.
        last: u64,
    },
    /// The buffer keeps no typed events: the frames, to decode ([`Read::Frames`]).
    Frames {
        /// Whole frames, in seq order.
        bytes: Bytes,
        /// The new cursor.
        last: u64,
    },
    /// Nothing after the cursor yet.
    Nothing,
    /// See [`Read::Expired`].
    Expired {
        /// The oldest seq still held.
        oldest: u64,
        /// The newest seq.
        latest: u64,
    },
}

/// The frames of one run.
#[derive(Debug)]
pub struct FrameBuffer {
    frames: VecDeque<(u64, Bytes)>,
    /// The event of each frame, same order, when typed readers were asked for (`None`: frames
    /// only, the native protocol's case: nothing more per event).
    events: Option<VecDeque<Arc<Event>>>,
    bytes: usize,
    latest: u64,
    limits: BufferLimits,
    /// A run resumed after its process stopped (crash recovery): `(durable, first)`. An
    /// observer whose cursor is at or after `durable` saw nothing this buffer needs to give
    /// again (what came after `durable` is superseded, the run's `run.resume` says so), so it
    /// is served from `first`, the resumed run's first seq, while that frame is held.
    resumed: Option<(u64, u64)>,
}

/// Most typed events handed out at once (as [`MAX_CHUNK_BYTES`] bounds a chunk of frames).
const MAX_EVENTS_PER_READ: usize = 256;

/// A chunk handed to an observer at once stops growing past this many bytes (more frames follow
/// in the next chunk), so a re-attach of a long run does not copy the whole buffer in one go.
const MAX_CHUNK_BYTES: usize = 64 * 1024;

impl FrameBuffer {
    /// An empty buffer of frames only.
    pub fn new(limits: BufferLimits) -> Self {
        Self { frames: VecDeque::new(), events: None, bytes: 0, latest: 0, limits, resumed: None }
    }

    /// An empty buffer that keeps each event typed next to its frame ([`Self::events_after`]).
    pub fn with_events(limits: BufferLimits) -> Self {
        Self { events: Some(VecDeque::new()), ..Self::new(limits) }
    }

    /// Whether it keeps typed events.
    pub fn keeps_events(&self) -> bool {
        self.events.is_some()
    }

    /// What one entry counts against the byte limit: its frame, twice when its event is kept
    /// too (a typed event takes about as much memory as its encoding), so the limit bounds both.
    fn weight(&self, frame: &Bytes) -> usize {
        if self.events.is_some() { frame.len() * 2 } else { frame.len() }
    }

    /// Appends the frame of `event` (seqs only grow), and the event itself when this buffer
    /// keeps them, and drops the oldest beyond the limits.
    pub fn push(&mut self, event: Event, frame: Bytes) {
        let seq = event.seq;
        self.bytes += self.weight(&frame);
        self.frames.push_back((seq, frame));
        if let Some(events) = &mut self.events {
            events.push_back(Arc::new(event));
        }
        self.latest = self.latest.max(seq);
        while self.frames.len() > self.limits.max_events.max(1)
            || (self.bytes > self.limits.max_bytes && self.frames.len() > 1)
        {
            if let Some((_, dropped)) = self.frames.pop_front() {
                self.bytes -= self.weight(&dropped);
                if let Some(events) = &mut self.events {
                    events.pop_front();
                }
            }
        }
    }

    /// The seq of the newest frame (0 before the first).
    pub fn latest(&self) -> u64 {
        self.latest
    }

    /// The seq of the oldest frame held (`latest + 1` when empty: nothing is missing yet).
    pub fn oldest(&self) -> u64 {
        self.frames.front().map_or(self.latest + 1, |(seq, _)| *seq)
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The buffer of a run resumed in this process after events up to `first - 1` were
    /// numbered by the process that stopped, whose history covers them up to `durable`.
    pub fn resumed_after(&mut self, durable: u64, first: u64) {
        self.resumed = Some((durable.min(first.saturating_sub(1)), first));
    }

    /// Whether an observer that has seen everything up to `cursor` can be served without a gap.
    pub fn can_serve(&self, cursor: u64) -> bool {
        cursor >= self.latest
            || cursor + 1 >= self.oldest()
            || self.resumed.is_some_and(|(durable, first)| cursor >= durable && self.oldest() == first)
    }

    /// Up to `max` frames after `cursor`, each with its seq, and whether frames right after the
    /// cursor were already dropped (the reader then continues from the oldest held).
    pub fn frames_after(&self, cursor: u64, max: usize) -> (Vec<(u64, Bytes)>, bool) {
        if cursor >= self.latest {
            return (Vec::new(), false);
        }
        let skipped = !self.can_serve(cursor);
        let start = self.frames.partition_point(|(seq, _)| *seq <= cursor);
        (self.frames.iter().skip(start).take(max).cloned().collect(), skipped)
    }

    /// The frames after `cursor`, at most about 64 KiB of them (always at least one).
    pub fn read_after(&self, cursor: u64) -> Read {
        if cursor >= self.latest {
            return Read::Nothing;
        }
        if !self.can_serve(cursor) {
            return Read::Expired { oldest: self.oldest(), latest: self.latest };
        }
        let start = self.frames.partition_point(|(seq, _)| *seq <= cursor);
        let mut chunk = BytesMut::new();
        let mut last = cursor;
        for (seq, frame) in self.frames.iter().skip(start) {
            if !chunk.is_empty() && chunk.len() + frame.len() > MAX_CHUNK_BYTES {
                break;
            }
            chunk.extend_from_slice(frame);
            last = *seq;
        }
        Read::Frames { bytes: chunk.freeze(), last }
    }

    /// The typed events after `cursor`, at most 256 of them; the frames
    /// instead when this buffer keeps no events.
    pub fn events_after(&self, cursor: u64) -> ReadEvents {
        let Some(events) = &self.events else {
            return match self.read_after(cursor) {
                Read::Frames { bytes, last } => ReadEvents::Frames { bytes, last },
                Read::Nothing => ReadEvents::Nothing,
                Read::Expired { oldest, latest } => ReadEvents::Expired { oldest, latest },
            };
        };
        if cursor >= self.latest {
            return ReadEvents::Nothing;
        }
        if !self.can_serve(cursor) {
            return ReadEvents::Expired { oldest: self.oldest(), latest: self.latest };
        }
        let start = self.frames.partition_point(|(seq, _)| *seq <= cursor);
        let events: Vec<Arc<Event>> = events.iter().skip(start).take(MAX_EVENTS_PER_READ).cloned().collect();
        let last = events.last().map_or(cursor, |e| e.seq);
        ReadEvents::Events { events, last }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(seq: u64, len: usize) -> Bytes {
        let mut f = format!("id:{seq}\n").into_bytes();
        f.resize(len.max(f.len()), b'x');
        Bytes::from(f)
    }

    fn event(seq: u64) -> Event {
        Event::new(seq, 0, agw_protocol::event::RunCancel { run_id: "r".into(), totals: Default::default() })
    }

    fn filled(limits: BufferLimits, n: u64, len: usize) -> FrameBuffer {
        let mut buffer = FrameBuffer::new(limits);
        for seq in 1..=n {
            buffer.push(event(seq), frame(seq, len));
        }
        buffer
    }

    #[test]
    fn reads_everything_after_the_cursor_in_order() {
        let buffer = filled(BufferLimits { max_events: 100, max_bytes: 1 << 20 }, 5, 10);
        let Read::Frames { bytes, last } = buffer.read_after(2) else { panic!("frames expected") };
        assert_eq!(last, 5);
        assert_eq!(bytes, [frame(3, 10), frame(4, 10), frame(5, 10)].concat());
        assert_eq!(buffer.read_after(5), Read::Nothing);
        assert_eq!(buffer.read_after(7), Read::Nothing, "a cursor ahead waits");
    }

    #[test]
    fn the_oldest_frames_go_first_beyond_either_limit() {
        let by_events = filled(BufferLimits { max_events: 3, max_bytes: 1 << 20 }, 10, 10);
        assert_eq!((by_events.oldest(), by_events.latest()), (8, 10));
        assert!(by_events.can_serve(7) && !by_events.can_serve(6));
        assert_eq!(by_events.read_after(5), Read::Expired { oldest: 8, latest: 10 });

        let by_bytes = filled(BufferLimits { max_events: 100, max_bytes: 25 }, 10, 10);
        assert_eq!(by_bytes.oldest(), 9, "two 10-byte frames fit in 25 bytes");
        assert_eq!(by_bytes.bytes(), 20);

        let huge = filled(BufferLimits { max_events: 100, max_bytes: 5 }, 3, 10);
        assert_eq!(huge.oldest(), 3, "the newest frame is kept even when it alone is over the limit");
    }

    #[test]
    fn a_long_backlog_comes_in_bounded_chunks() {
        let buffer = filled(BufferLimits { max_events: 10_000, max_bytes: 1 << 30 }, 1000, 1000);
        let mut cursor = 0;
        let mut chunks = 0;
        while let Read::Frames { bytes, last } = buffer.read_after(cursor) {
            assert!(bytes.len() <= MAX_CHUNK_BYTES);
            assert_eq!(last, cursor + bytes.len() as u64 / 1000, "whole frames only");
            cursor = last;
            chunks += 1;
        }
        assert_eq!(cursor, 1000);
        assert_eq!(chunks, 1000 / (MAX_CHUNK_BYTES / 1000) + 1);
    }

    #[test]
    fn typed_events_come_with_their_frames_and_count_twice_against_the_byte_limit() {
        let mut buffer = FrameBuffer::with_events(BufferLimits { max_events: 100, max_bytes: 45 });
        for seq in 1..=5 {
            buffer.push(event(seq), frame(seq, 10));
        }
        assert_eq!(buffer.oldest(), 4, "two entries of 2 × 10 bytes fit in 45");
        let ReadEvents::Events { events, last } = buffer.events_after(3) else { panic!("events expected") };
        assert_eq!((events.iter().map(|e| e.seq).collect::<Vec<_>>(), last), (vec![4, 5], 5));
        assert!(matches!(buffer.events_after(5), ReadEvents::Nothing));
        assert!(matches!(buffer.events_after(1), ReadEvents::Expired { oldest: 4, latest: 5 }));

        let frames_only = filled(BufferLimits { max_events: 100, max_bytes: 1 << 20 }, 3, 10);
        let ReadEvents::Frames { bytes, last } = frames_only.events_after(1) else { panic!("frames expected") };
        assert_eq!((bytes, last), ([frame(2, 10), frame(3, 10)].concat().into(), 3));
    }

    #[test]
    fn a_resumed_run_serves_a_cursor_anywhere_after_its_durable_point() {
        let mut buffer = FrameBuffer::new(BufferLimits { max_events: 2, max_bytes: 1 << 20 });
        // Seqs up to 40 were numbered by the process that stopped; its history covers up to 30.
        buffer.resumed_after(30, 41);
        for seq in 41..=42 {
            buffer.push(event(seq), frame(seq, 10));
        }
        for cursor in [30, 35, 40] {
            let Read::Frames { bytes, last } = buffer.read_after(cursor) else { panic!("served after {cursor}") };
            assert_eq!((bytes, last), ([frame(41, 10), frame(42, 10)].concat().into(), 42));
        }
        assert!(matches!(buffer.read_after(29), Read::Expired { oldest: 41, .. }), "before the durable point");
        // Once its first frame is gone, only a gapless cursor is served.
        buffer.push(event(43), frame(43, 10));
        assert!(matches!(buffer.read_after(35), Read::Expired { oldest: 42, .. }));
    }
}
