//! `agw.quotas.*`: how much one subject (JWT `sub` and tenant) and one agent may use — runs in
//! flight, runs per minute, tokens and cost per UTC day — and what a run reserves of a daily
//! token quota when admitted (`docs/observability.md#quotas`). Counted in memory on one node, in
//! Redis in a cluster (`agw_runs::quotas`).

use super::ConfigError;
use super::source::Source;
use super::table::{
    AGW_QUOTAS_AGENT_CONCURRENT_RUNS, AGW_QUOTAS_AGENT_COST_PER_DAY, AGW_QUOTAS_AGENT_RUNS_PER_MINUTE,
    AGW_QUOTAS_AGENT_TOKENS_PER_DAY, AGW_QUOTAS_RESERVE_TOKENS, AGW_QUOTAS_SUBJECT_CONCURRENT_RUNS,
    AGW_QUOTAS_SUBJECT_COST_PER_DAY, AGW_QUOTAS_SUBJECT_RUNS_PER_MINUTE, AGW_QUOTAS_SUBJECT_TOKENS_PER_DAY,
    SettingSpec,
};
use super::value::{self, ValueError};
pub use agw_runs::quotas::{QuotaLimits, QuotaSettings};

fn cost(s: &str) -> Result<f64, ValueError> {
    match s.trim().parse::<f64>() {
        Ok(n) if n >= 0.0 && n.is_finite() => Ok(n),
        _ => Err(ValueError::Expected("a non-negative amount, e.g. 2.50")),
    }
}

fn limits(src: &Source, specs: [&SettingSpec; 4]) -> Result<QuotaLimits, ConfigError> {
    Ok(QuotaLimits {
        concurrent_runs: src.parse(specs[0], value::whole)?,
        runs_per_minute: src.parse(specs[1], value::whole)?,
        tokens_per_day: src.parse(specs[2], value::whole)?,
        cost_per_day: src.parse(specs[3], cost)?,
    })
}

pub(super) fn load(src: &Source) -> Result<QuotaSettings, ConfigError> {
    Ok(QuotaSettings {
        subject: limits(
            src,
            [
                &AGW_QUOTAS_SUBJECT_CONCURRENT_RUNS,
                &AGW_QUOTAS_SUBJECT_RUNS_PER_MINUTE,
                &AGW_QUOTAS_SUBJECT_TOKENS_PER_DAY,
                &AGW_QUOTAS_SUBJECT_COST_PER_DAY,
            ],
        )?,
        agent: limits(
            src,
            [
                &AGW_QUOTAS_AGENT_CONCURRENT_RUNS,
                &AGW_QUOTAS_AGENT_RUNS_PER_MINUTE,
                &AGW_QUOTAS_AGENT_TOKENS_PER_DAY,
                &AGW_QUOTAS_AGENT_COST_PER_DAY,
            ],
        )?,
        reserve_tokens: src.parse(&AGW_QUOTAS_RESERVE_TOKENS, value::whole)?,
    })
}
