//! Bookkeeping of tool (or action) calls within one run: which ids started, which are still
//! open (in start order, so closing is deterministic), argument chunk counters, results.

use std::collections::HashMap;

use super::{CallKind, ProtocolError};

#[derive(Debug, Default)]
struct CallState {
    open: bool,
    /// Number of `*.args` events emitted so far = the next `chunkIndex`.
    chunks: u32,
    has_result: bool,
}

/// What an args fragment means for a call.
pub(super) enum ArgsStep {
    /// First fragment: the call must be started.
    Start,
    /// Later fragment of an open call.
    Continue,
}

#[derive(Debug)]
pub(super) struct Calls {
    kind: CallKind,
    states: HashMap<String, CallState>,
    /// Open call ids in start order.
    open: Vec<String>,
    /// Every started call id in start order (for answering the unanswered ones on cancel).
    started: Vec<String>,
}

impl Calls {
    pub(super) fn new(kind: CallKind) -> Self {
        Self { kind, states: HashMap::new(), open: Vec::new(), started: Vec::new() }
    }

    /// Validates an args fragment without changing state.
    pub(super) fn check_args(&self, id: &str) -> Result<ArgsStep, ProtocolError> {
        match self.states.get(id) {
            None => Ok(ArgsStep::Start),
            Some(state) if state.open => Ok(ArgsStep::Continue),
            Some(_) => Err(ProtocolError::ArgsAfterEnd { kind: self.kind, id: id.to_owned() }),
        }
    }

    /// Validates an end: the call must be open.
    pub(super) fn check_end(&self, id: &str) -> Result<(), ProtocolError> {
        match self.states.get(id) {
            None => Err(ProtocolError::NotStarted { kind: self.kind, id: id.to_owned() }),
            Some(state) if state.open => Ok(()),
            Some(_) => Err(ProtocolError::AlreadyEnded { kind: self.kind, id: id.to_owned() }),
        }
    }

    /// Validates a result: the call must have started and have no result yet. Returns whether
    /// the call is still open (then it must be ended first).
    pub(super) fn check_result(&self, id: &str) -> Result<bool, ProtocolError> {
        match self.states.get(id) {
            None => Err(ProtocolError::NotStarted { kind: self.kind, id: id.to_owned() }),
            Some(state) if state.has_result => {
                Err(ProtocolError::DuplicateResult { kind: self.kind, id: id.to_owned() })
            }
            Some(state) => Ok(state.open),
        }
    }

    pub(super) fn start(&mut self, id: &str) {
        self.states.insert(id.to_owned(), CallState { open: true, ..CallState::default() });
        self.open.push(id.to_owned());
        self.started.push(id.to_owned());
    }

    /// Returns the chunk index for the next emitted args event and advances the counter.
    pub(super) fn next_chunk(&mut self, id: &str) -> u32 {
        self.states.get_mut(id).map_or(0, |state| {
            state.chunks += 1;
            state.chunks - 1
        })
    }

    pub(super) fn end(&mut self, id: &str) {
        if let Some(state) = self.states.get_mut(id) {
            state.open = false;
        }
        self.open.retain(|open| open != id);
    }

    pub(super) fn record_result(&mut self, id: &str) {
        if let Some(state) = self.states.get_mut(id) {
            state.has_result = true;
        }
    }

    /// Started calls without a result yet, in start order.
    pub(super) fn unanswered(&self) -> Vec<String> {
        self.started.iter().filter(|id| self.states.get(*id).is_some_and(|s| !s.has_result)).cloned().collect()
    }

    /// Ends every open call; returns their ids in start order.
    pub(super) fn end_all(&mut self) -> Vec<String> {
        let open = std::mem::take(&mut self.open);
        for id in &open {
            if let Some(state) = self.states.get_mut(id) {
                state.open = false;
            }
        }
        open
    }
}
