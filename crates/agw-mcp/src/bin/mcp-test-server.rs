//! A small real MCP server (rmcp) for agw-mcp's integration tests; not for other use.
//!
//! `mcp-test-server` serves over stdio. `mcp-test-server --http 127.0.0.1:0` serves streamable
//! HTTP and prints its URL (`http://127.0.0.1:<port>/mcp`) as the first stdout line;
//! `--require-token <t>` then answers 401 to requests without `Authorization: Bearer <t>`.
//!
//! Tools (listed 4 per page, so clients must follow `nextCursor`): `echo {text}`, `add {a, b}`
//! (structured result), `slow {ms}` (sleeps; counts cancellations), `cancelled_count`, `fail`
//! (`isError`), `image`, `mixed` (audio, embedded resource, resource link), `crash` (exits at
//! once), `add_tool {name}` (adds a tool and sends `tools/list_changed`), `env {name}`,
//! `weird.name/with spaces`, and `list_count` (how many listings, i.e. `tools/list` requests
//! without a cursor, it has answered).
//!
//! Hostile modes, for the tests of agw's limits (any combination):
//! * `--tools <n>`: `n` more tools `gen_00000`, `gen_00001`, … after the others, each with a
//!   description of `--description-bytes <b>` bytes (default 16);
//! * `--page-size <n>`: tools per `tools/list` page (default 4);
//! * `--huge <b>`: two more tools, `huge_description` (a description of `b` bytes) and
//!   `huge_schema` (an input schema of about `b` bytes);
//! * `--colliding`: one more tool, `Echo`, whose name is `echo`'s after sanitising;
//! * `--flood-ms <ms>`: once the client is initialized, `notifications/tools/list_changed` every
//!   `ms` milliseconds until the connection ends;
//! * `--initialize-delay-ms <ms>`: answers `initialize` only after `ms` milliseconds;
//! * `--tally`: two more tools, `tally {ms}` and `tally_read {ms}` (annotated read-only): each
//!   call appends the tool's name to the file `MCP_TALLY_FILE` names, then sleeps (the crash
//!   recovery tests count how often a call ran).

#![forbid(unsafe_code)]

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper_util::rt::TokioIo;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, InitializeRequestParams, InitializeResult,
    JsonObject, ListToolsResult, PaginatedRequestParams, ResourceContents, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::{NotificationContext, RequestContext};
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
    listings: AtomicU64,
}

/// The hostile modes (module docs).
#[derive(Clone, Debug)]
struct Options {
    generated: usize,
    description_bytes: usize,
    page_size: usize,
    huge: Option<usize>,
    colliding: bool,
    flood: Option<Duration>,
    initialize_delay: Option<Duration>,
    tally: bool,
}

impl Options {
    fn parse(args: &[String]) -> Options {
        let value_of = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1));
        let number = |flag: &str| value_of(flag).and_then(|v| v.parse::<u64>().ok());
        let millis = |flag: &str| number(flag).map(Duration::from_millis);
        Options {
            generated: number("--tools").unwrap_or(0) as usize,
            description_bytes: number("--description-bytes").unwrap_or(16) as usize,
            page_size: number("--page-size").map_or(PAGE_SIZE, |n| n.max(1) as usize),
            huge: number("--huge").map(|n| n as usize),
            colliding: args.iter().any(|a| a == "--colliding"),
            flood: millis("--flood-ms"),
            initialize_delay: millis("--initialize-delay-ms"),
            tally: args.iter().any(|a| a == "--tally"),
        }
    }
}

#[derive(Clone)]
struct TestServer {
    state: Arc<State>,
    options: Arc<Options>,
}

fn schema(properties: Value, required: &[&str]) -> Arc<JsonObject> {
    let schema = json!({"type": "object", "properties": properties, "required": required});
    Arc::new(schema.as_object().cloned().unwrap_or_default())
}

impl TestServer {
    fn tools(&self) -> Vec<Tool> {
        let none = || schema(json!({}), &[]);
        let ms = || schema(json!({"ms": {"type": "integer"}}), &["ms"]);
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
            Tool::new("list_count", "How many listings (tools/list without a cursor) were answered", none()),
        ];
        if self.options.tally {
            tools.push(Tool::new("tally", "Counts the call, then sleeps for ms milliseconds", ms()));
            tools.push(
                Tool::new("tally_read", "Counts the call, then sleeps; read-only", ms())
                    .annotate(ToolAnnotations::new().read_only(true)),
            );
        }
        let added = self.state.added.lock().unwrap_or_else(|e| e.into_inner()).clone();
        tools.extend(added.into_iter().map(|name| Tool::new(name, "Added at run time", none())));
        if let Some(bytes) = self.options.huge {
            tools.push(Tool::new("huge_description", "d".repeat(bytes), none()));
            let padding = json!({"padding": {"type": "string", "description": "s".repeat(bytes)}});
            tools.push(Tool::new("huge_schema", "A tool with a huge input schema", schema(padding, &[])));
        }
        if self.options.colliding {
            tools.push(Tool::new("Echo", "Collides with echo after sanitising", none()));
        }
        tools
    }

    /// The `index`th of the `--tools` tools.
    fn generated(&self, index: usize) -> Tool {
        let description = "g".repeat(self.options.description_bytes);
        Tool::new(format!("gen_{index:05}"), description, schema(json!({}), &[]))
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

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        if let Some(delay) = self.options.initialize_delay {
            tokio::time::sleep(delay).await;
        }
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let Some(every) = self.options.flood else { return };
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                if context.peer.notify_tool_list_changed().await.is_err() {
                    break;
                }
            }
        });
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let cursor = request.and_then(|r| r.cursor);
        if cursor.is_none() {
            self.state.listings.fetch_add(1, Ordering::SeqCst);
        }
        let start: usize = cursor.and_then(|c| c.parse().ok()).unwrap_or(0);
        let tools = self.tools();
        let total = tools.len() + self.options.generated;
        let end = (start + self.options.page_size).min(total);
        // Only this page's generated tools are made: a server of 10,000 tools stays cheap.
        let page_tools: Vec<Tool> =
            (start..end).map(|i| tools.get(i).cloned().unwrap_or_else(|| self.generated(i - tools.len()))).collect();
        let mut page = ListToolsResult::with_all_items(page_tools);
        if end < total {
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
            // Each call is counted before it sleeps: a line with the tool's name in the file
            // `MCP_TALLY_FILE` names (crash recovery tests count how often a call ran).
            "tally" | "tally_read" => {
                if let Ok(path) = std::env::var("MCP_TALLY_FILE") {
                    use std::io::Write;
                    let mut file = std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(path)
                        .map_err(|e| ErrorData::internal_error(format!("tally file: {e}"), None))?;
                    // One write per line: calls running at once append whole lines.
                    let _ = file.write_all(format!("{}\n", request.name).as_bytes());
                }
                let ms = arg(&args, "ms")?.as_u64().unwrap_or_default();
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Ok(text(format!("{} done", request.name)))
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
            "list_count" => Ok(text(self.state.listings.load(Ordering::SeqCst).to_string())),
            "Echo" => Ok(text("the colliding twin")),
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
    let server = TestServer { state: Arc::default(), options: Arc::new(Options::parse(&args)) };
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
