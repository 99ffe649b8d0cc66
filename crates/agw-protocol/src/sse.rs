//! SSE framing (`docs/contract/sse-events.md` §1): the frame encoder agw writes with, and a small
//! incremental decoder for tests and clients reading agw streams.

use crate::event::Event;

/// The keep-alive frame. Carries no seq and is never counted as an event.
pub const HEARTBEAT_FRAME: &[u8] = b"event:heartbeat\n\n";

const ID_PREFIX: &[u8] = b"id:";
const MESSAGE_PREFIX: &[u8] = b"\nevent:message\ndata:";
const FRAME_END: &[u8] = b"\n\n";

/// Appends one `id:<seq>\nevent:message\ndata:<compact json>\n\n` frame (no space after the
/// colons). The `id:` line (agw extension, `docs/contract/sse-events.md` §1) is what a reconnecting client sends
/// back as `Last-Event-ID` to resume after the last event it saw.
///
/// If the event cannot be serialised (not expected: every payload is plain data with string
/// keys) the frame carries a `run.error` instead, keeping the event's `seq` and `timestamp`, so
/// the stream stays parseable and the client learns the run is broken. Like the reference's
/// fallback it has no `runId` (not every payload knows it).
///
/// ```
/// use agw_protocol::event::{ContentDelta, Event};
/// use agw_protocol::sse::{SseDecoder, write_event};
///
/// let event = Event::new(4, 1_771_000_000_900, ContentDelta { content_id: "run-1_c_1".into(), delta: "Hi".into() });
/// let mut body = Vec::new();
/// write_event(&event, &mut body);
/// assert_eq!(
///     String::from_utf8_lossy(&body),
///     concat!(
///         "id:4\n",
///         "event:message\n",
///         r#"data:{"seq":4,"type":"content.delta","timestamp":1771000000900,"contentId":"run-1_c_1","delta":"Hi"}"#,
///         "\n\n",
///     )
/// );
///
/// // Decoding it back, as a client would.
/// let mut frames = Vec::new();
/// SseDecoder::new().feed(&body, &mut frames);
/// assert_eq!(frames[0].parse_event()?, event);
/// # Ok::<(), serde_json::Error>(())
/// ```
pub fn write_event(event: &Event, out: &mut Vec<u8>) {
    out.extend_from_slice(ID_PREFIX);
    // itoa-style without an allocation: seq is a plain u64.
    let mut digits = [0u8; 20];
    let mut n = event.seq;
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
    out.extend_from_slice(MESSAGE_PREFIX);
    let json_start = out.len();
    if serde_json::to_writer(&mut *out, event).is_err() {
        out.truncate(json_start);
        write_fallback(event, out);
    }
    out.extend_from_slice(FRAME_END);
}

/// The frame of [`write_event`] as a new buffer.
pub fn event_frame(event: &Event) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    write_event(event, &mut out);
    out
}

fn write_fallback(event: &Event, out: &mut Vec<u8>) {
    // Written by hand: serialisation is exactly what just failed.
    out.extend_from_slice(
        format!(
            concat!(
                r#"{{"seq":{},"type":"run.error","timestamp":{},"#,
                r#""error":{{"code":"internal","message":"Internal serialization failure","retriable":false}}}}"#
            ),
            event.seq, event.timestamp
        )
        .as_bytes(),
    );
}

/// One decoded SSE frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseFrame {
    /// The `event:` field; `message` when the frame has none.
    pub event: String,
    /// The `data:` lines joined with `\n`; empty when the frame has none (heartbeats).
    pub data: String,
    /// The `id:` field of this frame, if it had one (agw sends the event's `seq`).
    pub id: Option<String>,
}

impl SseFrame {
    /// Parses `data` as a protocol event.
    pub fn parse_event(&self) -> Result<Event, serde_json::Error> {
        serde_json::from_str(&self.data)
    }

