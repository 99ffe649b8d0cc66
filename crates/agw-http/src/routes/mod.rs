//! Request routing. Handlers return `Result<Response, ApiError>`; the error becomes the envelope.

mod agents;
mod ops;
mod query;

use std::collections::HashMap;

use http::{Method, Request, Response};
use hyper::body::Incoming;

use crate::body::BoxBody;
use crate::envelope::ApiError;
use crate::state::AppState;

pub type HandlerResult = Result<Response<BoxBody>, ApiError>;

/// Routes one request.
pub async fn handle(state: AppState, req: Request<Incoming>) -> Response<BoxBody> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let result = match (method.clone(), path.as_str()) {
        (Method::POST, "/api/ap/query") => query::query(state, req).await,
        (Method::GET, "/api/ap/agents") => agents::list(&state, &query_params(&req)),
        (Method::GET, "/api/ap/agent") => agents::detail(&state, &query_params(&req)),
        (Method::GET, "/healthz") => Ok(ops::healthz()),
        (Method::GET, "/readyz") => Ok(ops::readyz(&state)),
        (_, "/api/ap/query" | "/api/ap/agents" | "/api/ap/agent" | "/healthz" | "/readyz") => {
            Err(ApiError::method_not_allowed())
        }
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
