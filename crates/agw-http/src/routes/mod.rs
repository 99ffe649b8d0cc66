//! Request routing. Handlers return `Result<Response, ApiError>`; the error becomes the envelope.

mod a2a;
mod ag_ui;
mod agents;
mod ai_sdk;
mod chats;
mod compact;
mod continuation;
mod data;
mod events;
mod files;
mod openai;
mod ops;
pub mod phase;
pub(crate) mod query;
pub(crate) mod runs;
pub(crate) mod submit;
mod viewport;

use std::collections::HashMap;

use http::{Method, Request, Response, header};
use http_body_util::BodyExt;

use crate::auth;
use crate::body::{BodyError, BoxBody, BoxError, RequestBody};
use crate::cors::{self, Cors};
use crate::envelope::ApiError;
use crate::state::AppState;

/// What a route handler produces: a response, or an error rendered as the envelope.
pub(crate) type HandlerResult = Result<Response<BoxBody>, ApiError>;

const ROUTES: [&str; 17] = [
    "/v1/models",
    "/v1/chat/completions",
    "/api/ap/query",
    "/api/ap/submit",
    "/api/ap/attach",
    "/api/ap/interrupt",
    "/api/ap/steer",
    "/api/ap/compact",
    "/api/ap/agents",
    "/api/ap/agent",
    "/api/ap/chats",
    "/api/ap/chat",
    "/api/ap/viewport",
    "/api/phase/attach",
    "/healthz",
    "/readyz",
    "/metrics",
];

/// Handles one request: the Host allow-list first (a rebinding page looks same-origin to CORS),
/// then the cross-site rule (a foreign page may not start or change anything, on any path:
/// docs/security.md, "At the door"), then CORS (preflights and foreign origins under its path patterns are
/// answered there), then auth for `/api/**`, `/v1/**`, `/mcp` and `/metrics` except `OPTIONS`,
/// then the route (a POST body's content type first: [`PostRoute`]); CORS headers go on whatever
/// comes back.
///
/// Generic over the request body so agw's routes can be mounted inside another hyper-based
/// server (axum, …) next to its own routes; see `examples/axum_mount.rs`.
pub fn handle<B>(state: AppState, req: Request<B>) -> impl Future<Output = Response<BoxBody>> + Send + 'static
where
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    // The caller's trace (W3C `traceparent`) is current while the request is handled, so a run
    // it starts continues that trace.
    let parent = crate::telemetry::remote_parent(req.headers());
    // Boxed here, outside the future, so the future's type does not depend on `B`.
    let fut = handle_boxed(state, req.map(|body| body.map_err(BodyError::new).boxed_unsync()));
    async move {
        match parent {
            Some(cx) => opentelemetry::context::FutureExt::with_context(fut, cx).await,
            None => fut.await,
        }
    }
}

async fn handle_boxed(state: AppState, mut req: Request<RequestBody>) -> Response<BoxBody> {
    if let Err(e) = state.settings.server.allowed_hosts.check(&req) {
        tracing::info!(method = %req.method(), path = %req.uri().path(), msg = %e.msg, "request refused");
        return e.into_response();
    }
    if let Err(e) = crate::cross_site::check(&state.settings.cors, &req) {
        let origin = req.headers().get(header::ORIGIN).and_then(|v| v.to_str().ok()).unwrap_or("-");
        tracing::info!(method = %req.method(), path = %req.uri().path(), origin, reason = %e, "cross-site request refused");
        return ApiError::from(e).into_response();
    }
    let cors = match state.settings.cors.check(&req) {
        Cors::Respond(resp) => return resp,
        Cors::Decorate(headers) => Some(headers),
        Cors::Skip => None,
    };
    let mcp = req.uri().path() == crate::mcp_server::PATH;
    let phase = req.uri().path() == PHASE_CHAT_PATH || req.uri().path().starts_with("/api/phase/");
    let mut resp = match &state.auth {
        Some(auth)
            if auth::protects(req.method(), req.uri().path())
                || crate::mcp_server::protects(req.method(), req.uri().path()) =>
        {
            match authenticate(auth, &state, req.headers()).await {
                Ok(principal) => {
                    req.extensions_mut().insert(principal);
                    route(state, req).await
                }
                Err(e) => {
                    tracing::info!(method = %req.method(), path = %req.uri().path(), reason = %e, "unauthorized");
                    e.into_response()
                }
            }
        }
        _ => route(state, req).await,
    };
    if let Some(headers) = cors {
        cors::decorate(&mut resp, headers);
        if mcp {
            // A browser MCP client must read the session id to send its next message.
            cors::expose(&mut resp, crate::mcp_server::SESSION_HEADER_NAME);
        }
        if phase {
            // A browser client interrupts or re-attaches with these.
            cors::expose(&mut resp, phase::RUN_ID_HEADER);
            cors::expose(&mut resp, phase::CHAT_ID_HEADER);
        }
    }
    resp
}

