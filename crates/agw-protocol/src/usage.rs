//! What a run's model calls cost: provider usage objects normalised into [`TokenCounts`], summed
//! per run and per model ([`RunUsage`]), and priced with a [`PriceTable`] into a [`Cost`]
//! (`docs/observability.md`). Pure data, no I/O.
//!
//! Normalisation: `inputTokens` counts every input token, cached ones included (OpenAI's
//! `prompt_tokens`; Anthropic's `input_tokens + cache_read_input_tokens +
//! cache_creation_input_tokens`); `cachedInputTokens` the cache reads among them,
//! `cacheWriteInputTokens` the cache writes (Anthropic's `cache_creation_input_tokens`; OpenAI
//! does not report writes);
//! `outputTokens` every output token, reasoning included (`completion_tokens` /
//! `output_tokens`); `reasoningTokens` those among them the provider reported as reasoning.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Token counts of one call or a sum of calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenCounts {
    /// Every input token, cached ones included.
    #[serde(default)]
    pub input_tokens: u64,
    /// Every output token, reasoning included.
    #[serde(default)]
    pub output_tokens: u64,
    /// Output tokens the provider reported as reasoning.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning_tokens: u64,
    /// Input tokens read from the provider's prompt cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_input_tokens: u64,
    /// Input tokens written to the provider's prompt cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_input_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl TokenCounts {
    /// Reads a provider's usage object, OpenAI's or Anthropic's dialect; keys it does not
    /// report count 0.
    pub fn from_usage(usage: &Value) -> Self {
        let n = |path: &[&str]| -> u64 {
            let mut value = usage;
            for key in path {
                match value.get(*key) {
                    Some(v) => value = v,
                    None => return 0,
                }
            }
            value.as_u64().unwrap_or(0)
        };
        if usage.get("prompt_tokens").is_some() || usage.get("completion_tokens").is_some() {
            return Self {
                input_tokens: n(&["prompt_tokens"]),
                output_tokens: n(&["completion_tokens"]),
                reasoning_tokens: n(&["completion_tokens_details", "reasoning_tokens"]),
                cached_input_tokens: n(&["prompt_tokens_details", "cached_tokens"]),
                cache_write_input_tokens: 0,
            };
        }
        let cache_read = n(&["cache_read_input_tokens"]);
        let cache_write = n(&["cache_creation_input_tokens"]);
        Self {
            input_tokens: n(&["input_tokens"]) + cache_read + cache_write,
            output_tokens: n(&["output_tokens"]),
            reasoning_tokens: 0,
            cached_input_tokens: cache_read,
            cache_write_input_tokens: cache_write,
        }
    }

    /// Input plus output.
    pub fn total(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }

    fn add(&mut self, other: &TokenCounts) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
        self.cached_input_tokens += other.cached_input_tokens;
        self.cache_write_input_tokens += other.cache_write_input_tokens;
    }
}

/// One model's share of a run's usage.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelUsage {
    /// The provider key the calls went to.
    pub provider: String,
    /// The model they named.
    pub model: String,
    /// Calls that reported usage.
    pub calls: u64,
    /// Their summed tokens.
    #[serde(flatten)]
    pub tokens: TokenCounts,
}

/// A run's usage: the totals over every model call that reported usage (turns, plan, tasks,
/// summary, repairs, context summaries), and the same per provider and model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunUsage {
    /// Summed tokens.
    #[serde(flatten)]
    pub totals: TokenCounts,
    /// `inputTokens + outputTokens`.
    #[serde(default)]
    pub total_tokens: u64,
    /// Calls that reported usage.
    #[serde(default)]
    pub calls: u64,
    /// Per provider and model, in first-seen order.
    #[serde(default)]
    pub by_model: Vec<ModelUsage>,
}

impl RunUsage {
    /// Adds one call's usage object (`provider`/`model`: where the call went).
    pub fn add(&mut self, provider: &str, model: &str, usage: &Value) {
        self.add_counts(provider, model, &TokenCounts::from_usage(usage), 1);
    }

