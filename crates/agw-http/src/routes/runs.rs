//! The run lifecycle endpoints (`docs/run-lifecycle.md`): `GET /api/ap/attach` (resume or join a
//! run's stream), `POST /api/ap/interrupt` (cancel it) and `POST /api/ap/steer` (queue a user
//! message for its next model turn). Names and shapes follow the
//! reference's successor protocol (`docs/contract/successor-protocol.md`).
//!
//! With auth on, another user's run is indistinguishable from an absent one (404).

use std::collections::HashMap;
use std::time::Duration;

use http::{Request, StatusCode};
use serde::Deserialize;
use serde_json::json;

use super::HandlerResult;
use super::query::{read_body, sse_response};
use crate::auth::Principal;
use crate::body::RequestBody;
use crate::cluster::{self, Located};
use crate::envelope::{ApiError, success};
use crate::runs::{AttachError, CancelReason, RunHandle, RunStatus};
use crate::state::AppState;
use agw_cluster::ControlKind;
use agw_modes::runtime::{Steer, SteerRefused};

/// How long `interrupt` waits for the run to end before answering `cancelling`. The run stops
/// within milliseconds wherever it is; the wait lets the answer say `cancelled` for sure.
const INTERRUPT_WAIT: Duration = Duration::from_secs(2);

/// Where the run is for this caller ([`cluster::find_run`]); 400 for a blank id.
async fn find(state: &AppState, run_id: &str, principal: Option<&Principal>) -> Result<Located, ApiError> {
    if run_id.trim().is_empty() {
        return Err(ApiError::bad_request("runId is required"));
    }
    cluster::find_run(state, run_id, principal).await
}

/// 404 `run not found` (also for another owner's run: it does not exist for this caller).
fn not_found(run_id: &str) -> ApiError {
    ApiError::not_found(format!("run not found: {}", run_id.trim()))
}

/// `GET /api/ap/attach?runId=…&lastSeq=N`: every buffered event with `seq > N`, then live, ending
/// after the terminal event. `lastSeq` wins over a `Last-Event-ID` header; with neither, the
/// stream starts at the oldest event still held (a client that saw nothing wants what there is).
/// A run held by another replica is followed through the cluster (`crate::cluster`).
pub async fn attach(
    state: &AppState,
    params: &HashMap<String, String>,
    headers: &http::HeaderMap,
    principal: Option<&Principal>,
) -> HandlerResult {
    let run_id = params.get("runId").map(String::as_str).unwrap_or("");
    let header = headers.get("last-event-id").and_then(|v| v.to_str().ok());
    let requested = match (params.get("lastSeq"), header) {
        (Some(explicit), _) => Some(parse_seq("lastSeq", explicit)?),
        (None, Some(header)) => Some(parse_seq("Last-Event-ID", header)?),
        (None, None) => None,
    };
    let handle = match find(state, run_id, principal).await? {
        Located::Here(handle) => handle,
        Located::Nowhere => return Err(not_found(run_id)),
        Located::Elsewhere(remote) | Located::Orphaned(remote) | Located::Ended(remote) => {
            return attach_remote(state, remote, requested).await;
        }
    };
    let last_seq = requested.unwrap_or_else(|| handle.oldest_seq().saturating_sub(1));
    let latest = handle.latest_seq();
    if last_seq > latest && handle.status().is_finished() {
        return Err(ApiError::bad_request(format!("lastSeq {last_seq} is after the run's last event ({latest})")));
    }
    match handle.observe(last_seq) {
        Ok(observer) => {
            tracing::info!(runId = %handle.run_id, last_seq, status = handle.status().as_str(), "attached");
            Ok(sse_response(observer, state.settings.server.heartbeat_interval))
        }
        Err(AttachError::Expired { oldest, latest }) => Err(seq_expired(&handle.run_id, last_seq, oldest, latest)),
        Err(AttachError::TooManyObservers(max)) => Err(ApiError::with_fields(
            StatusCode::TOO_MANY_REQUESTS,
            format!("the run already has {max} observers"),
            json!({"code": "too_many_observers", "runId": handle.run_id}),
        )),
    }
}