/// Verifies the request's token; an `Authorization` header longer than `server.max-token-bytes`
/// is refused before any decoding (a huge JWT header costs nothing but this length check).
async fn authenticate(
    auth: &auth::Authenticator,
    state: &AppState,
    headers: &http::HeaderMap,
) -> Result<auth::Principal, auth::AuthError> {
    let max = state.settings.server.limits.max_token_bytes;
    if headers.get(header::AUTHORIZATION).is_some_and(|v| v.len() > max) {
        return Err(auth::AuthError::TooLarge(max));
    }
    auth.authenticate(headers).await
}

/// Routes one request.
async fn route(state: AppState, req: Request<RequestBody>) -> Response<BoxBody> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let params = query_params(&req);
    // The verified caller (`None` without auth): chats and runs are checked against it.
    let principal = req.extensions().get::<auth::Principal>().cloned();
    let principal = principal.as_ref();
    let posted = if method == Method::POST { PostRoute::of(&path) } else { None };
    let result = match (&method, path.as_str()) {
        // Every POST goes through `PostRoute`, which checks the body's content type first: a
        // POST route must be added there, never as an arm of its own here.
        (&Method::POST, _) => match posted {
            // An A2A subscription is the one POST without a body (see `a2a::bodiless_post`).
            Some(route) if a2a::bodiless_post(&path) => route.serve(state, req).await,
            Some(route) => match require_json(req.headers()) {
                Ok(()) => route.serve(state, req).await,
                Err(e) => Err(e),
            },
            None => Err(unrouted(&path)),
        },
        (&Method::GET, "/api/ap/attach") => runs::attach(&state, &params, req.headers(), principal).await,
        (&Method::GET, "/api/phase/attach") => phase::attach(&state, &params, req.headers(), principal).await,
        (&Method::GET, "/v1/models") => openai::models(&state),
        (&Method::GET, a2a::CARD_PATH) => a2a::card(&state, None, req.headers()),
        (&Method::GET | &Method::DELETE, p) if a2a::rest_path(p).is_some() => a2a::rest(&state, req).await,
        (&Method::GET, p) if a2a::agent_card_path(p).is_some() => {
            a2a::card(&state, a2a::agent_card_path(p), req.headers())
        }
        (&Method::GET, p) if ai_sdk_resume(p).is_some() => {
            let (_, id) = ai_sdk_resume(p).unwrap_or_default();
            ai_sdk::resume(&state, id, principal)
        }
        // Agents as MCP tools: rmcp's streamable HTTP transport answers the other methods itself
        // (GET opens the server's stream, DELETE ends a session).
        (_, crate::mcp_server::PATH) => Ok(crate::mcp_server::handle(&state, req).await),
        (&Method::GET, "/api/ap/agents") => agents::list(&state, &params),
        (&Method::GET, "/api/ap/agent") => agents::detail(&state, &params),
        (&Method::GET, "/api/ap/chats") => chats::list(&state, principal).await,
        (&Method::GET, "/api/ap/chat") => chats::detail(&state, &params, principal).await,
        (&Method::DELETE, "/api/ap/chat") => chats::delete(&state, &params, principal).await,
        (&Method::GET, "/api/ap/viewport") => viewport::get(&state, &params),
        (&Method::GET, p) if state.settings.console_enabled && crate::console::is_console_path(p) => {
            crate::console::serve(p).ok_or_else(|| unrouted(p))
        }
        (&Method::GET, "/healthz") => Ok(ops::healthz()),
        (&Method::GET, "/readyz") => Ok(ops::readyz(&state).await),
        (&Method::GET, "/metrics") => Ok(ops::metrics()),
        (&Method::GET, p) if p.starts_with("/api/ap/data/") => {
            let range = req.headers().get(header::RANGE).and_then(|v| v.to_str().ok()).map(str::to_string);
            data::serve(&state.settings.resources.data_dir, &p["/api/ap/data/".len()..], &params, range.as_deref())
                .await
        }
        (_, p) => Err(unrouted(p)),
    };
    match result {
        Ok(resp) => resp,
        Err(err) => {
            tracing::info!(%method, %path, status = err.status.as_u16(), msg = %err.msg, "request rejected");
            err.into_response()
        }
    }
}

