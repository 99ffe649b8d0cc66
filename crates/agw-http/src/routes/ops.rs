//! Operations endpoints (outside `/api/ap`): the probes, never behind auth, and `/metrics`, behind
//! auth when it is on (`auth::protects`).

use http::StatusCode;
use serde_json::json;

use crate::body::BoxBody;
use crate::envelope::json_response;
use crate::state::AppState;

/// Liveness: the process answers.
pub fn healthz() -> http::Response<BoxBody> {
    json_response(StatusCode::OK, &json!({"status": "ok"}))
}

/// Readiness: catalogs are loaded (the agent catalog may legitimately be empty, but it exists),
/// and the shared state this replica needs answers — the chat store (its directory, or
/// PostgreSQL) when memory is on, Redis when the replica is in a cluster. 503 names what fails.
pub async fn readyz(state: &AppState) -> http::Response<BoxBody> {
    let agents = state.catalogs().agents.load().len();
    let mut failing = serde_json::Map::new();
    if state.settings.memory.enabled {
        let store = state.runs.chat_store().clone();
        let backend = store.backend_name();
        let ping = tokio::time::timeout(PING_TIMEOUT, tokio::task::spawn_blocking(move || store.ping())).await;
        let problem = match ping {
            Ok(Ok(Ok(()))) => None,
            Ok(Ok(Err(e))) => Some(e.to_string()),
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some(format!("no answer within {} ms", PING_TIMEOUT.as_millis())),
        };
        if let Some(problem) = problem {
            failing.insert(format!("chats ({backend})"), problem.into());
        }
    }
    if state.settings.cluster.redis.is_some() {
        let problem = match state.runs.node() {
            None => Some("not joined".to_owned()),
            Some(node) => match tokio::time::timeout(PING_TIMEOUT, node.cluster.ping()).await {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e.to_string()),
                Err(_) => Some(format!("no answer within {} ms", PING_TIMEOUT.as_millis())),
            },
        };
        if let Some(problem) = problem {
            failing.insert("redis".into(), problem.into());
        }
    }
    if failing.is_empty() {
        return json_response(StatusCode::OK, &json!({"status": "ready", "agents": agents}));
    }
    tracing::warn!(failing = %serde_json::Value::Object(failing.clone()), "not ready");
    json_response(
        StatusCode::SERVICE_UNAVAILABLE,
        &json!({"status": "unavailable", "agents": agents, "failing": failing}),
    )
}

/// How long readiness waits for each dependency.
const PING_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// Prometheus text exposition of every metric.
pub fn metrics() -> http::Response<BoxBody> {
    let mut resp = http::Response::new(crate::body::full(crate::metrics::render()));
    resp.headers_mut()
        .insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
    resp
}
