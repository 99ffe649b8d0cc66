//! `contextConfig` (agw extension): how a run keeps what it sends within the model's context
//! window, and when a repeating model is stopped (`docs/context.md`). Every number has the
//! default of seed 001 (after opencode); an agent file overrides any of them.

use super::blocks::model_config;
use super::error::DefinitionError;
use super::model::ModelConfig;
use super::raw::{Obj, normalize_names};

/// The tools whose results are never pruned by default: skill scripts, whose output is what the
/// skill disclosed to the model.
pub const DEFAULT_PROTECTED_TOOLS: &[&str] = &["_skill_run_script_"];

/// A validated `contextConfig`.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextPolicy {
    /// `enabled` (default true): compaction runs at all. Doom-loop detection is separate
    /// (`doomLoopThreshold`).
    pub enabled: bool,
    /// `compactAt` (default 0.8): compaction starts when the request's estimate reaches this
    /// fraction of the usable context.
    pub compact_at: f64,
    /// `keepUserTurns` (default 2): pruning skips the tool outputs of the newest this-many user
    /// turns, a summary keeps the newest this-many runs.
    pub keep_user_turns: usize,
    /// `pruneProtectTokens` (default 40,000): the newest tool output of this many tokens (past
    /// the kept turns) stays.
    pub prune_protect_tokens: u64,
    /// `pruneMinimumTokens` (default 20,000): pruning only happens when it frees at least this.
    pub prune_minimum_tokens: u64,
    /// `protectedTools` (default `_skill_run_script_`): results of these tools are never pruned.
    pub protected_tools: Vec<String>,
    /// `summaryModel` (default: the stage's own model): provider and model of summaries, e.g. a
    /// cheaper one. Only `providerKey` and `model` are used.
    pub summary_model: Option<ModelConfig>,
    /// `summaryMaxTokens` (default 2,000): cap on a summary's length.
    pub summary_max_tokens: u32,
    /// `doomLoopThreshold` (default 3; 0 = off): the same tool with the same arguments this
    /// many times in a row is a doom loop.
    pub doom_loop_threshold: u32,
}

impl Default for ContextPolicy {
    fn default() -> Self {
        Self {
            enabled: true,
            compact_at: 0.8,
            keep_user_turns: 2,
            prune_protect_tokens: 40_000,
            prune_minimum_tokens: 20_000,
            protected_tools: DEFAULT_PROTECTED_TOOLS.iter().map(|t| (*t).to_owned()).collect(),
            summary_model: None,
            summary_max_tokens: 2_000,
            doom_loop_threshold: 3,
        }
    }
}

const KNOWN_KEYS: &[&str] = &[
    "enabled",
    "compactAt",
    "keepUserTurns",
    "pruneProtectTokens",
    "pruneMinimumTokens",
    "protectedTools",
    "summaryModel",
    "summaryMaxTokens",
    "doomLoopThreshold",
];

/// Reads `contextConfig`; absent keys keep their defaults, unknown keys are an error (a typo
/// must not silently leave a limit at its default).
pub fn parse(obj: &Obj<'_>) -> Result<ContextPolicy, DefinitionError> {
    obj.only(KNOWN_KEYS)?;
    let defaults = ContextPolicy::default();
    let compact_at = match obj.f64("compactAt")? {
        None => defaults.compact_at,
        Some(f) if f > 0.0 && f <= 1.0 => f,
        Some(f) => {
            return Err(DefinitionError::OutOfRange { field: obj.field("compactAt"), value: f.to_string() });
        }
    };
    let whole = |key: &str, default: u64| -> Result<u64, DefinitionError> {
        match obj.i64(key)? {
            None => Ok(default),
            Some(n) if n >= 0 => Ok(n.unsigned_abs()),
            Some(n) => Err(DefinitionError::OutOfRange { field: obj.field(key), value: n.to_string() }),
        }
    };
    let small = |key: &str, default: u64| -> Result<u32, DefinitionError> {
        let n = whole(key, default)?;
        u32::try_from(n).map_err(|_| DefinitionError::OutOfRange { field: obj.field(key), value: n.to_string() })
    };
    let protected_tools = if obj.contains("protectedTools") {
        normalize_names(obj.str_list("protectedTools")?)
    } else {
        defaults.protected_tools
    };
    Ok(ContextPolicy {
        enabled: obj.bool("enabled")?.unwrap_or(true),
        compact_at,
        keep_user_turns: small("keepUserTurns", defaults.keep_user_turns as u64)? as usize,
        prune_protect_tokens: whole("pruneProtectTokens", defaults.prune_protect_tokens)?,
        prune_minimum_tokens: whole("pruneMinimumTokens", defaults.prune_minimum_tokens)?,
        protected_tools,
        summary_model: obj.obj("summaryModel")?.map(|m| model_config(&m)).transpose()?,
        summary_max_tokens: small("summaryMaxTokens", u64::from(defaults.summary_max_tokens))?.max(1),
        doom_loop_threshold: small("doomLoopThreshold", u64::from(defaults.doom_loop_threshold))?,
    })
}