/// 405 on a known path, 404 elsewhere.
fn unrouted(path: &str) -> ApiError {
    if ROUTES.contains(&path)
        || path.starts_with("/api/ap/data/")
        || PostRoute::of(path).is_some()
        || a2a::agent_card_path(path).is_some()
        || a2a::rest_path(path).is_some()
    {
        ApiError::method_not_allowed()
    } else {
        ApiError::not_found(format!("no route for {path}"))
    }
}

/// The routes that take a body (every one a POST). One table: the router dispatches every POST
/// through it after the JSON content-type check, and `tests/cross_site.rs` attacks every entry, so a route
/// added here is covered by both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PostRoute {
    /// `POST /api/ap/query`.
    Query,
    /// `POST /api/ap/submit`.
    Submit,
    /// `POST /api/ap/interrupt`.
    Interrupt,
    /// `POST /api/ap/steer`.
    Steer,
    /// `POST /api/ap/compact`.
    Compact,
    /// `POST /api/ap/chat/fork`.
    ChatFork,
    /// `POST /api/ai-sdk/{agentKey}/chat`.
    AiSdkChat,
    /// `POST /api/ag-ui/{agentKey}`.
    AgUiRun,
    /// `POST /api/phase/{agentKey}` (the phase stream).
    PhaseRun,
    /// `POST /chat` (the phase stream of the default agent).
    PhaseChat,
    /// `POST /v1/chat/completions`.
    ChatCompletions,
    /// `POST /mcp` (MCP streamable HTTP: a JSON-RPC message).
    Mcp,
    /// `POST /a2a/{agentKey}` (A2A's JSON-RPC binding).
    A2a,
    /// `POST /a2a/{agentKey}/message:send` and the other POSTs of A2A's HTTP+JSON binding.
    A2aRest,
}

impl PostRoute {
    /// Every POST route.
    pub const ALL: [PostRoute; 14] = [
        Self::Query,
        Self::Submit,
        Self::Interrupt,
        Self::Steer,
        Self::Compact,
        Self::ChatFork,
        Self::AiSdkChat,
        Self::AgUiRun,
        Self::PhaseRun,
        Self::PhaseChat,
        Self::ChatCompletions,
        Self::Mcp,
        Self::A2a,
        Self::A2aRest,
    ];

    /// The route a POST to `path` reaches.
    pub fn of(path: &str) -> Option<Self> {
        Some(match path {
            "/api/ap/query" => Self::Query,
            "/api/ap/submit" => Self::Submit,
            "/api/ap/interrupt" => Self::Interrupt,
            "/api/ap/steer" => Self::Steer,
            "/api/ap/compact" => Self::Compact,
            "/api/ap/chat/fork" => Self::ChatFork,
            "/v1/chat/completions" => Self::ChatCompletions,
            PHASE_CHAT_PATH => Self::PhaseChat,
            crate::mcp_server::PATH => Self::Mcp,
            p if ai_sdk_chat(p).is_some() => Self::AiSdkChat,
            p if ag_ui_agent(p).is_some() => Self::AgUiRun,
            p if phase_agent(p).is_some() => Self::PhaseRun,
            p if a2a::agent_endpoint(p).is_some() => Self::A2a,
            p if a2a::rest_path(p).is_some() => Self::A2aRest,
            _ => return None,
        })
    }

    /// The path of this route, with `agent` where the path names an agent.
    pub fn path(self, agent: &str) -> String {
        match self {
            Self::Query => "/api/ap/query".into(),
            Self::Submit => "/api/ap/submit".into(),
            Self::Interrupt => "/api/ap/interrupt".into(),
            Self::Steer => "/api/ap/steer".into(),
            Self::Compact => "/api/ap/compact".into(),
            Self::ChatFork => "/api/ap/chat/fork".into(),
            Self::AiSdkChat => format!("/api/ai-sdk/{agent}/chat"),
            Self::AgUiRun => format!("/api/ag-ui/{agent}"),
            Self::PhaseRun => format!("/api/phase/{agent}"),
            Self::PhaseChat => PHASE_CHAT_PATH.into(),
            Self::ChatCompletions => "/v1/chat/completions".into(),
            Self::Mcp => crate::mcp_server::PATH.into(),
            Self::A2a => format!("{}{agent}", a2a::PREFIX),
            Self::A2aRest => format!("{}{agent}/message:send", a2a::PREFIX),
        }
    }