fn seq_expired(run_id: &str, last_seq: u64, oldest: u64, latest: u64) -> ApiError {
    ApiError::conflict(
        format!("events after {last_seq} are no longer buffered; the oldest held is {oldest}"),
        json!({"code": "seq_expired", "runId": run_id, "oldestSeq": oldest, "latestSeq": latest, "lastSeq": last_seq}),
    )
}

/// Attach to a run another replica holds: its frames from the run's stream in Redis.
async fn attach_remote(state: &AppState, remote: cluster::Remote, requested: Option<u64>) -> HandlerResult {
    let run_id = remote.record.run_id.clone();
    let (oldest, latest) = cluster::stream_bounds(state, &run_id).await?;
    let last_seq = requested.unwrap_or(oldest.saturating_sub(1));
    if last_seq > latest && remote.finished() {
        return Err(ApiError::bad_request(format!("lastSeq {last_seq} is after the run's last event ({latest})")));
    }
    if last_seq < latest && last_seq + 1 < oldest {
        return Err(seq_expired(&run_id, last_seq, oldest, latest));
    }
    tracing::info!(runId = %run_id, last_seq, node = %remote.record.node_id, status = %remote.record.status, "attached to a run of another replica");
    let frames = cluster::follow(state, remote, last_seq);
    Ok(super::query::sse_stream_response(frames, state.settings.server.heartbeat_interval))
}