    /// Whether this is a keep-alive frame (`event:heartbeat`), not a protocol event.
    pub fn is_heartbeat(&self) -> bool {
        self.event == "heartbeat"
    }
}

/// Incremental SSE decoder (WHATWG rules, simplified): lines end with LF, CRLF or CR; a blank
/// line ends a frame; `:` lines are comments; one optional space after the field colon is
/// stripped; `id` is kept per frame (not carried over to later frames, unlike a browser's
/// last-event-id), `retry` and unknown fields are ignored. Unlike a browser it also yields frames
/// without data, so heartbeats are visible.
///
/// ```
/// use agw_protocol::event::{Event, RunStart};
/// use agw_protocol::sse::{HEARTBEAT_FRAME, SseDecoder, write_event};
///
/// let mut stream = HEARTBEAT_FRAME.to_vec();
/// let run_start = Event::new(1, 0, RunStart { run_id: "run-1".into(), chat_id: "chat-1".into() });
/// write_event(&run_start, &mut stream);
///
/// // Network reads split the stream anywhere; frames come out whole.
/// let mut decoder = SseDecoder::new();
/// let mut frames = Vec::new();
/// for read in stream.chunks(7) {
///     decoder.feed(read, &mut frames);
/// }
/// assert!(!decoder.has_pending());
/// assert!(frames[0].is_heartbeat());
/// assert_eq!(frames[1].parse_event()?, run_start);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Default)]
pub struct SseDecoder {
    buf: Vec<u8>,
    /// Bytes of `buf` already searched for a line end: a long line arriving in many small reads
    /// is scanned once, not once per read.
    scanned: usize,
    event: Option<String>,
    data: Option<String>,
    id: Option<String>,
}

impl SseDecoder {
    /// A decoder at the start of a stream, nothing buffered.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds a chunk (any split, even inside a UTF-8 sequence) and appends completed frames.
    pub fn feed(&mut self, chunk: &[u8], frames: &mut Vec<SseFrame>) {
        self.buf.extend_from_slice(chunk);
        let mut start = 0;
        let mut from = self.scanned;
        while let Some(rel) = self.buf[from..].iter().position(|&b| b == b'\n' || b == b'\r') {
            let end = from + rel;
            let next = match self.buf[end] {
                b'\r' if end + 1 == self.buf.len() => break, // may be the first half of CRLF
                b'\r' if self.buf[end + 1] == b'\n' => end + 2,
                _ => end + 1,
            };
            let line = String::from_utf8_lossy(&self.buf[start..end]).into_owned();
            start = next;
            from = next;
            self.line(&line, frames);
        }
        // Everything after `start` up to a trailing CR (still undecided) has been searched.
        let undecided = usize::from(self.buf.last() == Some(&b'\r'));
        self.buf.drain(..start);
        self.scanned = self.buf.len() - undecided;
    }

    /// True when bytes of an unfinished line or frame are buffered (a cleanly ended stream
    /// leaves nothing pending).
    pub fn has_pending(&self) -> bool {
        !self.buf.is_empty() || self.event.is_some() || self.data.is_some() || self.id.is_some()
    }

