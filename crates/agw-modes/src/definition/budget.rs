//! Run budgets (docs/contract/agent-definitions.md §6, semantics in docs/contract/modes.md §7).

use super::error::DefinitionError;
use super::model::AgentMode;
use super::raw::Obj;

/// Limits for one kind of call (model turns or tool calls).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetScope {
    /// Most calls of this kind per run; one more fails the run with `budget_exceeded`.
    pub max_calls: u32,
    /// Per call, ms: for a model turn the longest gap in its stream, for a tool call the limit of
    /// each attempt.
    pub timeout_ms: u64,
    /// Model: repair turns / retries / forced updates, depending on the mode (0 = the mode's
    /// default); tool: extra attempts after a timeout or runtime failure.
    pub retry_count: u32,
}

/// Limits of one run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    /// Wall-clock limit of the whole run, ms; checked at each model turn and after each tool batch.
    pub run_timeout_ms: u64,
    /// Limits of model turns.
    pub model: BudgetScope,
    /// Limits of tool calls.
    pub tool: BudgetScope,
    /// agw `maxTokens`: input plus output tokens of all the run's model calls; checked before
    /// every model call. `None`: no limit.
    pub max_tokens: Option<u64>,
    /// agw `maxCost`: what the run's model calls may cost, in the configured prices' currency;
    /// checked before every model call, only while every model used has a price. `None`: no
    /// limit.
    pub max_cost: Option<f64>,
}

const fn scope(max_calls: u32, timeout_ms: u64) -> BudgetScope {
    BudgetScope { max_calls, timeout_ms, retry_count: 0 }
}

impl Budget {
    /// REACT's preset; also fills what a configured `budget` leaves out.
    pub const DEFAULT: Budget = Budget {
        run_timeout_ms: 120_000,
        model: scope(15, 60_000),
        tool: scope(20, 120_000),
        max_tokens: None,
        max_cost: None,
    };
    /// ONESHOT's preset.
    pub const LIGHT: Budget = Budget {
        run_timeout_ms: 30_000,
        model: scope(3, 30_000),
        tool: scope(5, 30_000),
        max_tokens: None,
        max_cost: None,
    };
    /// PLAN_EXECUTE's preset.
    pub const HEAVY: Budget = Budget {
        run_timeout_ms: 300_000,
        model: scope(30, 120_000),
        tool: scope(50, 300_000),
        max_tokens: None,
        max_cost: None,
    };

    /// The preset used when the file has no `budget`.
    pub const fn preset_for(mode: AgentMode) -> Budget {
        match mode {
            AgentMode::Oneshot => Budget::LIGHT,
            AgentMode::React => Budget::DEFAULT,
            AgentMode::PlanExecute => Budget::HEAVY,
        }
    }
}

const KNOWN_KEYS: &[&str] = &["runTimeoutMs", "model", "tool", "maxTokens", "maxCost"];
const LEGACY_KEYS: &[&str] = &["maxModelCalls", "maxToolCalls", "timeoutMs", "retryCount"];

/// Reads a configured `budget`. It replaces the mode preset entirely: anything missing or ≤ 0
/// falls back to the DEFAULT preset's value (not the mode preset's), as the reference does.
pub fn parse(budget: &Obj<'_>) -> Result<Budget, DefinitionError> {
    let mut legacy: Vec<String> = Vec::new();
    let mut unsupported: Vec<String> = Vec::new();
    for key in budget.keys().filter(|k| !KNOWN_KEYS.contains(k)) {
        if LEGACY_KEYS.contains(&key) {
            legacy.push(key.to_owned());
        } else {
            unsupported.push(key.to_owned());
        }
    }
    if !legacy.is_empty() {
        legacy.sort();
        return Err(DefinitionError::BudgetLegacy(legacy));
    }
    if !unsupported.is_empty() {
        unsupported.sort();
        return Err(DefinitionError::BudgetUnsupported(unsupported));
    }
    let defaults = Budget::DEFAULT;
    Ok(Budget {
        run_timeout_ms: positive(budget, "runTimeoutMs")?.unwrap_or(defaults.run_timeout_ms),
        model: parse_scope(budget, "model", defaults.model)?,
        tool: parse_scope(budget, "tool", defaults.tool)?,
        max_tokens: positive(budget, "maxTokens")?,
        max_cost: match budget.f64("maxCost")? {
            None => None,
            Some(cost) if cost > 0.0 && cost.is_finite() => Some(cost),
            Some(cost) => {
                return Err(DefinitionError::OutOfRange { field: budget.field("maxCost"), value: cost.to_string() });
            }
        },
    })
}

fn parse_scope(budget: &Obj<'_>, key: &str, defaults: BudgetScope) -> Result<BudgetScope, DefinitionError> {
    let Some(scope) = budget.obj(key)? else {
        return Ok(defaults);
    };
    let max_calls = match positive(&scope, "maxCalls")? {
        Some(n) => to_u32(&scope, "maxCalls", n)?,
        None => defaults.max_calls,
    };
    let retry_count = match scope.i64("retryCount")? {
        Some(n) if n > 0 => to_u32(&scope, "retryCount", n.unsigned_abs())?,
        _ => 0,
    };
    Ok(BudgetScope {
        max_calls,
        timeout_ms: positive(&scope, "timeoutMs")?.unwrap_or(defaults.timeout_ms),
        retry_count,
    })
}

/// The value if it is a positive integer; missing or ≤ 0 → `None` (use the default).
fn positive(obj: &Obj<'_>, key: &str) -> Result<Option<u64>, DefinitionError> {
    Ok(obj.i64(key)?.filter(|n| *n > 0).map(i64::unsigned_abs))
}

fn to_u32(obj: &Obj<'_>, key: &str, n: u64) -> Result<u32, DefinitionError> {
    u32::try_from(n).map_err(|_| DefinitionError::OutOfRange { field: obj.field(key), value: n.to_string() })
}
