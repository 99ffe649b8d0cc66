//! Request routing. Handlers return `Result<Response, ApiError>`; the error becomes the envelope.

mod ag_ui;
mod agents;
mod ai_sdk;
mod chats;
mod compact;
mod data;
mod events;
mod openai;
mod ops;
pub(crate) mod query;
pub(crate) mod runs;
pub(crate) mod submit;
mod viewport;

pub use query::read_body;

use std::collections::HashMap;

use http::{Method, Request, Response, header};
use http_body_util::BodyExt;

use crate::auth;
use crate::body::{BodyError, BoxBody, BoxError, RequestBody};
use crate::cors::{self, Cors};
use crate::envelope::ApiError;
use crate::state::AppState;

/// What a route handler produces: a response, or an error rendered as the envelope.
pub type HandlerResult = Result<Response<BoxBody>, ApiError>;

const ROUTES: [&str; 16] = [
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
    "/healthz",
    "/readyz",
    "/metrics",
];

/// Handles one request: the Host allow-list first (a rebinding page looks same-origin to CORS),
/// then CORS (preflights and foreign origins are answered there), then auth for `/api/ap/` paths
/// except `OPTIONS`, then the route; CORS headers go on whatever comes back.
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
    let cors = match state.settings.cors.check(&req) {
        Cors::Respond(resp) => return resp,
        Cors::Decorate(headers) => Some(headers),
        Cors::Skip => None,
    };
    let mcp = req.uri().path() == crate::mcp_server::PATH;
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
    let result = match (&method, path.as_str()) {
        (&Method::POST, "/api/ap/query") => query::query(state, req).await,
        (&Method::POST, "/api/ap/submit") => submit::submit(&state, req).await,
        (&Method::GET, "/api/ap/attach") => runs::attach(&state, &params, req.headers(), principal).await,
        (&Method::POST, "/api/ap/interrupt") => runs::interrupt(&state, req).await,
        (&Method::POST, "/api/ap/steer") => runs::steer(&state, req).await,
        (&Method::POST, "/api/ap/compact") => compact::compact(&state, req).await,
        (&Method::GET, "/v1/models") => openai::models(&state),
        (&Method::POST, p) if ai_sdk_chat(p).is_some() => {
            let key = ai_sdk_chat(p).unwrap_or_default().to_owned();
            ai_sdk::chat(&state, &key, req).await
        }
        (&Method::POST, p) if ag_ui_agent(p).is_some() => {
            let key = ag_ui_agent(p).unwrap_or_default().to_owned();
            ag_ui::run(&state, &key, req).await
        }
        (&Method::GET, p) if ai_sdk_resume(p).is_some() => {
            let (_, id) = ai_sdk_resume(p).unwrap_or_default();
            ai_sdk::resume(&state, id, principal)
        }
        (&Method::POST, "/v1/chat/completions") => openai::completions(&state, req).await,
        // Agents as MCP tools: rmcp's streamable HTTP transport answers every method itself.
        (_, crate::mcp_server::PATH) => Ok(crate::mcp_server::handle(&state, req).await),
        (&Method::GET, "/api/ap/agents") => agents::list(&state, &params),
        (&Method::GET, "/api/ap/agent") => agents::detail(&state, &params),
        (&Method::GET, "/api/ap/chats") => chats::list(&state, principal).await,
        (&Method::GET, "/api/ap/chat") => chats::detail(&state, &params, principal).await,
        (&Method::GET, "/api/ap/viewport") => viewport::get(&state, &params),
        (&Method::GET, "/healthz") => Ok(ops::healthz()),
        (&Method::GET, "/readyz") => Ok(ops::readyz(&state).await),
        (&Method::GET, "/metrics") => Ok(ops::metrics()),
        (&Method::GET, p) if p.starts_with("/api/ap/data/") => {
            let range = req.headers().get(header::RANGE).and_then(|v| v.to_str().ok()).map(str::to_string);
            data::serve(&state.settings.resources.data_dir, &p["/api/ap/data/".len()..], &params, range.as_deref())
                .await
        }
        (_, p) if ROUTES.contains(&p) || p.starts_with("/api/ap/data/") => Err(ApiError::method_not_allowed()),
        _ => Err(ApiError::not_found(format!("no route for {path}"))),
    };
    match result {
        Ok(resp) => resp,
        Err(err) => {
            tracing::info!(%method, %path, status = err.status.as_u16(), msg = %err.msg, "request rejected");
            err.into_response()
        }
    }
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

/// `/api/ai-sdk/{agentKey}/chat/{id}/stream` → (agent key, chat id).
fn ai_sdk_resume(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix("/api/ai-sdk/")?.strip_suffix("/stream")?;
    let (key, id) = rest.split_once("/chat/")?;
    (!key.is_empty() && !id.is_empty() && !key.contains('/') && !id.contains('/')).then_some((key, id))
}

/// Decoded query-string parameters (first value wins).
pub fn query_params<B>(req: &Request<B>) -> HashMap<String, String> {
    let mut out = HashMap::new();
    if let Some(q) = req.uri().query() {
        for (k, v) in form_urlencoded::parse(q.as_bytes()) {
            out.entry(k.into_owned()).or_insert_with(|| v.into_owned());
        }
    }
    out
}