    fn line(&mut self, line: &str, frames: &mut Vec<SseFrame>) {
        if line.is_empty() {
            if self.event.is_some() || self.data.is_some() {
                frames.push(SseFrame {
                    event: self.event.take().unwrap_or_else(|| "message".to_owned()),
                    data: self.data.take().unwrap_or_default(),
                    id: self.id.take(),
                });
            }
            self.id = None;
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => self.event = Some(value.to_owned()),
            "id" => self.id = Some(value.to_owned()),
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            },
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{ContentDelta, RunComplete};

    fn sample() -> Event {
        Event::new(7, 1_771_000_000_000, ContentDelta { content_id: "r_c_1".into(), delta: "a\nb 中".into() })
    }

    #[test]
    fn frame_bytes_are_exact() {
        let frame = event_frame(&sample());
        assert_eq!(
            String::from_utf8(frame).expect("utf8"),
            "id:7\nevent:message\ndata:{\"seq\":7,\"type\":\"content.delta\",\"timestamp\":1771000000000,\"contentId\":\"r_c_1\",\"delta\":\"a\\nb 中\"}\n\n"
        );
        assert_eq!(HEARTBEAT_FRAME, b"event:heartbeat\n\n");
        for seq in [0, 1, 9, 10, 12_345, u64::MAX] {
            let frame = event_frame(&Event::new(
                seq,
                0,
                RunComplete {
                    run_id: "r".into(),
                    finish_reason: "stop".into(),
                    output: None,
                    totals: Default::default(),
                },
            ));
            assert!(String::from_utf8(frame).unwrap().starts_with(&format!("id:{seq}\nevent:message\n")));
        }
    }

    #[test]
    fn fallback_frame_is_valid_run_error_json() {
        let mut out = Vec::new();
        write_fallback(&sample(), &mut out);
        let event: Event = serde_json::from_slice(&out).expect("fallback parses");
        assert_eq!(event.type_name(), "run.error");
        assert_eq!(event.seq, 7);
        // the reference's fallback (no seq, no runId, no code) parses too
        let reference = r#"{"type":"run.error","error":{"message":"Internal serialization failure"}}"#;
        let event: Event = serde_json::from_str(reference).expect("reference fallback parses");
        assert!(event.is_terminal());
    }

    #[test]
    fn decoder_handles_any_split_and_heartbeats() {
        let mut stream = event_frame(&sample());
        stream.extend_from_slice(HEARTBEAT_FRAME);
        stream.extend_from_slice(&event_frame(&Event::new(
            8,
            1,
            RunComplete { run_id: "r".into(), finish_reason: "stop".into(), output: None, totals: Default::default() },
        )));
        for split in 1..stream.len() {
            let mut decoder = SseDecoder::new();
            let mut frames = Vec::new();
            for chunk in stream.chunks(split) {
                decoder.feed(chunk, &mut frames);
            }
            assert!(!decoder.has_pending(), "split {split}");
            assert_eq!(frames.len(), 3, "split {split}");
            assert_eq!(frames[0].parse_event().expect("event"), sample());
            assert_eq!(frames[0].id.as_deref(), Some("7"), "the id line carries the seq");
            assert!(frames[1].is_heartbeat());
            assert_eq!(frames[1].id, None, "heartbeats carry no id");
            assert_eq!(frames[1].data, "");
            assert_eq!(frames[2].parse_event().expect("event").type_name(), "run.complete");
        }
    }

    #[test]
    fn a_long_line_in_one_byte_reads_is_scanned_once() {
        // 4 MiB of one line, one byte per feed: quadratic rescanning would take minutes.
        let mut line = vec![b'x'; 4 << 20];
        line.splice(0..0, b"data:".iter().copied());
        line.extend_from_slice(b"\r\n\r\n");
        let started = std::time::Instant::now();
        let mut decoder = SseDecoder::new();
        let mut frames = Vec::new();
        for byte in line.chunks(1) {
            decoder.feed(byte, &mut frames);
        }
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].data.len(), 4 << 20);
        assert!(!decoder.has_pending());
        assert!(started.elapsed() < std::time::Duration::from_secs(20), "{:?}", started.elapsed());
    }

    #[test]
    fn decoder_general_sse_syntax() {
        let mut decoder = SseDecoder::new();
        let mut frames = Vec::new();
        decoder.feed(b": comment\r\nid: 1\r\ndata: one\rdata:two\r\n\r\n\n\ndata", &mut frames);
        assert_eq!(frames, vec![SseFrame { event: "message".into(), data: "one\ntwo".into(), id: Some("1".into()) }]);
        assert!(decoder.has_pending());
        decoder.feed(b"\n\n", &mut frames);
        assert_eq!(frames[1], SseFrame { event: "message".into(), data: String::new(), id: None });
        assert!(!decoder.has_pending());
    }
}
