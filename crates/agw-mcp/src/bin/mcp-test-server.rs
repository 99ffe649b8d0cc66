//! A small real MCP server (rmcp) for agw-mcp's integration tests; not for other use.
//!
//! `mcp-test-server` serves over stdio. `mcp-test-server --http 127.0.0.1:0` serves streamable
//! HTTP and prints its URL (`http://127.0.0.1:<port>/mcp`) as the first stdout line;
//! `--require-token <t>` then answers 401 to requests without `Authorization: Bearer <t>`.
//!
//! Tools (listed 4 per page, so clients must follow `nextCursor`): `echo {text}`, `add {a, b}`
//! (structured result), `slow {ms}` (sleeps; counts cancellations), `cancelled_count`, `fail`
//! (`isError`), `image`, `mixed` (audio, embedded resource, resource link), `crash` (exits at
//! once), `add_tool {name}` (adds a tool and sends `tools/list_changed`), `env {name}`, and
//! `weird.name/with spaces`.

#![forbid(unsafe_code)]

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper_util::rt::TokioIo;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, JsonObject, ListToolsResult,
    PaginatedRequestParams, ResourceContents, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

const PAGE_SIZE: usize = 4;
/// A 1×1 PNG, base64.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

#[derive(Default)]
struct State {
    added: Mutex<Vec<String>>,
    cancelled: AtomicU64,
}

#[derive(Clone, Default)]
struct TestServer {
    state: Arc<State>,
}

fn schema(properties: Value, required: &[&str]) -> Arc<JsonObject> {
    let schema = json!({"type": "object", "properties": properties, "required": required});
    Arc::new(schema.as_object().cloned().unwrap_or_default())
}

impl TestServer {
    fn tools(&self) -> Vec<Tool> {
        let none = || schema(json!({}), &[]);
        let mut tools = vec![
            Tool::new("echo", "Echoes its text", schema(json!({"text": {"type": "string"}}), &["text"])),
            Tool::new(
                "add",
                "Adds two numbers",
                schema(json!({"a": {"type": "number"}, "b": {"type": "number"}}), &["a", "b"]),
            ),
            Tool::new("slow", "Sleeps for ms milliseconds", schema(json!({"ms": {"type": "integer"}}), &["ms"])),
            Tool::new("cancelled_count", "How many slow calls were cancelled", none()),
            Tool::new("fail", "Always fails", none()),
            Tool::new("image", "Returns a PNG image", none()),
            Tool::new("mixed", "Returns audio, a resource and a resource link", none()),
            Tool::new("crash", "Exits the server process at once", none()),
            Tool::new("add_tool", "Adds a tool", schema(json!({"name": {"type": "string"}}), &["name"])),
            Tool::new("env", "Reads an environment variable", schema(json!({"name": {"type": "string"}}), &["name"])),
            Tool::new("weird.name/with spaces", "A tool whose name needs sanitising", none()),
        ];
        let added = self.state.added.lock().unwrap_or_else(|e| e.into_inner()).clone();
        tools.extend(added.into_iter().map(|name| Tool::new(name, "Added at run time", none())));
        tools
    }
}

fn text(result: impl Into<String>) -> CallToolResponse {
    CallToolResult::success(vec![ContentBlock::text(result)]).into()
}

