//! The relay floor (`agw-load --relay`): the least a zero-buffering gateway on agw's own stack
//! can do per run, run as a child process in agw's place so its CPU and memory are measured
//! the same way.
//!
//! Per client request (`POST`, any path) it reads the body for its run number, then makes the
//! two model calls of the benchmark's REACT run one after the other (`x-agw-stage: …step-1`,
//! then `…step-2`) with reqwest (`TCP_NODELAY`, as agw's provider client) and hands every
//! upstream body chunk to the client as it arrives, as one frame of a hyper HTTP/1.1 response,
//! then a terminal `run.complete` event. No parsing, no JSON, no events of its own, no memory,
//! no tools, no run registry: what is left is the two connections per stream, one read and one
//! write per delta, and the runtime that moves them. What agw costs above this floor is agw's;
//! the floor itself is what a gateway built on tokio, hyper and reqwest cannot go below.

use std::convert::Infallible;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, header};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody, combinators::UnsyncBoxBody};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;

use crate::fixture;

const TERMINAL: &[u8] = b"event:message\ndata:{\"type\":\"run.complete\"}\n\n";

type RelayBody = UnsyncBoxBody<Bytes, std::io::Error>;

/// `agw-load relay`: serves on a free loopback port until killed; the upstream is agw's
/// `AGENT_PROVIDERS_BENCH_BASE_URL`. Prints the same "listening" line as agw.
pub fn main() -> anyhow::Result<()> {
    let upstream = std::env::var("AGENT_PROVIDERS_BENCH_BASE_URL")
        .map_err(|_| anyhow::anyhow!("relay: AGENT_PROVIDERS_BENCH_BASE_URL is not set"))?;
    let url = format!("{}/v1/chat/completions", upstream.trim_end_matches('/'));
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        println!("agw listening on http://{}", listener.local_addr()?);
        serve(listener, url).await
    })
}

async fn serve(listener: TcpListener, url: String) -> anyhow::Result<()> {
    let client = reqwest::Client::builder().tcp_nodelay(true).build()?;
    loop {
        let stream = fixture::accept(&listener).await;
        let (client, url) = (client.clone(), url.clone());
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let (client, url) = (client.clone(), url.clone());
                async move { Ok::<_, Infallible>(relay(client, url, request).await) }
            });
            let _ = auto::Builder::new(TokioExecutor::new()).serve_connection(TokioIo::new(stream), service).await;
        });
    }
}

/// Where one relayed run stands.
enum Turn {
    /// The next model call to make (1 or 2).
    Call(u8),
    /// Relaying a call's body; `u8` is the call.
    Relaying(u8, reqwest::Response),
    Done,
}

async fn relay(client: reqwest::Client, url: String, request: Request<Incoming>) -> Response<RelayBody> {
    let run = request.into_body().collect().await.ok().and_then(|b| fixture::run_of(&b.to_bytes())).unwrap_or(0);
    let mark = std::str::from_utf8(fixture::RUN_MARK).unwrap_or_default();
    let body: Bytes = serde_json::json!({
        "model": "fixture-model",
        "stream": true,
        "messages": [{"role": "user", "content": format!("{mark}{run}")}],
    })
    .to_string()
    .into();
    let frames = futures::stream::unfold(Turn::Call(1), move |turn| {
        let (client, url, body) = (client.clone(), url.clone(), body.clone());
        async move { next_frame(turn, &client, &url, body).await }
    });
    let mut response = Response::new(UnsyncBoxBody::new(StreamBody::new(Box::pin(frames))));
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    response
}

/// The next frame to hand to the client: an upstream chunk as it was read, or the terminal event.
async fn next_frame(
    mut turn: Turn,
    client: &reqwest::Client,
    url: &str,
    body: Bytes,
) -> Option<(Result<Frame<Bytes>, std::io::Error>, Turn)> {
    loop {
        turn = match turn {
            Turn::Call(call) => {
                let sent = client
                    .post(url)
                    .header("x-agw-stage", format!("relay-step-{call}"))
                    .header(header::CONTENT_TYPE, "application/json")
                    .body(body.clone())
                    .send()
                    .await;
                match sent {
                    Ok(response) => Turn::Relaying(call, response),
                    Err(e) => return Some((Err(std::io::Error::other(e)), Turn::Done)),
                }
            }
            Turn::Relaying(call, mut response) => match response.chunk().await {
                Ok(Some(chunk)) => return Some((Ok(Frame::data(chunk)), Turn::Relaying(call, response))),
                Ok(None) if call == 1 => Turn::Call(2),
                Ok(None) => return Some((Ok(Frame::data(Bytes::from_static(TERMINAL))), Turn::Done)),
                Err(e) => return Some((Err(std::io::Error::other(e)), Turn::Done)),
            },
            Turn::Done => return None,
        };
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    use super::*;
    use crate::fixture::{Fixture, Script};

    #[tokio::test]
    async fn relays_both_model_calls_chunk_by_chunk_then_the_terminal_event() {
        let script = Script { tokens: 3, delay: Duration::ZERO, first_token: Duration::ZERO };
        let fixture = Fixture::start(script).await.expect("fixture");
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(serve(listener, format!("{}/v1/chat/completions", fixture.base_url())));

        let body = reqwest::Client::new()
            .post(format!("http://{addr}/api/ap/query"))
            .body(r#"{"agentKey":"bench","message":"weather? bench-run-7"}"#)
            .send()
            .await
            .expect("relay answers")
            .text()
            .await
            .expect("body");

        // The tool call of the first call, the three tokens of the second, both `[DONE]`s, then
        // the relay's own terminal event, last.
        assert!(body.contains("\"tool_calls\""), "{body}");
        assert_eq!(body.matches("~T").count(), 3, "{body}");
        assert_eq!(body.matches("[DONE]").count(), 2, "{body}");
        assert!(body.ends_with(std::str::from_utf8(TERMINAL).expect("ASCII")), "{body}");
        assert_eq!(fixture.counters().requests.load(Ordering::Relaxed), 2);
        // Both calls named run 7 to the model, which timed them.
        assert!(fixture.model_times().take(7).is_some_and(|t| t.spent_ns > 0));
    }
}
