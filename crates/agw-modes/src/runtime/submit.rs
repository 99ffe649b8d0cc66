//! Human-in-the-loop: frontend tool calls waiting for `POST /api/ap/submit`.

use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;
use serde_json::Value;
use tokio::sync::oneshot;

/// How a submit was received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubmitStatus {
    /// A waiting frontend tool took the params.
    Accepted,
    /// Nothing is waiting under that key (never was, or timed out).
    Unmatched,
    /// The call was already answered by an earlier submit (a second answer is not taken).
    AlreadyAnswered,
}

/// The waiters of every run in this process, keyed `trim(runId)#trim(toolId)`.
///
/// A waiter is registered when the call's `tool.start` is streamed — before the client can know
/// the tool id — so a submit that arrives before the run actually starts waiting is still matched:
/// the params sit in the waiter's channel until the tool runs.
#[derive(Debug, Default)]
pub struct FrontendSubmits {
    waiters: DashMap<String, oneshot::Sender<Value>>,
    /// Keys answered so far, by run, until the run ends ([`Self::forget_run`]).
    answered: DashMap<String, std::collections::HashSet<String>>,
}

fn key(run_id: &str, tool_id: &str) -> String {
    format!("{}#{}", run_id.trim(), tool_id.trim())
}

/// The receiving side of one registered waiter. Dropping it unregisters the key.
pub struct PendingSubmit {
    submits: Arc<FrontendSubmits>,
    key: String,
    rx: Option<oneshot::Receiver<Value>>,
}

impl FrontendSubmits {
    /// Registers a waiter; `None` when one already exists for this key.
    pub fn register(self: &Arc<Self>, run_id: &str, tool_id: &str) -> Option<PendingSubmit> {
        let key = key(run_id, tool_id);
        let (tx, rx) = oneshot::channel();
        match self.waiters.entry(key.clone()) {
            dashmap::mapref::entry::Entry::Occupied(_) => None,
            dashmap::mapref::entry::Entry::Vacant(v) => {
                v.insert(tx);
                Some(PendingSubmit { submits: Arc::clone(self), key, rx: Some(rx) })
            }
        }
    }

    /// Delivers `params` to the waiter under this key, if any. A key is matched at most once;
    /// a second answer while the run lasts is told [`SubmitStatus::AlreadyAnswered`].
    pub fn submit(&self, run_id: &str, tool_id: &str, params: Value) -> SubmitStatus {
        let (run, tool) = (run_id.trim(), tool_id.trim());
        match self.waiters.remove(&key(run, tool)) {
            Some((_, tx)) => match tx.send(params) {
                Ok(()) => {
                    self.answered.entry(run.to_owned()).or_default().insert(tool.to_owned());
                    SubmitStatus::Accepted
                }
                Err(_) => SubmitStatus::Unmatched,
            },
            None if self.answered.get(run).is_some_and(|tools| tools.contains(tool)) => SubmitStatus::AlreadyAnswered,
            None => SubmitStatus::Unmatched,
        }
    }

    /// Forgets what a finished run answered (bounded memory: called when the run ends).
    pub fn forget_run(&self, run_id: &str) {
        self.answered.remove(run_id.trim());
    }

    /// Number of registered waiters (for metrics and leak tests).
    pub fn pending(&self) -> usize {
        self.waiters.len()
    }
}

impl PendingSubmit {
    /// Waits up to `timeout` for the params. `None` on timeout.
    pub async fn wait(mut self, timeout: Duration) -> Option<Value> {
        let rx = self.rx.take()?;
        tokio::time::timeout(timeout, rx).await.ok().and_then(Result::ok)
    }
}

impl Drop for PendingSubmit {
    fn drop(&mut self) {
        // Timed out, cancelled or answered: the key is unmatched from now on.
        self.submits.waiters.remove(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn submit_before_wait_is_matched_and_only_once() {
        let submits = Arc::new(FrontendSubmits::default());
        let pending = submits.register(" run ", "tool").unwrap();
        assert!(submits.register("run", "tool").is_none(), "one waiter per key");
        assert_eq!(submits.submit("run", " tool ", json!({"ok": true})), SubmitStatus::Accepted);
        assert_eq!(submits.submit("run", "tool", json!(1)), SubmitStatus::AlreadyAnswered);
        assert_eq!(pending.wait(Duration::from_millis(10)).await, Some(json!({"ok": true})));
        assert_eq!(submits.pending(), 0);
        submits.forget_run("run");
        assert_eq!(submits.submit("run", "tool", json!(1)), SubmitStatus::Unmatched, "forgotten with its run");
    }

    #[tokio::test]
    async fn timeout_unregisters() {
        let submits = Arc::new(FrontendSubmits::default());
        let pending = submits.register("r", "t").unwrap();
        assert_eq!(pending.wait(Duration::from_millis(5)).await, None);
        assert_eq!(submits.submit("r", "t", json!(1)), SubmitStatus::Unmatched);
        assert_eq!(submits.pending(), 0);
    }
}