    async fn serve(self, state: AppState, req: Request<RequestBody>) -> HandlerResult {
        let path = req.uri().path().to_owned();
        match self {
            Self::Query => query::query(state, req).await,
            Self::Submit => submit::submit(&state, req).await,
            Self::Interrupt => runs::interrupt(&state, req).await,
            Self::Steer => runs::steer(&state, req).await,
            Self::Compact => compact::compact(&state, req).await,
            Self::ChatFork => chats::fork(&state, req).await,
            Self::AiSdkChat => ai_sdk::chat(&state, ai_sdk_chat(&path).unwrap_or_default(), req).await,
            Self::AgUiRun => ag_ui::run(&state, ag_ui_agent(&path).unwrap_or_default(), req).await,
            Self::PhaseRun => phase::run(&state, Some(phase_agent(&path).unwrap_or_default()), req).await,
            Self::PhaseChat => phase::run(&state, None, req).await,
            Self::ChatCompletions => openai::completions(&state, req).await,
            Self::Mcp => Ok(crate::mcp_server::handle(&state, req).await),
            Self::A2a => a2a::rpc(&state, a2a::agent_endpoint(&path).unwrap_or_default(), req).await,
            Self::A2aRest => a2a::rest(&state, req).await,
        }
    }
}

/// The string `code` of a 415.
pub(crate) const UNSUPPORTED_MEDIA_TYPE: &str = "unsupported_media_type";

/// `Ok` when the request declares one JSON body (`application/json`, parameters such as
/// `charset` allowed): what every POST route's protocol sends (the native API, the AI SDK, AG-UI,
/// the OpenAI API, MCP's streamable HTTP). Anything else is 415 before the body is read; the
/// types a web page may post without a preflight (`text/plain`, forms) never reach a handler.
pub(crate) fn require_json(headers: &http::HeaderMap) -> Result<(), ApiError> {
    let mut declared = headers.get_all(header::CONTENT_TYPE).iter();
    let (first, second) = (declared.next(), declared.next());
    let essence = first.filter(|_| second.is_none()).and_then(|v| v.to_str().ok()).map(|v| match v.split_once(';') {
        Some((essence, _)) => essence.trim(),
        None => v.trim(),
    });
    if essence.is_some_and(|e| e.eq_ignore_ascii_case("application/json")) {
        return Ok(());
    }
    let shown = match (first, second) {
        (None, _) => "none".to_owned(),
        (Some(_), Some(_)) => "several".to_owned(),
        (Some(v), None) => String::from_utf8_lossy(v.as_bytes()).chars().take(100).collect(),
    };
    Err(ApiError::with_fields(
        http::StatusCode::UNSUPPORTED_MEDIA_TYPE,
        format!("request body must be application/json (Content-Type: {shown})"),
        serde_json::json!({ "code": UNSUPPORTED_MEDIA_TYPE }),
    ))
}

/// `/api/ai-sdk/{agentKey}/chat` → the agent key.
fn ai_sdk_chat(path: &str) -> Option<&str> {
    let key = path.strip_prefix("/api/ai-sdk/")?.strip_suffix("/chat")?;
    (!key.is_empty() && !key.contains('/')).then_some(key)
}

/// `/api/ag-ui/{agentKey}` → the agent key.
fn ag_ui_agent(path: &str) -> Option<&str> {
    let key = path.strip_prefix("/api/ag-ui/")?;
    (!key.is_empty() && !key.contains('/')).then_some(key)
}

/// The phase stream of the default agent: the design document's own path.
pub const PHASE_CHAT_PATH: &str = "/chat";

/// `/api/phase/{agentKey}` → the agent key (`attach` is the GET route, never an agent).
fn phase_agent(path: &str) -> Option<&str> {
    let key = path.strip_prefix("/api/phase/")?;
    (!key.is_empty() && !key.contains('/') && key != "attach").then_some(key)
}

/// `/api/ai-sdk/{agentKey}/chat/{id}/stream` → (agent key, chat id).
fn ai_sdk_resume(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix("/api/ai-sdk/")?.strip_suffix("/stream")?;
    let (key, id) = rest.split_once("/chat/")?;
    (!key.is_empty() && !id.is_empty() && !key.contains('/') && !id.contains('/')).then_some((key, id))
}

