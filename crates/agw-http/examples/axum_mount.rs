//! Mount agw's routes inside your own axum app, next to your own routes.
//!
//! ```sh
//! cargo run -p agw-http --example axum_mount            # serves, asks itself one question, exits
//! cargo run -p agw-http --example axum_mount -- --serve # keeps serving on 127.0.0.1:8081
//! curl -N http://127.0.0.1:8081/api/ap/query -H 'Content-Type: application/json' \
//!   -d '{"agentKey":"demoModePlain","message":"hi"}'
//! ```
//!
//! agw's handler ([`agw_http::routes::handle`]) takes any `http::Request` whose body is an
//! `http_body::Body` of `Bytes`, so axum's `Body` works as is; its responses — including the
//! live SSE stream, written frame by frame — are plain `http::Response`s. Settings are built in
//! code (`Settings::builder()`, the same names and checks as agw's config file; no environment is
//! read): the bundled demo agents on the offline demo model, chat history in a temp directory.
//! [`agw_http::Gateway`] starts agw without listening; the host's own shutdown signal stops axum,
//! then `Gateway::shutdown` drains agw's runs and stops what it started.

use std::convert::Infallible;

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use http::Request;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let serve_forever = std::env::args().any(|a| a == "--serve");
    let chats = std::env::temp_dir().join(format!("agw-axum-example-{}", std::process::id()));
    let settings = agw_http::Settings::builder()
        .set("memory.chat.dir", chats.display().to_string())
        .set("server.shutdown-grace-ms", "5000")
        .build()?;
    // Everything agw needs before its first request: catalogs, chat store, run service.
    let gateway = agw_http::Gateway::start(settings).await?;
    let state = gateway.state().clone();

    // agw as a tower service: every request goes through agw's CORS, auth and routing.
    let agw = tower::service_fn(move |req: Request<Body>| {
        let state = state.clone();
        async move { Ok::<_, Infallible>(agw_http::routes::handle(state, req).await) }
    });
    let app = Router::new()
        .route("/hello", get(|| async { "your own route" }))
        .route_service("/api/ap/query", agw.clone())
        .route_service("/api/ap/agents", agw);

    let addr = if serve_forever { "127.0.0.1:8081" } else { "127.0.0.1:0" };
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    println!("listening on http://{addr}");
    // The host's own shutdown signal (Ctrl-C here): axum stops accepting, then agw's runs get
    // the grace period to finish and the rest end with run.error, their history written.
    let server = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async { tokio::signal::ctrl_c().await.ok().unwrap_or(()) })
            .await
    });
    if serve_forever {
        server.await??;
        gateway.shutdown().await;
        return Ok(());
    }

    // Ask the demo agent one question through the mounted route and print the SSE stream.
    let body = r#"{"agentKey":"demoModePlain","message":"What can you do?"}"#;
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let request = format!(
        "POST /api/ap/query HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    println!("{response}");
    assert!(response.starts_with("HTTP/1.1 200"), "agw answered through axum");
    assert!(response.contains("\"type\":\"run.complete\""), "the run streamed to its end");
    server.abort();
    gateway.shutdown().await;
    let _ = std::fs::remove_dir_all(&chats);
    Ok(())
}
