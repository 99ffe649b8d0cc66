//! Where a running mode sends its semantic deltas.

use std::future::Future;

use agw_protocol::AgentDelta;

/// Why a sink refused a delta. Either way the run must stop.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EmitError {
    /// The consumer is gone (client disconnected): stop quietly, drop upstream requests.
    #[error("the run's consumer went away")]
    Closed,
    /// The delta broke the event protocol (a bug in a mode): end the run with `run.error`.
    #[error("protocol violation: {0}")]
    Protocol(String),
    /// The run's history could not be written (disk full, read-only, …): end with `run.error`.
    #[error("{0}")]
    Storage(String),
}

/// The consumer of a run's [`AgentDelta`]s: the HTTP layer's SSE sink (assembler + framing),
/// a test collector, or an embedder's own sink. `emit` may wait (backpressure from a slow client
/// travels back to the provider stream instead of piling up in memory).
pub trait DeltaSink: Send {
    /// Delivers one delta; an error ends the run.
    fn emit(&mut self, delta: AgentDelta) -> impl Future<Output = Result<(), EmitError>> + Send;
}

/// A sink that keeps every delta; for tests and embedders that post-process a whole run.
#[derive(Debug, Default)]
pub struct CollectingSink {
    /// Every delta emitted, in order.
    pub deltas: Vec<AgentDelta>,
}

impl DeltaSink for CollectingSink {
    async fn emit(&mut self, delta: AgentDelta) -> Result<(), EmitError> {
        self.deltas.push(delta);
        Ok(())
    }
}
