//! Reading a request's body within the edge's limits.

use bytes::Bytes;
use http::{Request, header};
use http_body_util::{BodyExt, Limited};

use crate::body::RequestBody;
use crate::envelope::ApiError;

/// Reads the whole body, refusing more than `limit` bytes (413) before reading it all, and a body
/// that takes longer than `timeout` to arrive (408: a slow or never-ending body must not hold a
/// connection and a task forever).
pub async fn read_body(
    req: Request<RequestBody>,
    limit: usize,
    timeout: std::time::Duration,
) -> Result<Bytes, ApiError> {
    let declared =
        req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ApiError::payload_too_large(limit));
    }
    let Ok(read) = tokio::time::timeout(timeout, Limited::new(req.into_body(), limit).collect()).await else {
        return Err(ApiError::request_timeout(timeout));
    };
    match read {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => {
            Err(ApiError::payload_too_large(limit))
        }
        Err(e) => Err(ApiError::bad_request(format!("could not read request body: {e}"))),
    }
}
