//! agw-eval — evaluating agents like code (issue 42, docs/evals.md).
//!
//! Owns: the evalset format ([`EvalSet`], versioned JSON, one file per set), what a run did as
//! its events show it ([`Observed`]: tool calls with their arguments, the answer, structured
//! output, usage, cost, model calls), and the scores of a case's expectations against it
//! ([`score()`]: tool trajectory, answer checks, limits), each with the reason a check failed.
//!
//! And [`runner`]: plays a case against a running agw over its public HTTP API (the query, the
//! submits of the case's answers, the stream), so it needs no server crate; `agw eval` starts
//! agw in-process on a loopback port, or points it at a server.
//!
//! Must never: call providers or read chat stores itself (runs go through agw's API), or decide
//! what a set's thresholds mean for an exit status (the CLI does).

#![forbid(unsafe_code)]

pub mod compare;
mod evalset;
mod observed;
pub mod record;
mod report;
pub mod runner;
mod score;

pub use evalset::{
    AnswerExpectation, ArgsMatch, Case, EVALSET_VERSION, EvalSet, EvalSetError, Expectations, ExpectedCall,
    JudgeExpectation, Limits, Order, Thresholds, ToolAnswer, TrajectoryExpectation, Turn,
};
pub use observed::{Observed, ObservedCall};
pub use report::{CaseResult, RunResult, SetReport};
pub use runner::{PlayError, Played, Target, play, run_set};
pub use score::{CaseScore, rouge1_f, score, trajectory_score};
