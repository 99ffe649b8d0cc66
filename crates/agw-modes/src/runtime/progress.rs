//! Text a tool streams while it runs, forwarded to the run's sink as it arrives: a backend call's
//! `tool.progress`, a remote sub-agent's answer in its child's lane.

use std::future::Future;

use agw_protocol::AgentDelta;
use futures::StreamExt;
use futures::channel::mpsc::UnboundedReceiver;

use super::DeltaSink;
use super::sink::EmitError;

/// Runs `work` to its end, emitting each text that arrives on `texts` meanwhile as `delta(text)`
/// — one delta per text, at once. An emit that waits (a slow client) holds `work` back too.
pub(super) async fn forward<S: DeltaSink, T>(
    work: impl Future<Output = T>,
    mut texts: UnboundedReceiver<String>,
    sink: &mut S,
    delta: impl Fn(String) -> AgentDelta,
) -> Result<T, EmitError> {
    tokio::pin!(work);
    let output = loop {
        tokio::select! {
            biased;
            Some(text) = texts.next() => sink.emit(delta(text)).await?,
            output = &mut work => break output,
        }
    };
    // What the work sent just before it ended.
    while let Ok(text) = texts.try_recv() {
        sink.emit(delta(text)).await?;
    }
    Ok(output)
}