    /// Adds counts of `calls` calls.
    pub fn add_counts(&mut self, provider: &str, model: &str, tokens: &TokenCounts, calls: u64) {
        self.totals.add(tokens);
        self.total_tokens = self.totals.total();
        self.calls += calls;
        match self.by_model.iter_mut().find(|m| m.provider == provider && m.model == model) {
            Some(entry) => {
                entry.calls += calls;
                entry.tokens.add(tokens);
            }
            None => self.by_model.push(ModelUsage {
                provider: provider.to_owned(),
                model: model.to_owned(),
                calls,
                tokens: *tokens,
            }),
        }
    }

    /// Adds another run's usage (a chat's totals).
    pub fn merge(&mut self, other: &RunUsage) {
        for entry in &other.by_model {
            self.add_counts(&entry.provider, &entry.model, &entry.tokens, entry.calls);
        }
    }

    /// No call reported usage.
    pub fn is_empty(&self) -> bool {
        self.calls == 0
    }

    /// What the run cost with `prices`: `None` when any model it used has no price (a cost is
    /// never guessed) or the prices of its models are in different currencies.
    pub fn cost(&self, prices: &PriceTable) -> Option<Cost> {
        if self.is_empty() {
            return None;
        }
        let mut currency: Option<&str> = None;
        let mut amount = 0.0;
        for entry in &self.by_model {
            let price = prices.find(&entry.provider, &entry.model)?;
            if currency.is_some_and(|c| c != price.currency) {
                return None;
            }
            currency = Some(&price.currency);
            amount += price.charge(&entry.tokens);
        }
        Some(Cost { currency: currency?.to_owned(), amount: round(amount) })
    }
}

/// A money amount.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    /// ISO 4217 code, e.g. `USD`.
    pub currency: String,
    /// Rounded to 10⁻⁹.
    pub amount: f64,
}

impl Cost {
    /// Adds `other` when it is in the same currency; `false` (unchanged) otherwise.
    pub fn add(&mut self, other: &Cost) -> bool {
        if other.currency != self.currency {
            return false;
        }
        self.amount = round(self.amount + other.amount);
        true
    }
}

fn round(amount: f64) -> f64 {
    (amount * 1e9).round() / 1e9
}

/// The price of one provider's model, per million tokens.
#[derive(Debug, Clone, PartialEq)]
pub struct Price {
    /// Provider key (lower case).
    pub provider: String,
    /// Model name; `*` prices every model of the provider without a price of its own.
    pub model: String,
    /// Per million input tokens that were neither cache reads nor cache writes.
    pub input: f64,
    /// Per million output tokens (reasoning included).
    pub output: f64,
    /// Per million cached input tokens; `None`: charged as input.
    pub cached_input: Option<f64>,
    /// Per million input tokens written to the cache; `None`: charged as input.
    pub cache_write: Option<f64>,
    /// ISO 4217 code.
    pub currency: String,
}

impl Price {
    /// What `tokens` cost at this price.
    pub fn charge(&self, tokens: &TokenCounts) -> f64 {
        let cached = tokens.cached_input_tokens.min(tokens.input_tokens);
        let written = tokens.cache_write_input_tokens.min(tokens.input_tokens - cached);
        let fresh = tokens.input_tokens - cached - written;
        (fresh as f64 * self.input
            + cached as f64 * self.cached_input.unwrap_or(self.input)
            + written as f64 * self.cache_write.unwrap_or(self.input)
            + tokens.output_tokens as f64 * self.output)
            / 1e6
    }
}

/// Prices by provider and model.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PriceTable {
    prices: Vec<Price>,
}

impl PriceTable {
    /// A table of these prices (a later entry for the same provider and model wins).
    pub fn new(prices: Vec<Price>) -> Self {
        Self { prices }
    }

    /// No prices configured.
    pub fn is_empty(&self) -> bool {
        self.prices.is_empty()
    }

