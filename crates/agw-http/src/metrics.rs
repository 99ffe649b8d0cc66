//! Prometheus metrics (`GET /metrics`; with auth on it needs a verified token, like `/api/**`).
//!
//! Crates record through the `metrics` facade (agw-llm: provider latency to first token;
//! agw-modes: tool durations; agw-runs: runs and streamed events). The server installs one
//! Prometheus recorder per process and renders its text format on request.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Recorded by agw-runs: chats the retention sweep deleted (`agw.memory.retention`).
pub use agw_runs::CHATS_EXPIRED;
/// Recorded by agw-runs: runs in flight (gauge), finished runs by `outcome` (completed, failed,
/// cancelled, disconnected) and error `code`, events streamed.
pub use agw_runs::{EVENTS_STREAMED, RUNS_ACTIVE, RUNS_TOTAL};
/// Recorded by agw-llm.
pub const PROVIDER_FIRST_TOKEN: &str = "agw_provider_first_token_seconds";
/// Recorded by agw-modes.
pub const TOOL_DURATION: &str = "agw_tool_duration_seconds";
/// Recorded by agw-modes.
pub const MODEL_CALL_DURATION: &str = agw_modes::runtime::MODEL_CALL_DURATION_METRIC;
/// Recorded by agw-modes.
pub const TOKENS: &str = agw_modes::runtime::TOKENS_METRIC;
/// Recorded by agw-modes.
pub const COST: &str = agw_modes::runtime::COST_METRIC;
/// Recorded by agw-modes: citations streamed, by `agent` (issue 35).
pub const CITATIONS: &str = agw_modes::runtime::CITATIONS_METRIC;
/// Recorded by agw-modes: markers naming an id no tool returned, removed from the text.
pub const UNKNOWN_CITATIONS: &str = agw_modes::runtime::UNKNOWN_CITATIONS_METRIC;

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the process-wide recorder (once; later calls reuse it). `None` when another
/// recorder was installed first (an embedder's own), in which case `/metrics` is empty.
pub fn install() -> Option<&'static PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let buckets = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];
            let builder =
                PrometheusBuilder::new().set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &buckets).ok()?;
            let recorder = builder.build_recorder();
            let handle = recorder.handle();
            match metrics::set_global_recorder(recorder) {
                Ok(()) => {
                    describe();
                    Some(handle)
                }
                Err(_) => {
                    tracing::warn!("a metrics recorder was already installed; /metrics stays empty");
                    None
                }
            }
        })
        .as_ref()
}

fn describe() {
    metrics::describe_gauge!(RUNS_ACTIVE, "runs currently streaming");
    metrics::describe_counter!(RUNS_TOTAL, "finished runs by outcome (completed, failed, disconnected) and error code");
    metrics::describe_counter!(EVENTS_STREAMED, "SSE events written to clients");
    metrics::describe_counter!(CHATS_EXPIRED, "chats deleted by the retention sweep (agw.memory.retention)");
    metrics::describe_histogram!(
        PROVIDER_FIRST_TOKEN,
        metrics::Unit::Seconds,
        "provider latency from request to first chunk"
    );
    metrics::describe_histogram!(TOOL_DURATION, metrics::Unit::Seconds, "backend tool execution time");
    metrics::describe_counter!(CITATIONS, "citations streamed, by agent");
    metrics::describe_counter!(UNKNOWN_CITATIONS, "citation markers naming an id no tool returned (removed), by agent");
    metrics::describe_histogram!(
        MODEL_CALL_DURATION,
        metrics::Unit::Seconds,
        "model call duration, request to last chunk, by provider, model and outcome"
    );
    metrics::describe_counter!(
        TOKENS,
        "tokens by agent, provider, model and kind (input, output, cached_input, cache_write_input, reasoning)"
    );
    metrics::describe_counter!(
        COST,
        "cost in millionths of the currency by agent, provider, model and currency (priced models only)"
    );
}

/// The Prometheus text exposition of every metric.
pub fn render() -> String {
    install().map(PrometheusHandle::render).unwrap_or_default()
}