/// Decoded query-string parameters (first value wins).
pub(crate) fn query_params<B>(req: &Request<B>) -> HashMap<String, String> {
    let mut out = HashMap::new();
    if let Some(q) = req.uri().query() {
        for (k, v) in form_urlencoded::parse(q.as_bytes()) {
            out.entry(k.into_owned()).or_insert_with(|| v.into_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_post_route_is_listed_and_found_by_its_path() {
        for route in PostRoute::ALL {
            // A new variant fails to compile here until it is given a place in `ALL`.
            let index = match route {
                PostRoute::Query => 0,
                PostRoute::Submit => 1,
                PostRoute::Interrupt => 2,
                PostRoute::Steer => 3,
                PostRoute::Compact => 4,
                PostRoute::ChatFork => 5,
                PostRoute::AiSdkChat => 6,
                PostRoute::AgUiRun => 7,
                PostRoute::PhaseRun => 8,
                PostRoute::PhaseChat => 9,
                PostRoute::ChatCompletions => 10,
                PostRoute::Mcp => 11,
                PostRoute::A2a => 12,
                PostRoute::A2aRest => 13,
            };
            assert_eq!(PostRoute::ALL[index], route);
            assert_eq!(PostRoute::of(&route.path("some-agent")), Some(route), "{route:?}");
        }
        for other in [
            "/api/ap/agents",
            "/api/ap/chat",
            "/api/ap/chat/fork/x",
            "/api/ai-sdk/a/chat/x/stream",
            "/api/ag-ui/a/b",
            "/api/phase/attach",
            "/api/phase/a/b",
            "/chat/x",
            "/v1/models",
            "/healthz",
        ] {
            assert_eq!(PostRoute::of(other), None, "{other}");
        }
    }

    #[test]
    fn a2a_endpoints_are_protected_and_their_cards_public() {
        assert_eq!(PostRoute::of("/a2a/helper"), Some(PostRoute::A2a));
        assert_eq!(PostRoute::of("/a2a/helper/.well-known/agent-card.json"), None);
        assert_eq!(PostRoute::of("/a2a/helper/tasks/t1:cancel"), Some(PostRoute::A2aRest));
        assert_eq!(PostRoute::of("/a2a/helper/elsewhere"), None);
        assert!(auth::protects(&Method::GET, "/a2a/helper/tasks/t1"));
        assert!(a2a::bodiless_post("/a2a/helper/tasks/t1:subscribe"));
        assert!(!a2a::bodiless_post("/a2a/helper/message:send"));
        assert!(auth::protects(&Method::POST, "/a2a/helper"));
        assert!(!auth::protects(&Method::GET, "/a2a/helper/.well-known/agent-card.json"));
        assert!(!auth::protects(&Method::GET, a2a::CARD_PATH));
    }

    #[test]
    fn the_phase_streams_chat_path_is_protected_by_auth() {
        assert!(auth::protects(&Method::POST, PHASE_CHAT_PATH));
        assert!(!auth::protects(&Method::OPTIONS, PHASE_CHAT_PATH));
    }

    #[test]
    fn only_json_bodies_are_taken() {
        let with = |values: &[&str]| {
            let mut headers = http::HeaderMap::new();
            for v in values {
                headers.append(header::CONTENT_TYPE, http::HeaderValue::from_str(v).unwrap());
            }
            require_json(&headers)
        };
        for ok in ["application/json", "application/json; charset=utf-8", "APPLICATION/JSON ;charset=UTF-8"] {
            assert_eq!(with(&[ok]), Ok(()), "{ok}");
        }
        for refused in [
            &[][..],
            &["text/plain"],
            &["text/plain;charset=UTF-8"],
            &["application/x-www-form-urlencoded"],
            &["multipart/form-data; boundary=x"],
            &["application/jsonx"],
            &["application/json", "text/plain"],
        ] {
            let e = with(refused).unwrap_err();
            assert_eq!(e.status, http::StatusCode::UNSUPPORTED_MEDIA_TYPE, "{refused:?}");
            assert_eq!(e.body.as_ref().unwrap()["code"], UNSUPPORTED_MEDIA_TYPE);
        }
        assert!(with(&["text/plain"]).unwrap_err().msg.ends_with("(Content-Type: text/plain)"));
    }
}