fn parse_seq(name: &str, raw: &str) -> Result<u64, ApiError> {
    raw.trim().parse().map_err(|_| ApiError::bad_request(format!("{name} must be a whole number, got {raw:?}")))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct InterruptRequest {
    run_id: String,
}

/// `POST /api/ap/interrupt {"runId"}`: cancels a running run. A finished run is not an error:
/// `accepted:false` and `status` says how it had ended.
pub async fn interrupt(state: &AppState, req: Request<RequestBody>) -> HandlerResult {
    let principal = req.extensions().get::<Principal>().cloned();
    let server = &state.settings.server;
    let body = read_body(req, server.max_request_bytes, server.limits.body_read_timeout).await?;
    let request: InterruptRequest =
        serde_json::from_slice(&body).map_err(|e| ApiError::bad_request(format!("invalid interrupt body: {e}")))?;
    let handle = match find(state, &request.run_id, principal.as_ref()).await? {
        Located::Here(handle) => handle,
        Located::Nowhere => return Err(not_found(&request.run_id)),
        Located::Orphaned(remote) => cluster::adopt(state, &remote).await?,
        Located::Ended(remote) => {
            let status = remote.status().to_owned();
            return Ok(success(&json!({
                "accepted": false,
                "status": status,
                "runId": remote.record.run_id,
                "detail": format!("the run had already finished ({status})"),
            })));
        }
        Located::Elsewhere(remote) => {
            let body = json!({"runId": remote.record.run_id});
            return match cluster::forward(state, &remote, ControlKind::Interrupt, body, principal.as_ref()).await? {
                cluster::Forwarded::Answer(data) => Ok(success(&data)),
                cluster::Forwarded::Refused(error) => Err(error),
            };
        }
    };
    Ok(success(&interrupt_handle(&handle).await))
}

/// Cancels a run this replica holds; the answer's `data`.
pub(crate) async fn interrupt_handle(handle: &RunHandle) -> serde_json::Value {
    let run_id = handle.run_id.clone();
    if !handle.cancel(CancelReason::Interrupted) {
        let status = handle.status();
        return json!({
            "accepted": false,
            "status": status.as_str(),
            "runId": run_id,
            "detail": format!("the run had already finished ({})", status.as_str()),
        });
    }
    let status = handle.wait_finished(INTERRUPT_WAIT).await;
    let (status, detail) = match status {
        RunStatus::Running => ("cancelling", "cancel requested; the run is still stopping"),
        RunStatus::Cancelled => ("cancelled", "the run was cancelled"),
        // It ended on its own between the request and the cancellation.
        other => (other.as_str(), "the run finished before it could be cancelled"),
    };
    tracing::info!(runId = %run_id, status, "interrupt");
    json!({"accepted": true, "status": status, "runId": run_id, "detail": detail})
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SteerRequest {
    run_id: String,
    message: String,
    #[serde(default)]
    steer_id: Option<String>,
    #[serde(default)]
    request_id: Option<String>,
}

/// `POST /api/ap/steer {"runId","message"}`: queues a user message the run takes at its next
/// model-turn boundary (never mid-tool). 409 `run_finished` for a run that ended (or is ending:
/// its queue closes before its terminal event); 429 `steer_queue_full` past the queue's bound.
pub async fn steer(state: &AppState, req: Request<RequestBody>) -> HandlerResult {
    let principal = req.extensions().get::<Principal>().cloned();
    let server = &state.settings.server;
    let body = read_body(req, server.max_request_bytes, server.limits.body_read_timeout).await?;
    steer_local(state, &body, principal.as_ref()).await.map(|data| success(&data))
}

/// Steer with the request's body; the answer's `data`. A run another replica holds gets the
/// steer forwarded (a lost one has finished).
pub(crate) async fn steer_local(
    state: &AppState,
    body: &[u8],
    principal: Option<&Principal>,
) -> Result<serde_json::Value, ApiError> {
    let request: SteerRequest =
        serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("invalid steer body: {e}")))?;
    if request.message.trim().is_empty() {
        return Err(ApiError::bad_request("message must not be blank"));
    }
    let handle = match find(state, &request.run_id, principal).await? {
        Located::Here(handle) => handle,
        Located::Nowhere => return Err(not_found(&request.run_id)),
        // A run waiting on a replica that is gone takes no steer: only an answer adopts it.
        Located::Ended(remote) | Located::Orphaned(remote) => {
            let (run_id, status) = (&remote.record.run_id, remote.status());
            return Err(ApiError::conflict(
                format!("run {run_id} has finished ({status}); it takes no more messages"),
                json!({"code": "run_finished", "runId": run_id, "status": status}),
            ));
        }
        Located::Elsewhere(remote) => {
            let body: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
            return match cluster::forward(state, &remote, ControlKind::Steer, body, principal).await? {
                cluster::Forwarded::Answer(data) => Ok(data),
                cluster::Forwarded::Refused(error) => Err(error),
            };
        }
    };
    let run_id = handle.run_id.clone();
    let finished = || {
        ApiError::conflict(
            format!("run {run_id} has finished ({}); it takes no more messages", handle.status().as_str()),
            json!({"code": "run_finished", "runId": run_id, "status": handle.status().as_str()}),
        )
    };
    if handle.status().is_finished() {
        return Err(finished());
    }
    let steer_id = request
        .steer_id
        .map(|id| id.trim().to_string())
        .filter(|id| !id.is_empty())
        .unwrap_or_else(|| format!("steer_{}", uuid_simple()));
    let steer = Steer {
        steer_id: steer_id.clone(),
        message: request.message,
        request_id: request.request_id.filter(|r| !r.trim().is_empty()),
    };
    match handle.steers.push(steer) {
        Ok(()) => {
            tracing::info!(runId = %run_id, %steer_id, "steer queued");
            Ok(json!({
                "accepted": true,
                "status": "queued",
                "runId": run_id,
                "steerId": steer_id,
                "detail": "queued for the run's next model turn",
            }))
        }
        Err(SteerRefused::Closed(_)) => Err(finished()),
        Err(SteerRefused::Full { capacity, .. }) => Err(ApiError::with_fields(
            StatusCode::TOO_MANY_REQUESTS,
            format!("run {run_id} already holds {capacity} steers it has not taken yet"),
            json!({"code": "steer_queue_full", "runId": run_id}),
        )),
    }
}

/// A random id for a steer that came without one.
fn uuid_simple() -> String {
    agw_protocol::ids::new_run_id().replace('-', "")[..16].to_string()
}
