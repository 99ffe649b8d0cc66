//! The HTTP service installed into async-openai (`Client::with_http_service`), on the shared
//! [`crate::transport`].
//!
//! async-openai's default executor retries 429/5xx with its own backoff and turns non-JSON
//! error bodies into deserialisation errors without the status. agw needs the opposite: one
//! attempt per call (the provider decides about retries, and only before output started) and
//! the status, `Retry-After` and a bounded body excerpt of every non-2xx answer. So this
//! service sends exactly once and reports a non-2xx response as a boxed [`LlmError::Http`],
//! which the provider downcasts back.

use std::task::{Context, Poll};

use async_openai::error::OpenAIError;
use async_openai::middleware::HttpRequestFactory;
use futures::future::BoxFuture;
use http::header::AUTHORIZATION;

use crate::error::{BODY_EXCERPT_CHARS, LlmError, excerpt};
use crate::transport::{error_chain, http_error, transport_error};

/// A tower service that sends the request once and fails on non-2xx statuses.
#[derive(Clone, Debug)]
pub(crate) struct SingleAttempt {
    client: reqwest::Client,
}

impl SingleAttempt {
    pub(crate) fn new(client: reqwest::Client) -> Self {
        Self { client }
    }
}

impl tower::Service<HttpRequestFactory> for SingleAttempt {
    type Response = reqwest::Response;
    type Error = OpenAIError;
    type Future = BoxFuture<'static, Result<reqwest::Response, OpenAIError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, factory: HttpRequestFactory) -> Self::Future {
        let client = self.client.clone();
        Box::pin(async move {
            let request = factory.build().await?;
            // Remember the bearer token only to scrub it from error bodies that echo it.
            let token = request
                .headers()
                .get(AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::to_owned)
                .unwrap_or_default();
            let response = client.execute(request).await.map_err(|e| boxed(transport_error(&e)))?;
            if response.status().is_success() {
                // The body is read at the pace the run consumes it (see `gate`).
                return Ok(super::gate::gated(response));
            }
            Err(boxed(http_error(response, &token).await))
        })
    }
}

fn boxed(error: LlmError) -> OpenAIError {
    OpenAIError::Boxed(Box::new(error))
}

/// Maps what async-openai hands back (its own errors or our boxed ones) onto [`LlmError`].
pub(crate) fn from_openai(error: OpenAIError) -> LlmError {
    match error {
        OpenAIError::Boxed(inner) => match inner.downcast::<LlmError>() {
            Ok(ours) => *ours,
            Err(other) => LlmError::Connection { message: error_chain(other.as_ref()) },
        },
        OpenAIError::Reqwest(e) => transport_error(&e),
        OpenAIError::ApiError(api) => LlmError::Http {
            status: api.status_code.as_u16(),
            retry_after: None,
            body: excerpt(&api.api_error.message, BODY_EXCERPT_CHARS),
        },
        OpenAIError::JSONDeserialize(_, content) => {
            LlmError::MalformedChunk { excerpt: excerpt(&content, BODY_EXCERPT_CHARS) }
        }
        // The SSE reader reports transport failures mid-body (reset, truncated chunked body)
        // as stream errors.
        OpenAIError::StreamError(e) => LlmError::Connection { message: format!("stream interrupted: {e}") },
        OpenAIError::InvalidArgument(message) => LlmError::InvalidRequest { message },
        other => LlmError::Connection { message: other.to_string() },
    }
}