fn arg<'a>(args: &'a JsonObject, key: &str) -> Result<&'a Value, ErrorData> {
    args.get(key).ok_or_else(|| ErrorData::invalid_params(format!("missing argument `{key}`"), None))
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_tool_list_changed().build())
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self.tools();
        let start: usize = request.and_then(|r| r.cursor).and_then(|c| c.parse().ok()).unwrap_or(0);
        let end = (start + PAGE_SIZE).min(tools.len());
        let mut page = ListToolsResult::with_all_items(tools.get(start..end).unwrap_or_default().to_vec());
        if end < tools.len() {
            page.next_cursor = Some(end.to_string());
        }
        Ok(page)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        match request.name.as_ref() {
            "echo" => Ok(text(arg(&args, "text")?.as_str().unwrap_or_default())),
            "add" => {
                let number = |key| arg(&args, key).map(|v| v.as_f64().unwrap_or_default());
                Ok(CallToolResult::structured(json!({"sum": number("a")? + number("b")?})).into())
            }
            "slow" => {
                let ms = arg(&args, "ms")?.as_u64().unwrap_or_default();
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(ms)) => Ok(text(format!("slept {ms} ms"))),
                    _ = context.ct.cancelled() => {
                        self.state.cancelled.fetch_add(1, Ordering::SeqCst);
                        Ok(text("cancelled"))
                    }
                }
            }
            "cancelled_count" => Ok(text(self.state.cancelled.load(Ordering::SeqCst).to_string())),
            "fail" => Ok(CallToolResult::error(vec![ContentBlock::text("the fail tool always fails")]).into()),
            "image" => Ok(CallToolResult::success(vec![ContentBlock::image(PNG, "image/png")]).into()),
            "mixed" => Ok(CallToolResult::success(vec![
                ContentBlock::text("mixed"),
                ContentBlock::audio("UklGRg==", "audio/wav"),
                ContentBlock::resource(ResourceContents::text("hello resource", "file:///hello.txt")),
                ContentBlock::resource_link(rmcp::model::Resource::new("file:///linked.txt", "linked")),
            ])
            .into()),
            "crash" => std::process::exit(3),
            "add_tool" => {
                let name = arg(&args, "name")?.as_str().unwrap_or_default().to_owned();
                self.state.added.lock().unwrap_or_else(|e| e.into_inner()).push(name);
                context
                    .peer
                    .notify_tool_list_changed()
                    .await
                    .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
                Ok(text("added"))
            }
            "env" => {
                let name = arg(&args, "name")?.as_str().unwrap_or_default();
                Ok(CallToolResult::structured(json!({"name": name, "value": std::env::var(name).ok()})).into())
            }
            "weird.name/with spaces" => Ok(text("weird")),
            other if self.state.added.lock().unwrap_or_else(|e| e.into_inner()).iter().any(|n| n == other) => {
                Ok(text(format!("dynamic {other}")))
            }
            other => Err(ErrorData::invalid_params(format!("unknown tool `{other}`"), None)),
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value_of = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).cloned();
    let server = TestServer::default();
    match value_of("--http") {
        None => {
            server.serve(rmcp::transport::stdio()).await?.waiting().await?;
        }
        Some(addr) => serve_http(server, &addr, value_of("--require-token")).await?,
    }
    Ok(())
}

async fn serve_http(server: TestServer, addr: &str, token: Option<String>) -> Result<(), Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    println!("http://{}/mcp", listener.local_addr()?);
    let service: StreamableHttpService<TestServer, LocalSessionManager> =
        StreamableHttpService::new(move || Ok(server.clone()), Arc::default(), StreamableHttpServerConfig::default());
    let expected = token.map(|t| format!("Bearer {t}"));
    loop {
        let (stream, _) = listener.accept().await?;
        let service = service.clone();
        let expected = expected.clone();
        tokio::spawn(async move {
            let handler = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
                let service = service.clone();
                let expected = expected.clone();
                async move {
                    let presented = request.headers().get(hyper::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
                    if let Some(expected) = &expected
                        && presented != Some(expected.as_str())
                    {
                        let denied = hyper::Response::builder()
                            .status(401)
                            .header(hyper::header::WWW_AUTHENTICATE, "Bearer")
                            .body(Full::new(Bytes::from_static(b"unauthorized")).boxed())
                            .unwrap_or_default();
                        return Ok::<_, Infallible>(denied);
                    }
                    Ok(service.handle(request).await)
                }
            });
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), handler).await;
        });
    }
}
