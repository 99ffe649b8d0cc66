//! Typos are caught: a config-file key that names no setting is an error, an environment
//! variable with a setting prefix that names none is a warning. Both name the nearest known
//! setting, provider settings included (`<key>` is whatever the name holds at that place).

use super::providers;
use super::table::{
    CHECKED_ENV_PREFIXES, OTHER_ENV, PROVIDER_FIELDS, PROVIDERS_ENV, PROVIDERS_TABLE, SETTINGS, TEST_ENV,
};

/// A name that is not a setting, with the known name closest to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownName {
    /// The full dotted path of a file key, or the variable's name.
    pub name: String,
    /// The closest known name, when one is near enough to be a likely typo.
    pub suggestion: Option<String>,
}

/// Keys of the config file that name no setting, by full dotted path, in key order.
pub(super) fn file_keys(table: &toml::Table) -> Vec<UnknownName> {
    let mut out = Vec::new();
    walk(table, &mut Vec::new(), &mut out);
    out
}

/// Environment variables with a checked prefix that name no setting, sorted by name.
pub(super) fn env_vars<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<UnknownName> {
    let mut out: Vec<UnknownName> = names
        .into_iter()
        .filter(|name| CHECKED_ENV_PREFIXES.iter().any(|p| name.starts_with(p)))
        .filter(|name| {
            !SETTINGS.iter().any(|s| s.env == *name)
                && !OTHER_ENV.iter().any(|(other, _)| other == name)
                && !TEST_ENV.contains(name)
                && providers::env_field(name).is_none()
        })
        .map(|name| UnknownName { name: name.to_string(), suggestion: nearest(name, &env_candidates(name)) })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

fn walk<'a>(table: &'a toml::Table, path: &mut Vec<&'a str>, out: &mut Vec<UnknownName>) {
    for (key, value) in table {
        path.push(key);
        if is_path(path, PROVIDERS_TABLE) {
            // Any key names a provider; a provider that is not a table is the loader's error.
            for (provider, fields) in value.as_table().into_iter().flatten() {
                for field in fields.as_table().into_iter().flat_map(|t| t.keys()) {
                    if !PROVIDER_FIELDS.iter().any(|f| f.key == field) {
                        path.extend([provider.as_str(), field.as_str()]);
                        out.push(unknown(path));
                        path.truncate(path.len() - 2);
                    }
                }
            }
        } else if SETTINGS.iter().any(|s| is_path(path, s.property)) && !value.is_table() {
            // A known setting.
        } else if let (Some(inner), true) = (value.as_table(), is_table_of_settings(path)) {
            walk(inner, path, out);
        } else {
            leaves(value, path, out);
        }
        path.pop();
    }
}

/// Every leaf under an unknown key (the key itself when it holds no table or an empty one).
fn leaves<'a>(value: &'a toml::Value, path: &mut Vec<&'a str>, out: &mut Vec<UnknownName>) {
    match value.as_table() {
        Some(table) if !table.is_empty() => {
            for (key, value) in table {
                path.push(key);
                leaves(value, path, out);
                path.pop();
            }
        }
        _ => out.push(unknown(path)),
    }
}

fn unknown(path: &[&str]) -> UnknownName {
    let name = dotted(path);
    // A table where a setting's value belongs (`[server.port]`): that setting.
    if let Some(setting) = SETTINGS.iter().find(|s| (1..path.len()).any(|n| is_path(&path[..n], s.property))) {
        return UnknownName { name, suggestion: Some(setting.property.to_string()) };
    }
    let mut candidates: Vec<String> = SETTINGS.iter().map(|s| s.property.to_string()).collect();
    // `agent.providers.<key>.<field>` with this key, for typos in `providers` or the field.
    if let [_, _, key, _] = path {
        candidates.extend(PROVIDER_FIELDS.iter().map(|f| format!("{PROVIDERS_TABLE}.{}.{}", quoted(key), f.key)));
    }
    UnknownName { suggestion: nearest(&name, &candidates), name }
}

/// Whether the path segments spell `property` (segment-wise: a quoted key holding a dot is
/// not two segments).
fn is_path(path: &[&str], property: &str) -> bool {
    path.iter().copied().eq(property.split('.'))
}

/// Whether some setting lives below this path.
fn is_table_of_settings(path: &[&str]) -> bool {
    SETTINGS.iter().any(|s| {
        let segments: Vec<&str> = s.property.split('.').collect();
        segments.len() > path.len() && segments[..path.len()] == *path
    })
}

fn dotted(path: &[&str]) -> String {
    path.iter().map(|s| quoted(s)).collect::<Vec<_>>().join(".")
}

/// A key as TOML would need it written: bare when it can be, quoted otherwise.
fn quoted(key: &str) -> String {
    if !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        key.to_string()
    } else {
        format!("{key:?}")
    }
}