    /// The price of `model` at `provider`: its own, else the provider's `*`.
    pub fn find(&self, provider: &str, model: &str) -> Option<&Price> {
        let of = |m: &str| self.prices.iter().rev().find(|p| p.provider.eq_ignore_ascii_case(provider) && p.model == m);
        of(model).or_else(|| of("*"))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn both_dialects_are_normalised() {
        let openai = json!({"prompt_tokens": 1000, "completion_tokens": 300, "total_tokens": 1300,
            "prompt_tokens_details": {"cached_tokens": 200}, "completion_tokens_details": {"reasoning_tokens": 100}});
        assert_eq!(
            TokenCounts::from_usage(&openai),
            TokenCounts {
                input_tokens: 1000,
                output_tokens: 300,
                reasoning_tokens: 100,
                cached_input_tokens: 200,
                cache_write_input_tokens: 0
            }
        );
        let anthropic = json!({"input_tokens": 50, "cache_read_input_tokens": 900, "cache_creation_input_tokens": 50,
            "output_tokens": 70});
        assert_eq!(
            TokenCounts::from_usage(&anthropic),
            TokenCounts {
                input_tokens: 1000,
                output_tokens: 70,
                reasoning_tokens: 0,
                cached_input_tokens: 900,
                cache_write_input_tokens: 50
            }
        );
        assert_eq!(TokenCounts::from_usage(&json!({})), TokenCounts::default());
    }

    fn price(provider: &str, model: &str, input: f64, output: f64) -> Price {
        Price {
            provider: provider.into(),
            model: model.into(),
            input,
            output,
            cached_input: Some(input / 10.0),
            cache_write: None,
            currency: "USD".into(),
        }
    }

    #[test]
    fn cache_writes_are_priced_apart_when_the_table_says_so() {
        // Anthropic's dialect: 100 fresh, 800 read, 100 written, all counted as input.
        let tokens = TokenCounts::from_usage(&json!({"input_tokens": 100, "cache_read_input_tokens": 800,
            "cache_creation_input_tokens": 100, "output_tokens": 0}));
        let mut priced = price("anthropic", "*", 3.0, 15.0);
        // Without a write price, writes cost what input costs.
        assert!((priced.charge(&tokens) - (200.0 * 3.0 + 800.0 * 0.3) / 1e6).abs() < 1e-12);
        priced.cache_write = Some(3.75);
        assert!((priced.charge(&tokens) - (100.0 * 3.0 + 800.0 * 0.3 + 100.0 * 3.75) / 1e6).abs() < 1e-12);
        // A provider reporting more cached tokens than input never makes a negative charge.
        let odd =
            TokenCounts { input_tokens: 10, cached_input_tokens: 8, cache_write_input_tokens: 8, ..Default::default() };
        assert!(priced.charge(&odd) >= 0.0);
    }

    #[test]
    fn a_run_is_summed_per_model_and_priced_only_when_every_model_has_a_price() {
        let mut usage = RunUsage::default();
        usage.add(
            "openai",
            "big",
            &json!({"prompt_tokens": 1_000_000, "completion_tokens": 100_000,
            "prompt_tokens_details": {"cached_tokens": 500_000}}),
        );
        usage.add("openai", "big", &json!({"prompt_tokens": 1_000, "completion_tokens": 10}));
        usage.add("openai", "small", &json!({"prompt_tokens": 2_000_000, "completion_tokens": 0}));
        assert_eq!((usage.calls, usage.total_tokens, usage.by_model.len()), (3, 3_101_010, 2));
        assert_eq!(usage.by_model[0].calls, 2);
        let table = PriceTable::new(vec![price("openai", "big", 2.0, 8.0), price("openai", "*", 0.1, 0.4)]);
        // big: 501,000 fresh × 2 + 500,000 cached × 0.2 + 100,010 out × 8; small: 2M × 0.1.
        let cost = usage.cost(&table).expect("priced");
        assert_eq!(cost.currency, "USD");
        assert!((cost.amount - (1.002 + 0.1 + 0.80008 + 0.2)).abs() < 1e-9, "{}", cost.amount);
        let partial = PriceTable::new(vec![price("openai", "big", 2.0, 8.0)]);
        assert_eq!(usage.cost(&partial), None, "an unknown price is never guessed");
        assert_eq!(RunUsage::default().cost(&table), None);
        let json = serde_json::to_value(&usage).unwrap();
        assert_eq!(json["inputTokens"], 3_001_000);
        assert_eq!(
            json["byModel"][1],
            json!({"provider":"openai","model":"small","calls":1,"inputTokens":2_000_000,"outputTokens":0})
        );
    }
}
