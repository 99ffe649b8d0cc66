//! A provider that never ends its line, over the whole gateway (issue 14): the run ends with
//! `provider_error` at the configured cap, agw's memory stays flat, the next run is served.

mod common;

use agw_testkit::Transcript;
use common::{Gateway, assert_chat_files_valid, oneshot_agent, rss_bytes};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_provider_line_ends_the_run_with_provider_error_and_memory_stays_flat() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[("AGW_PROVIDER_MAX_LINE_BYTES", "65536")]).await;
    // 64 MiB in one line that never ends, after a normal first chunk.
    let piece = "x".repeat(64 * 1024);
    let mut endless = Transcript::new().content("Hello ").raw("data: {\"choices\":[{\"delta\":{\"content\":\"");
    for _ in 0..1024 {
        endless = endless.raw(&piece);
    }
    gw.fixture.push(endless); // moved into the response, not cloned: RSS growth is agw's own
    let before = rss_bytes();
    let stream = gw.run(&json!({"agentKey":"a","message":"hi"})).await;
    let growth = rss_bytes().saturating_sub(before);
    let last = stream.last();
    assert_eq!(last["type"], "run.error", "{last}");
    assert_eq!(last["error"]["code"], "provider_error");
    assert!(last["error"]["message"].as_str().unwrap_or_default().contains("line length"), "{last}");
    assert_eq!(stream.of_type("content.delta")[0]["delta"], "Hello ", "what came before the cap was streamed");
    assert!(growth < 32 * 1024 * 1024, "RSS grew by {} MiB", growth / (1024 * 1024));
    eprintln!("endless 64 MiB line: RSS growth {} KiB", growth / 1024);
    assert_chat_files_valid(&gw);
    // The server goes on.
    gw.fixture.set_default(Transcript::openai_text(&["fine"]));
    assert_eq!(gw.run(&json!({"agentKey":"a","message":"again"})).await.last()["type"], "run.complete");
}