/// Known variables, plus every `AGENT_PROVIDERS_<KEY><FIELD>` whose `<KEY>` is a run of the
/// name's own `_`-separated words (so `AGENT_PROVIDRES_MY_LAB_BASE_URL` finds
/// `AGENT_PROVIDERS_MY_LAB_BASE_URL`).
fn env_candidates(name: &str) -> Vec<String> {
    let mut out: Vec<String> = SETTINGS.iter().map(|s| s.env.to_string()).collect();
    out.extend(OTHER_ENV.iter().map(|(n, _)| n.to_string()));
    let words: Vec<&str> = name.split('_').collect();
    for start in 0..words.len() {
        for end in start + 1..=words.len() {
            let key = words[start..end].join("_");
            if key.is_empty() {
                continue;
            }
            out.extend(PROVIDER_FIELDS.iter().map(|f| format!("{PROVIDERS_ENV}{key}{}", f.env_suffix)));
        }
    }
    out
}

/// The closest candidate, when it is close enough to be a plausible typo (at most a third of
/// the characters edited).
fn nearest(name: &str, candidates: &[String]) -> Option<String> {
    candidates
        .iter()
        .map(|c| (strsim::damerau_levenshtein(name, c), c))
        .min_by_key(|(distance, _)| *distance)
        .filter(|(distance, _)| *distance > 0 && distance * 3 <= name.chars().count())
        .map(|(_, c)| c.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> Vec<(String, Option<String>)> {
        file_keys(&text.parse::<toml::Table>().unwrap()).into_iter().map(|u| (u.name, u.suggestion)).collect()
    }

    fn env(names: &[&str]) -> Vec<(String, Option<String>)> {
        env_vars(names.iter().copied()).into_iter().map(|u| (u.name, u.suggestion)).collect()
    }

    fn some(s: &str) -> Option<String> {
        Some(s.to_string())
    }

    #[test]
    fn known_file_keys_pass() {
        let text = r#"
            [server]
            port = 8080
            [agent.cors]
            allowed-origin-patterns = ["http://localhost:*"]
            [agent.providers.bailian]
            base-url = "https://x"
            api-key = "k"
            [agent.providers."my.lab"]
            model = "m"
            [memory.chat]
            charset = "UTF-8"
        "#;
        assert_eq!(file(text), []);
    }

    #[test]
    fn unknown_file_keys_are_named_by_full_path_with_the_nearest_key() {
        assert_eq!(file("[server]\nprot = 8081\n"), [("server.prot".into(), some("server.port"))]);
        assert_eq!(
            file("[agent.providers.bailian]\nbase_url = \"x\"\nmodel = \"m\"\n"),
            [("agent.providers.bailian.base_url".into(), some("agent.providers.bailian.base-url"))]
        );
        assert_eq!(
            file("[agent.provider.bailian]\nbase-url = \"x\"\n"),
            [("agent.provider.bailian.base-url".into(), some("agent.providers.bailian.base-url"))]
        );
        assert_eq!(
            file("[agent.cros]\nmax-age-seconds = 1\n"),
            [("agent.cros.max-age-seconds".into(), some("agent.cors.max-age-seconds"))]
        );
        // Top-level dotted keys are the same paths; a table where a value belongs is not a value.
        assert_eq!(file("server.prot = 1\n"), [("server.prot".into(), some("server.port"))]);
        assert_eq!(file("[server.port]\nvalue = 1\n"), [("server.port.value".into(), some("server.port"))]);
        // Nothing close: no guess.
        assert_eq!(file("[frobnicate]\nx = 1\n[empty]\n"), [("empty".into(), None), ("frobnicate.x".into(), None)]);
        assert_eq!(file("\"server.port\" = 1\n"), [("\"server.port\"".into(), some("server.port"))]);
    }

    #[test]
    fn provider_variables_are_dynamic_but_typos_are_caught() {
        assert_eq!(
            env(&[
                "AGENT_PROVIDERS_X_BASE_URL",
                "AGENT_PROVIDERS_MY_LAB_API_KEY",
                "AGENT_PROVIDERS_CLAUDE_PROTOCOL",
                "SERVER_PORT",
                "AGW_LOG",
                "AGW_SOAK_SECS",
                "AGW_FUZZ_CASES",
                "AGW_EXAMPLE_BASE_URL",
                "PATH",
                "MEMORY_CHAT_K",
            ]),
            []
        );
        assert_eq!(
            env(&["AGENT_PROVIDRES_X_BASE_URL", "AGENT_PROVIDERS_MY_LAB_BASEURL"]),
            [
                ("AGENT_PROVIDERS_MY_LAB_BASEURL".into(), some("AGENT_PROVIDERS_MY_LAB_BASE_URL")),
                ("AGENT_PROVIDRES_X_BASE_URL".into(), some("AGENT_PROVIDERS_X_BASE_URL")),
            ]
        );
        // A provider variable needs a key.
        assert_eq!(env(&["AGENT_PROVIDERS__MODEL", "AGENT_PROVIDERS_BASE_URL"]).len(), 2);
        assert_eq!(
            env(&["AGW_DEMO_ENABLE", "MEMORY_CHAT_DIRS", "AGW_LGO", "AGENT_SMITH"]),
            [
                ("AGENT_SMITH".into(), None),
                ("AGW_DEMO_ENABLE".into(), some("AGW_DEMO_ENABLED")),
                ("AGW_LGO".into(), some("AGW_LOG")),
                ("MEMORY_CHAT_DIRS".into(), some("MEMORY_CHAT_DIR")),
            ]
        );
    }
}
