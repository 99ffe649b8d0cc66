//! `agw.guardrails.*` (docs/guardrails.md): the rule files' directory, the guards every agent
//! gets, how often classifiers see a streaming answer, what a classifier's silence means, and
//! the classifier webhook.

use std::time::Duration;

use agw_guard::Granularity;
use agw_modes::definition::{GuardLists, GuardRef};
use agw_modes::runtime::FailMode;
use agw_runs::guards::{GuardSettings, GuardWebhookConfig};

use super::ConfigError;
use super::resources::CatalogDir;
use super::source::Source;
use super::table::{
    AGW_GUARDRAILS_CLASSIFY_EVERY, AGW_GUARDRAILS_DIR, AGW_GUARDRAILS_FAIL_MODE, AGW_GUARDRAILS_INPUT,
    AGW_GUARDRAILS_JUDGE_TIMEOUT_MS, AGW_GUARDRAILS_OUTPUT, AGW_GUARDRAILS_REFRESH_INTERVAL_MS,
    AGW_GUARDRAILS_TOOL_INPUT, AGW_GUARDRAILS_TOOL_OUTPUT, AGW_GUARDRAILS_WEBHOOK_SECRET,
    AGW_GUARDRAILS_WEBHOOK_TIMEOUT_MS, AGW_GUARDRAILS_WEBHOOK_URL, SettingSpec,
};
use super::value::{self, ValueError};

/// `agw.guardrails.*`.
#[derive(Debug, Clone)]
pub struct GuardrailSettings {
    /// The rule files (`None`: the bundled rule set `demo`), and their rescan.
    pub rules: CatalogDir,
    /// What the run core reads.
    pub guards: GuardSettings,
}

fn guards(s: &str) -> Result<Vec<GuardRef>, String> {
    let mut out: Vec<GuardRef> = Vec::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let guard = item.parse::<GuardRef>().map_err(|e| e.to_string())?;
        if !out.contains(&guard) {
            out.push(guard);
        }
    }
    Ok(out)
}

fn fail_mode(s: &str) -> Result<FailMode, ValueError> {
    match s.trim().to_ascii_lowercase().as_str() {
        "closed" => Ok(FailMode::Closed),
        "open" => Ok(FailMode::Open),
        _ => Err(ValueError::Expected("closed or open")),
    }
}

fn url(s: &str) -> Result<String, ValueError> {
    let s = s.trim();
    let lower = s.to_ascii_lowercase();
    if (lower.starts_with("http://") || lower.starts_with("https://")) && s.len() > "https://".len() {
        Ok(s.to_owned())
    } else {
        Err(ValueError::Expected("an http:// or https:// URL"))
    }
}

pub(super) fn load(src: &Source) -> Result<GuardrailSettings, ConfigError> {
    let list = |spec: &SettingSpec| -> Result<Vec<GuardRef>, ConfigError> {
        Ok(src.parse_opt(spec, guards)?.unwrap_or_default())
    };
    let webhook = match src.parse_opt(&AGW_GUARDRAILS_WEBHOOK_URL, url)? {
        None => None,
        Some(url) => {
            let secret = src.parse_opt(&AGW_GUARDRAILS_WEBHOOK_SECRET, value::text)?.filter(|s| !s.trim().is_empty());
            // An unsigned classifier request could be forged by anyone who can reach it.
            let Some(secret) = secret else {
                return Err(ConfigError::Invalid {
                    property: AGW_GUARDRAILS_WEBHOOK_SECRET.property,
                    env: AGW_GUARDRAILS_WEBHOOK_SECRET.env,
                    message: "missing: the classifier webhook's requests are signed, so it needs a secret".into(),
                });
            };
            Some(GuardWebhookConfig {
                url,
                secret,
                timeout: src.parse(&AGW_GUARDRAILS_WEBHOOK_TIMEOUT_MS, value::millis)?.max(Duration::from_millis(50)),
            })
        }
    };
    Ok(GuardrailSettings {
        rules: CatalogDir {
            dir: src.parse_opt(&AGW_GUARDRAILS_DIR, value::path)?,
            refresh: src.parse(&AGW_GUARDRAILS_REFRESH_INTERVAL_MS, value::millis)?,
        },
        guards: GuardSettings {
            defaults: GuardLists {
                input: list(&AGW_GUARDRAILS_INPUT)?,
                output: list(&AGW_GUARDRAILS_OUTPUT)?,
                tool_input: list(&AGW_GUARDRAILS_TOOL_INPUT)?,
                tool_output: list(&AGW_GUARDRAILS_TOOL_OUTPUT)?,
            },
            classify_every: src.parse(&AGW_GUARDRAILS_CLASSIFY_EVERY, |s| s.parse::<Granularity>())?,
            fail: src.parse(&AGW_GUARDRAILS_FAIL_MODE, fail_mode)?,
            judge_timeout: src.parse(&AGW_GUARDRAILS_JUDGE_TIMEOUT_MS, value::millis)?,
            webhook,
        },
    })
}
