//! Slow and greedy clients over real sockets (issue 14): slowloris, idle keep-alive, slow bodies,
//! connection floods, per-IP caps and request rates. Each fails without the door's limits.

mod common;

use std::time::{Duration, Instant};

use common::{Gateway, oneshot_agent};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn addr(gw: &Gateway) -> String {
    gw.base.trim_start_matches("http://").to_string()
}

/// Reads until the server closes the connection or `limit` passes; the time it closed, if it did.
async fn closed_within(stream: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(limit.saturating_sub(started.elapsed()), stream.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some(started.elapsed()),
            Ok(Ok(_)) => {}
        }
    }
}

/// Attack: N clients each send one header byte every 200 ms. Without a header-read timeout they
/// held their connections forever; now every one is closed after ~1 s while a normal client is
/// served throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_connections_are_closed_after_the_header_timeout() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 1000)], &[("SERVER_HEADER_READ_TIMEOUT", "1s")]).await;
    let target = addr(&gw);
    let mut tasks = Vec::new();
    for _ in 0..50 {
        let target = target.clone();
        tasks.push(tokio::spawn(async move {
            let mut stream = TcpStream::connect(&target).await.unwrap();
            let request = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n";
            let started = Instant::now();
            for byte in request {
                if stream.write_all(&[*byte]).await.is_err() {
                    return started.elapsed();
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
                if started.elapsed() > Duration::from_secs(10) {
                    break;
                }
            }
            closed_within(&mut stream, Duration::from_secs(5)).await.map_or(Duration::MAX, |_| started.elapsed())
        }));
    }
    // Meanwhile a normal client is served.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (status, _) = gw.get_json("/api/ap/agents").await;
    assert_eq!(status, 200);
    for task in tasks {
        let held = task.await.unwrap();
        assert!(held < Duration::from_secs(4), "a slowloris connection was held {held:?}");
    }
}

/// An idle keep-alive connection is closed after the same timeout.
#[tokio::test]
async fn idle_keep_alive_connections_are_closed() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 1000)], &[("SERVER_HEADER_READ_TIMEOUT", "1s")]).await;
    let mut stream = TcpStream::connect(addr(&gw)).await.unwrap();
    stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n").await.unwrap();
    let mut buf = [0u8; 512];
    let n = stream.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    let closed = closed_within(&mut stream, Duration::from_secs(5)).await.expect("closed while idle");
    assert!(closed < Duration::from_secs(3), "{closed:?}");
}

/// Attack: a body that never finishes. Before the body timeout the request (and its task) hung
/// forever; now it is answered 408.
#[tokio::test]
async fn a_body_that_never_finishes_gets_408() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 1000)], &[("SERVER_BODY_READ_TIMEOUT", "1s")]).await;
    let mut stream = TcpStream::connect(addr(&gw)).await.unwrap();
    let head = "POST /api/ap/query HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n";
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(br#"{"agentKey":"#).await.unwrap();
    let started = Instant::now();
    let mut response = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut response)).await;
    let text = String::from_utf8_lossy(&response);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("request body not received within 1000 ms"), "{text}");
    assert!(started.elapsed() < Duration::from_secs(3));
}

/// A connection over `server.max-connections` is closed at once; freed slots are reused.
#[tokio::test]
async fn connections_over_the_cap_are_closed_at_once() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 1000)], &[("SERVER_MAX_CONNECTIONS", "4")]).await;
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(TcpStream::connect(addr(&gw)).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut extra = TcpStream::connect(addr(&gw)).await.unwrap();
    let closed = closed_within(&mut extra, Duration::from_secs(2)).await;
    assert!(closed.is_some(), "the fifth connection is closed");
    drop(held);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (status, _) = gw.get_json("/api/ap/agents").await;
    assert_eq!(status, 200, "freed slots are reused");
}

/// One client address may hold at most `server.max-connections-per-ip` connections.
#[tokio::test]
async fn one_client_cannot_take_every_connection() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 1000)], &[("SERVER_MAX_CONNECTIONS_PER_IP", "3")]).await;
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(TcpStream::connect(addr(&gw)).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut extra = TcpStream::connect(addr(&gw)).await.unwrap();
    assert!(closed_within(&mut extra, Duration::from_secs(2)).await.is_some(), "the fourth is closed");
}

/// Over `server.max-requests-per-ip-per-minute` a client gets 429 with `Retry-After`.
#[tokio::test]
async fn a_client_over_its_request_rate_gets_429() {
    let gw =
        Gateway::start(&[oneshot_agent("a", false, 1000)], &[("SERVER_MAX_REQUESTS_PER_IP_PER_MINUTE", "5")]).await;
    for _ in 0..5 {
        assert_eq!(gw.get_json("/api/ap/agents").await.0, 200);
    }
    let resp = gw.client.get(format!("{}/api/ap/agents", gw.base)).send().await.unwrap();
    assert_eq!(resp.status(), 429);
    let retry: u64 = resp.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry));
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["code"], 429);
}

/// On loopback the per-client limits are off by default; elsewhere they are on.
#[test]
fn per_client_limits_default_by_address() {
    let loopback = agw_http::Settings::load(None, Vec::<(String, String)>::new()).unwrap();
    assert_eq!(loopback.server.limits.max_connections_per_ip, 0);
    assert_eq!(loopback.server.limits.max_requests_per_ip_per_minute, 0);
    let public = agw_http::Settings::load(
        None,
        [("SERVER_ADDRESS", "0.0.0.0"), ("AGENT_AUTH_ENABLED", "false")].map(|(k, v)| (k.to_string(), v.to_string())),
    )
    .unwrap();
    assert_eq!(public.server.limits.max_connections_per_ip, 256);
    assert_eq!(public.server.limits.max_requests_per_ip_per_minute, 1200);
    assert_eq!(public.server.limits.header_read_timeout, Duration::from_secs(10));
}
