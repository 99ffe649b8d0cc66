//! Operations endpoints (outside `/api/ap`, never behind auth).

use http::StatusCode;
use serde_json::json;

use crate::body::BoxBody;
use crate::envelope::json_response;
use crate::state::AppState;

/// Liveness: the process answers.
pub fn healthz() -> http::Response<BoxBody> {
    json_response(StatusCode::OK, &json!({"status": "ok"}))
}

/// Readiness: catalogs are loaded (the agent catalog may legitimately be empty, but it exists).
pub fn readyz(state: &AppState) -> http::Response<BoxBody> {
    let agents = state.agents.load();
    json_response(StatusCode::OK, &json!({"status": "ready", "agents": agents.len()}))
}

/// Prometheus text exposition of every metric.
pub fn metrics() -> http::Response<BoxBody> {
    let mut resp = http::Response::new(crate::body::full(crate::metrics::render()));
    resp.headers_mut()
        .insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
    resp
}
