//! Remote agent declarations: `<name>.json` in a directory (`docs/a2a.md`).

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

/// One remote A2A agent.
#[derive(Clone, PartialEq, Eq)]
pub struct RemoteAgentConfig {
    /// The file's stem: the tool is `a2a__<name>`.
    pub name: String,
    /// The agent's A2A endpoint (its JSON-RPC URL); its card is read at
    /// `<url>/.well-known/agent-card.json` unless `card_url` says otherwise.
    pub url: reqwest::Url,
    /// Where the card is, when not under `url`; same origin as `url`.
    pub card_url: Option<reqwest::Url>,
    /// The bearer token sent to the agent (read from the variable `authTokenEnv` names when the
    /// file is loaded).
    pub token: Option<String>,
    /// One call's whole time.
    pub timeout: Duration,
    /// Stream when the card offers it (`false`: always a blocking `SendMessage`).
    pub streaming: bool,
    /// The tool's description, instead of the card's.
    pub description: Option<String>,
    /// A remote task that asks for input asks the user of the local run (`true`, the default:
    /// the run pauses for them) or goes back to the model (`"inputRequired": "model"`).
    pub ask_user: bool,
}

impl std::fmt::Debug for RemoteAgentConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteAgentConfig")
            .field("name", &self.name)
            .field("url", &self.url.as_str())
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("timeout", &self.timeout)
            .field("streaming", &self.streaming)
            .finish_non_exhaustive()
    }
}

/// A file that was not loaded, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadProblem {
    /// The file.
    pub file: String,
    /// Why.
    pub message: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Raw {
    url: String,
    #[serde(default)]
    card_url: Option<String>,
    #[serde(default)]
    auth_token_env: Option<String>,
    #[serde(default)]
    timeout_ms: Option<u64>,
    #[serde(default)]
    streaming: Option<bool>,
    #[serde(default)]
    enabled: Option<bool>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    input_required: Option<String>,
}

/// Default time of one call.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// Why a declaration did not load (its text is the reason).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// Parses one declaration; `Ok(None)` for a disabled one.
pub fn parse_agent(name: &str, text: &str) -> Result<Option<RemoteAgentConfig>, ConfigError> {
    parse(name, text).map_err(ConfigError)
}

fn parse(name: &str, text: &str) -> Result<Option<RemoteAgentConfig>, String> {
    let raw: Raw = serde_json::from_str(text).map_err(|e| format!("not a remote agent declaration: {e}"))?;
    if raw.enabled == Some(false) {
        return Ok(None);
    }
    let http_url = |field: &str, value: &str| -> Result<reqwest::Url, String> {
        let url = reqwest::Url::parse(value.trim()).map_err(|e| format!("{field} does not parse: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(format!("{field} must be an http or https URL"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(format!("{field} must not hold credentials: use authTokenEnv"));
        }
        Ok(url)
    };
    let url = http_url("url", &raw.url)?;
    let card_url = raw.card_url.as_deref().map(|c| http_url("cardUrl", c)).transpose()?;
    if card_url.as_ref().is_some_and(|c| c.origin() != url.origin()) {
        return Err("cardUrl must be on the same origin as url (the token goes to that origin only)".into());
    }
    let token = match raw.auth_token_env.as_deref().map(str::trim).filter(|v| !v.is_empty()) {
        None => None,
        Some(var) => match std::env::var(var) {
            Ok(token) if !token.trim().is_empty() => Some(token.trim().to_owned()),
            _ => return Err(format!("authTokenEnv names {var}, which is not set")),
        },
    };
    let ask_user = match raw.input_required.as_deref().map(str::trim) {
        None | Some("ask") => true,
        Some("model") => false,
        Some(other) => return Err(format!("inputRequired must be ask or model, not {other:?}")),
    };
    Ok(Some(RemoteAgentConfig {
        name: name.to_owned(),
        url,
        card_url,
        token,
        timeout: raw.timeout_ms.map_or(DEFAULT_TIMEOUT, |ms| Duration::from_millis(ms.clamp(1_000, 3_600_000))),
        streaming: raw.streaming.unwrap_or(true),
        description: raw.description.map(|d| d.trim().to_owned()).filter(|d| !d.is_empty()),
        ask_user,
    }))
}

/// Every `*.json` declaration in `dir`, sorted by name; a file that does not load is a problem,
/// the others still load.
pub fn load_dir(dir: &Path) -> (Vec<RemoteAgentConfig>, Vec<LoadProblem>) {
    let (mut agents, mut problems) = (Vec::new(), Vec::new());
    let Ok(entries) = std::fs::read_dir(dir) else { return (agents, problems) };
    let mut paths: Vec<_> =
        entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "json")).collect();
    paths.sort();
    for path in paths {
        let file = path.display().to_string();
        let Some(name) = path.file_stem().and_then(|s| s.to_str()).map(str::to_owned) else { continue };
        let loaded = std::fs::read_to_string(&path).map_err(|e| e.to_string()).and_then(|text| parse(&name, &text));
        match loaded {
            Ok(Some(agent)) => agents.push(agent),
            Ok(None) => {}
            Err(message) => problems.push(LoadProblem { file, message }),
        }
    }
    (agents, problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declaration_is_checked_and_its_token_never_shown() {
        // A variable every test process has stands in for a token variable.
        let path = std::env::var("PATH").unwrap();
        let text = r#"{"url": "https://agents.example/a2a/helper", "authTokenEnv": "PATH", "timeoutMs": 5000}"#;
        let agent = parse_agent("helper", text).unwrap().unwrap();
        assert_eq!(agent.token.as_deref(), Some(path.trim()));
        assert!(!format!("{agent:?}").contains(path.trim()));
        assert_eq!(agent.timeout, Duration::from_secs(5));
        assert!(parse_agent("x", r#"{"url": "https://a.example", "enabled": false}"#).unwrap().is_none());
        for bad in [
            r#"{"url": "ftp://a.example"}"#,
            r#"{"url": "https://u:p@a.example"}"#,
            r#"{"url": "https://a.example", "cardUrl": "https://b.example/card"}"#,
            r#"{"url": "https://a.example", "authTokenEnv": "AGW_A2A_TEST_UNSET_VARIABLE"}"#,
            r#"{"url": "https://a.example", "surprise": 1}"#,
        ] {
            assert!(parse_agent("x", bad).is_err(), "{bad}");
        }
    }
}
