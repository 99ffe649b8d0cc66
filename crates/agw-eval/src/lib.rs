//! agw-eval — evaluating agents like code (issue 42, docs/evals.md).
//!
//! Owns: the evalset format ([`EvalSet`], versioned JSON, one file per set), what a run did as
//! its events show it ([`Observed`]: tool calls with their arguments, the answer, structured
//! output, usage, cost, model calls), and the scores of a case's expectations against it
//! ([`score()`]: tool trajectory, answer checks, limits), each with the reason a check failed.
//!
//! Must never: start runs or call providers (the runner above it does), read chat stores, or
//! decide what a threshold of a set means for an exit status (the CLI does).

#![forbid(unsafe_code)]

mod evalset;
mod observed;
mod score;

pub use evalset::{
    AnswerExpectation, ArgsMatch, Case, EVALSET_VERSION, EvalSet, EvalSetError, Expectations, ExpectedCall, Limits,
    Order, Thresholds, ToolAnswer, TrajectoryExpectation, Turn,
};
pub use observed::{Observed, ObservedCall};
pub use score::{CaseScore, rouge1_f, score, trajectory_score};
