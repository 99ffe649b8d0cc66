//! TEMPORARY (A/B benchmark, selected with `AGW_OPENAI_STREAM=async-openai`): the streaming path
//! on async-openai's bring-your-own-types API. async-openai reads the response in a task of its
//! own, decodes each chunk into a `serde_json::Value` and hands it over through an unbounded
//! channel; [`super::gate`] restores backpressure, [`super::transport`] sends each attempt once.

use std::pin::Pin;
use std::sync::Arc;

use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::traits::RequestOptionsBuilder;
use futures::{Stream, StreamExt};
use serde_json::Value;

use super::body::api_base;
use super::chunk::parse_chunk;
use super::gate;
use super::transport::{SingleAttempt, from_openai};
use crate::LlmDelta;
use crate::error::LlmError;
use crate::interaction;
use crate::transport::{
    CallSite, InactivityTimer, ResponseLimits, ResponseMeter, StreamLog, call_headers, open_with_retries,
};

/// async-openai's client (it holds the API key).
pub(super) type Client = async_openai::Client<OpenAIConfig>;

type ChunkStream = Pin<Box<dyn Stream<Item = Result<Value, OpenAIError>> + Send>>;

/// A client for `base_url` that sends through `http`, once per attempt.
pub(super) fn client(base_url: &str, api_key: &str, http: reqwest::Client) -> Client {
    // Every field is set explicitly: OpenAIConfig's defaults read OPENAI_* environment
    // variables, which must not leak into requests to another provider.
    let config =
        OpenAIConfig::new().with_api_base(api_base(base_url)).with_api_key(api_key).with_org_id("").with_project_id("");
    Client::with_config(config).with_http_service(SingleAttempt::new(http))
}

/// The chunks of one open response, as async-openai hands them over.
pub(super) struct Chunks {
    chunks: ChunkStream,
    /// Knows which response limit the body broke, if any.
    gate: Arc<gate::BodyGate>,
    timer: InactivityTimer,
    /// Counts the turn's tool calls (the gate meters the bytes).
    meter: ResponseMeter,
}

impl Chunks {
    /// Sends the request until it gets a 2xx response or a non-retriable failure.
    pub(super) async fn open(
        client: &Client,
        site: CallSite<'_>,
        body: &Value,
        limits: ResponseLimits,
    ) -> Result<Self, LlmError> {
        let headers = call_headers(site.options);
        let (chunks, gate) = open_with_retries(site, body, || {
            // The transport puts the response body behind this gate: it is read only as fast as
            // the run takes chunks (async-openai would otherwise read it all into memory).
            let gate = Arc::new(gate::BodyGate::new(limits));
            let headers = headers.clone();
            let send = gate::CURRENT.scope(gate.clone(), async move {
                client.chat().headers(headers).create_stream_byot::<_, Value>(body).await.map_err(from_openai)
            });
            async move {
                let chunks = send.await?;
                Ok((Box::pin(gate::Demand::new(chunks, gate.clone())) as ChunkStream, gate))
            }
        })
        .await?;
        let timer = InactivityTimer::new(site.options.inactivity_timeout);
        Ok(Self { chunks, gate, timer, meter: ResponseMeter::new(limits) })
    }

    /// The deltas of the next chunk; `None` when async-openai's reader ended (`[DONE]` or the
    /// end of the body).
    pub(super) async fn next_chunk(&mut self, log: &mut StreamLog) -> Result<Option<Vec<LlmDelta>>, LlmError> {
        match self.timer.within(self.chunks.next(), log).await? {
            None => Ok(None),
            Some(Err(error)) => Err(self.gate.take_violation().unwrap_or_else(|| from_openai(error))),
            Some(Ok(chunk)) => {
                log.chunk("", || interaction::render(&chunk));
                let deltas = parse_chunk(&chunk)?;
                self.meter.deltas(&deltas)?;
                Ok(Some(deltas))
            }
        }
    }
}
