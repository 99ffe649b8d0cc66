//! The direct streaming path: chunks read straight from the response body.
//!
//! The body is read only when the run asks for the next delta and nothing parsed is left (so no
//! backpressure gate is needed), one network read at a time; every `data:` payload is decoded
//! into the typed chunk view as soon as the read that completed it arrives.

use super::chunk::parse_chunk_str;
use crate::LlmDelta;
use crate::error::LlmError;
use crate::transport::{StreamLog, UpstreamSse, render_data};

/// The `data:` payload that ends an OpenAI stream.
const DONE: &str = "[DONE]";

/// The deltas of the next chunk of `body`, counted against its limits; `None` at `[DONE]` or the
/// end of the body. Frames without data are skipped, and so are `keepalive` events (as
/// async-openai's reader did).
pub(super) async fn next_chunk(body: &mut UpstreamSse, log: &mut StreamLog) -> Result<Option<Vec<LlmDelta>>, LlmError> {
    loop {
        let Some(frame) = body.next_frame(log).await? else { return Ok(None) };
        let data = frame.data.trim();
        if data.is_empty() || frame.event == "keepalive" {
            continue;
        }
        if data == DONE {
            // Nothing after it is read.
            body.discard();
            return Ok(None);
        }
        log.chunk("", || render_data(data));
        let deltas = parse_chunk_str(data)?;
        body.meter().deltas(&deltas)?;
        return Ok(Some(deltas));
    }
}
