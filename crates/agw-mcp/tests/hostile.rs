//! agw-mcp against a hostile MCP server: the crate's `mcp-test-server` in its hostile modes
//! (thousands of tools, huge definitions, a `tools/list_changed` flood, colliding names), over
//! stdio. Each test failed before the limits existed.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use agw_mcp::{McpHub, McpLimits, McpServerConfig};
use agw_testkit::LogCapture;
use agw_tools::{ToolContext, ToolOutput};
use serde_json::json;
use support::{TOOL_COUNT, stdio};

async fn started(configs: Vec<McpServerConfig>, limits: McpLimits) -> Arc<McpHub> {
    let hub = McpHub::with_limits(configs, limits);
    hub.start().await;
    hub
}

fn hostile(name: &str, args: &[&str]) -> McpServerConfig {
    stdio(name, json!({"args": args}))
}

/// How many listings (`tools/list` without a cursor) the server has answered.
async fn listings(hub: &McpHub, server: &str) -> u64 {
    match hub.call(server, "list_count", json!({})).await {
        Ok(ToolOutput::Text(count)) => count.parse().expect("a count"),
        other => panic!("list_count: {other:?}"),
    }
}

#[tokio::test]
async fn ten_thousand_tools_are_cut_at_the_cap_and_the_rest_is_never_read() {
    let logs = LogCapture::default();
    let _guard = tracing::subscriber::set_default(logs.clone());
    let args = ["--tools", "10000", "--page-size", "100"];
    let hub = started(vec![hostile("many", &args)], McpLimits::default()).await;
    // The server's own 12 tools come first, then gen_00000…: the 256th is gen_00243.
    let status = hub.status("many").unwrap();
    assert_eq!(status.tools, 256, "{status:?}");
    let names = hub.tool_names_of("many");
    assert_eq!(names.len(), 256);
    assert!(names.contains(&"mcp__many__gen_00243".to_owned()) && !names.contains(&"mcp__many__gen_00244".to_owned()));
    let warned = logs.warnings_with(&["server=many", "tool=gen_00244", "more than 256 tools"]);
    assert_eq!(warned.len(), 1, "{}", logs.text());
    // Three pages of 100 were enough; the other 97 were never asked for (one listing so far).
    assert_eq!(listings(&hub, "many").await, 1);
    hub.shutdown().await;

    // The cap is a setting.
    let limits = McpLimits { max_tools_per_server: 20, ..McpLimits::default() };
    let hub = started(vec![hostile("few", &args)], limits).await;
    assert_eq!(hub.tool_names_of("few").len(), 20);
    hub.shutdown().await;
}

#[tokio::test]
async fn an_oversized_tool_definition_is_skipped_and_the_others_are_kept() {
    let logs = LogCapture::default();
    let _guard = tracing::subscriber::set_default(logs.clone());
    let hub = started(vec![hostile("big", &["--huge", "20000"])], McpLimits::default()).await;
    let names = hub.tool_names_of("big");
    assert_eq!(names.len(), TOOL_COUNT, "{names:?}");
    assert!(names.iter().all(|name| !name.contains("huge")), "{names:?}");
    for tool in ["huge_description", "huge_schema"] {
        let warned = logs.warnings_with(&["server=big", &format!("tool={tool}"), "larger than 16384 bytes"]);
        assert_eq!(warned.len(), 1, "{tool}: {}", logs.text());
    }
    // The others work as ever.
    assert_eq!(hub.call("big", "echo", json!({"text": "ok"})).await, Ok(ToolOutput::Text("ok".into())));
    hub.shutdown().await;

    // The cap is a setting: at 64 KiB both fit.
    let limits = McpLimits { max_tool_bytes: 64 * 1024, ..McpLimits::default() };
    let hub = started(vec![hostile("roomy", &["--huge", "20000"])], limits).await;
    assert_eq!(hub.tool_names_of("roomy").len(), TOOL_COUNT + 2);
    hub.shutdown().await;
}

/// CPU time (user + system) of the calling thread. The test runtime is single-threaded, so this
/// is everything the hub does for its connections.
#[cfg(target_os = "linux")]
fn thread_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").expect("/proc/thread-self/stat");
    // After the parenthesised command name: state is field 3, utime 14, stime 15 (clock ticks,
    // 100 per second on Linux).
    let fields: Vec<u64> =
        stat.rsplit(')').next().unwrap_or_default().split_whitespace().filter_map(|f| f.parse().ok()).collect();
    // `fields` starts at field 4 (the state is not a number).
    let ticks = fields[10] + fields[11];
    Duration::from_millis(ticks * 10)
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_list_changed_flood_costs_one_listing_a_second() {
    // A notification every 5 ms: 600 in the 3 s measured. 112 tools, 10 a page: a listing is 12
    // requests.
    let args = ["--flood-ms", "5", "--tools", "100", "--page-size", "10"];
    let hub = started(vec![hostile("noisy", &args)], McpLimits::default()).await;
    let (listed_before, cpu_before, started) = (listings(&hub, "noisy").await, thread_cpu(), Instant::now());
    tokio::time::sleep(Duration::from_secs(3)).await;
    let listed = listings(&hub, "noisy").await - listed_before;
    let (cpu, elapsed) = (thread_cpu() - cpu_before, started.elapsed());
    eprintln!("a list_changed flood: {listed} listings and {cpu:?} of CPU in {elapsed:?}");
    assert!((1..=5).contains(&listed), "{listed} listings in {elapsed:?}");
    assert!(cpu.as_secs_f64() < 0.2 * elapsed.as_secs_f64(), "{cpu:?} of CPU in {elapsed:?}");
    // The connection still serves, and its tools are intact.
    assert_eq!(hub.call("noisy", "echo", json!({"text": "ok"})).await, Ok(ToolOutput::Text("ok".into())));
    assert_eq!(hub.tool_names_of("noisy").len(), TOOL_COUNT + 100);
    hub.shutdown().await;
}

#[tokio::test]
async fn a_colliding_name_skips_the_later_tool_instead_of_renaming_it() {
    let logs = LogCapture::default();
    let _guard = tracing::subscriber::set_default(logs.clone());
    let hub = started(vec![hostile("twins", &["--colliding"])], McpLimits::default()).await;
    // "Echo" sorts before "echo" and keeps mcp__twins__echo; "echo" is skipped, not renamed.
    let names = hub.tool_names_of("twins");
    assert_eq!(names.len(), TOOL_COUNT, "{names:?}");
    assert_eq!(names.iter().filter(|n| n.starts_with("mcp__twins__echo")).collect::<Vec<_>>(), ["mcp__twins__echo"]);
    let collisions = hub.name_collisions();
    assert_eq!(collisions.len(), 1, "{collisions:?}");
    assert_eq!((collisions[0].tool.as_str(), collisions[0].kept_tool.as_str()), ("echo", "Echo"));
    let warned = logs.warnings_with(&["server=twins", "tool=echo", "kept_tool=Echo", "name=mcp__twins__echo"]);
    assert_eq!(warned.len(), 1, "{}", logs.text());
    let echo = hub.tools().into_iter().find(|t| t.name() == "mcp__twins__echo").expect("the kept tool");
    let out = echo.call(json!({}), &ToolContext::new("run-1", "chat-1")).await;
    assert_eq!(out, Ok(ToolOutput::Text("the colliding twin".into())));
    hub.shutdown().await;
}
