//! Run budget accounting (`docs/contract/modes.md` §7).

use std::time::Instant;

use agw_protocol::usage::{PriceTable, RunUsage};

use crate::definition::Budget;

use super::RunFailure;

/// Counts model calls and tool calls of one run against its [`Budget`].
#[derive(Debug, Clone)]
pub struct BudgetTracker {
    budget: Budget,
    started: Instant,
    model_calls: u32,
    tool_calls: u32,
}

impl BudgetTracker {
    /// Starts the run clock now.
    pub fn new(budget: Budget) -> Self {
        Self { budget, started: Instant::now(), model_calls: 0, tool_calls: 0 }
    }

    /// The limits being enforced.
    pub fn budget(&self) -> &Budget {
        &self.budget
    }

    /// Called at the start of every model turn.
    pub fn begin_model_call(&mut self) -> Result<(), RunFailure> {
        self.check_run_time()?;
        if self.model_calls >= self.budget.model.max_calls {
            return Err(RunFailure::Budget(format!("model.maxCalls={}", self.budget.model.max_calls)));
        }
        self.model_calls += 1;
        Ok(())
    }

    /// Called after each executed tool batch.
    pub fn add_tool_calls(&mut self, n: u32) -> Result<(), RunFailure> {
        self.tool_calls += n;
        if self.tool_calls > self.budget.tool.max_calls {
            return Err(RunFailure::Budget(format!("tool.maxCalls={}", self.budget.tool.max_calls)));
        }
        self.check_run_time()
    }

    /// Fails once `runTimeoutMs` has elapsed since [`Self::new`].
    pub fn check_run_time(&self) -> Result<(), RunFailure> {
        if self.started.elapsed().as_millis() >= u128::from(self.budget.run_timeout_ms) {
            return Err(RunFailure::Budget(format!("runTimeoutMs={}", self.budget.run_timeout_ms)));
        }
        Ok(())
    }

    /// Fails once the run's `usage` reached `maxTokens`, or its cost with `prices` reached
    /// `maxCost` (only while every model used has a price: an unknown cost is never guessed).
    pub fn check_spend(&self, usage: &RunUsage, prices: &PriceTable) -> Result<(), RunFailure> {
        if let Some(max) = self.budget.max_tokens
            && usage.total_tokens >= max
        {
            return Err(RunFailure::Budget(format!("maxTokens={max} (used {})", usage.total_tokens)));
        }
        if let Some(max) = self.budget.max_cost
            && let Some(cost) = usage.cost(prices)
            && cost.amount >= max
        {
            return Err(RunFailure::Budget(format!("maxCost={max} {} (spent {})", cost.currency, cost.amount)));
        }
        Ok(())
    }

    /// Model turns begun so far.
    pub fn model_calls(&self) -> u32 {
        self.model_calls
    }

    /// A tracker for a task running beside others: the run's limits and clock, counting from
    /// what the run used so far (so each task alone stays within the run's limits).
    pub(crate) fn fork(&self) -> Self {
        self.clone()
    }

    /// Adds what a forked task used beyond the point it was forked at, then checks the limits
    /// (a round of parallel tasks may pass them by what its tasks used at once).
    pub(crate) fn absorb(&mut self, forked_at: &Self, task: &Self) -> Result<(), RunFailure> {
        self.model_calls += task.model_calls.saturating_sub(forked_at.model_calls);
        self.tool_calls += task.tool_calls.saturating_sub(forked_at.tool_calls);
        if self.model_calls > self.budget.model.max_calls {
            return Err(RunFailure::Budget(format!("model.maxCalls={}", self.budget.model.max_calls)));
        }
        if self.tool_calls > self.budget.tool.max_calls {
            return Err(RunFailure::Budget(format!("tool.maxCalls={}", self.budget.tool.max_calls)));
        }
        self.check_run_time()
    }
}
