//! The Host allow-list over real HTTP: DNS rebinding is refused before CORS, auth and routing.

mod common;

use std::time::Duration;

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rsa::{KeyPair, KeySize};
use aws_lc_rs::signature::KeyPair as _;
use base64::Engine;
use common::{Gateway, oneshot_agent};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn gateway(env: &[(&str, &str)]) -> Gateway {
    Gateway::start(&[oneshot_agent("a", false, 5000)], env).await
}

/// Sends one raw HTTP/1.1 request with exactly these header lines; returns status and body.
async fn raw(gw: &Gateway, request_line: &str, headers: &[&str]) -> (u16, String) {
    let addr = gw.base.strip_prefix("http://").unwrap();
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut req = format!("{request_line}\r\n");
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("Connection: close\r\n\r\n");
    stream.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut out)).await.unwrap().unwrap();
    let text = String::from_utf8_lossy(&out).to_string();
    let status = text.split(' ').nth(1).unwrap().parse().unwrap();
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

fn refused(status: u16, body: &str, host: &str) {
    assert_eq!(status, 403, "{body}");
    let body: Value = serde_json::from_str(body).unwrap();
    assert_eq!(body, json!({"code": 403, "msg": format!("forbidden: host not allowed: {host}"), "data": {}}));
}

#[tokio::test]
async fn a_rebinding_host_is_refused_on_loopback_and_loopback_names_are_served() {
    let gw = gateway(&[]).await;
    let port = gw.base.rsplit(':').next().unwrap().to_string();

    // What a DNS-rebinding page sends: its own name as Host and Origin (same-origin to CORS).
    let evil = "evil.example:8080";
    for path in ["/api/ap/agents", "/healthz", "/api/ap/nowhere"] {
        let (status, body) =
            raw(&gw, &format!("GET {path} HTTP/1.1"), &[&format!("Host: {evil}"), &format!("Origin: http://{evil}")])
                .await;
        refused(status, &body, evil);
    }
    let (status, body) = raw(&gw, "POST /api/ap/query HTTP/1.1", &[&format!("Host: {evil}")]).await;
    refused(status, &body, evil);
    assert_eq!(gw.fixture.request_count(), 0, "no run started");

    for host in [format!("localhost:{port}"), format!("127.0.0.1:{port}"), format!("[::1]:{port}"), "localhost".into()]
    {
        let (status, body) = raw(&gw, "GET /api/ap/agents HTTP/1.1", &[&format!("Host: {host}")]).await;
        assert_eq!(status, 200, "{host}: {body}");
    }
    // HTTP/1.0 without any Host: nothing says which name was meant.
    let (status, body) = raw(&gw, "GET /healthz HTTP/1.0", &[]).await;
    assert_eq!(status, 403, "{body}");
    // Absolute-form targets carry the authority too.
    let (status, _) =
        raw(&gw, &format!("GET http://{evil}/healthz HTTP/1.1"), &[&format!("Host: localhost:{port}")]).await;
    assert_eq!(status, 403);
}

#[tokio::test]
async fn configured_hosts_are_served_and_star_serves_any() {
    let gw = gateway(&[("SERVER_ALLOWED_HOSTS", "gw.example.com, *.corp.example:8443")]).await;
    for host in ["gw.example.com:8080", "a.corp.example:8443", "localhost"] {
        let (status, body) = raw(&gw, "GET /healthz HTTP/1.1", &[&format!("Host: {host}")]).await;
        assert_eq!(status, 200, "{host}: {body}");
    }
    for host in ["a.corp.example:9000", "evil.example"] {
        let (status, body) = raw(&gw, "GET /healthz HTTP/1.1", &[&format!("Host: {host}")]).await;
        refused(status, &body, host);
    }
    let gw = gateway(&[("SERVER_ALLOWED_HOSTS", "*")]).await;
    let (status, _) = raw(&gw, "GET /healthz HTTP/1.1", &["Host: evil.example:8080"]).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn the_host_check_comes_before_auth() {
    let pair = KeyPair::generate(KeySize::Rsa2048).unwrap();
    let der = pair.public_key().as_der().unwrap();
    let pem = format!(
        "-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n",
        base64::engine::general_purpose::STANDARD.encode(der.as_ref())
    );
    // Loopback stays the address (and the default list) even though auth is on.
    let gw = gateway(&[("AGENT_AUTH_LOCAL_PUBLIC_KEY", &pem), ("SERVER_ADDRESS", "127.0.0.1")]).await;
    let (status, body) = raw(&gw, "GET /api/ap/agents HTTP/1.1", &["Host: evil.example"]).await;
    refused(status, &body, "evil.example");
    let (status, _) = raw(&gw, "GET /api/ap/agents HTTP/1.1", &["Host: localhost"]).await;
    assert_eq!(status, 401, "a good host reaches auth");
}
