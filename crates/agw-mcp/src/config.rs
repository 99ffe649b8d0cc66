//! MCP server declarations: one JSON file per server in a directory.
//!
//! ```json
//! {"name": "github", "enabled": true, "transport": "stdio",
//!  "command": "/usr/bin/npx", "args": ["-y", "x"], "env": {"FOO": "bar"},
//!  "envPassthrough": ["HOME", "PATH"], "cwd": "/tmp",
//!  "startup": "lazy", "timeouts": {"connectMs": 10000, "callMs": 60000}}
//! {"transport": "http", "url": "https://mcp.example.com/mcp", "headers": {"X-Team": "a"},
//!  "bearerTokenEnv": "GITHUB_MCP_TOKEN"}
//! ```
//!
//! Every key is checked: an unknown key, a key of the other transport or a malformed value skips
//! the file with a [`LoadProblem`] naming it; the other files still load.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use agw_tools::LoadProblem;
use serde_json::{Map, Value};

/// Default `timeouts.connectMs`: the whole start (spawn or connect, handshake, first `tools/list`).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default `timeouts.callMs`: one `tools/call`.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Server files larger than this are skipped (a declaration is a few hundred bytes).
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// Longest server name accepted.
pub const MAX_SERVER_NAME_CHARS: usize = 64;
/// Longest timeout accepted (one day), so a typo cannot park a call forever.
const MAX_TIMEOUT_MS: u64 = 86_400_000;

const COMMON_KEYS: &[&str] = &["name", "enabled", "transport", "startup", "timeouts"];
const STDIO_KEYS: &[&str] = &["command", "args", "env", "envPassthrough", "cwd"];
const HTTP_KEYS: &[&str] = &["url", "headers", "bearerTokenEnv"];
const TIMEOUT_KEYS: &[&str] = &["connectMs", "callMs"];
/// Headers the streamable HTTP transport sets itself (rmcp refuses to connect with them).
const RESERVED_HEADERS: &[&str] =
    &["accept", "content-type", "content-length", "host", "mcp-session-id", "mcp-protocol-version", "last-event-id"];

/// One MCP server as declared by its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerConfig {
    /// Server name: the file's `name`, else its file stem. Part of every tool name it offers.
    pub name: String,
    /// `enabled` (default true): a disabled server is listed with its status but never started.
    pub enabled: bool,
    /// How agw reaches the server.
    pub transport: McpTransport,
    /// `startup` (default lazy).
    pub startup: Startup,
    /// `timeouts`.
    pub timeouts: Timeouts,
    /// The file it was read from (`None` when built in code).
    pub source: Option<PathBuf>,
}

/// `transport` and its keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpTransport {
    /// `"stdio"`: agw starts the server as a child process and talks over its stdin/stdout.
    Stdio(StdioConfig),
    /// `"http"`: the server is reached at a streamable HTTP endpoint.
    Http(HttpConfig),
}

impl McpTransport {
    /// `"stdio"` or `"http"`, as written in the file.
    pub fn kind(&self) -> &'static str {
        match self {
            McpTransport::Stdio(_) => "stdio",
            McpTransport::Http(_) => "http",
        }
    }
}

/// A stdio server: a program started directly (never through a shell).
#[derive(Clone, PartialEq, Eq)]
pub struct StdioConfig {
    /// `command`: an absolute path, or a bare program name looked up in the child's `PATH`.
    pub command: String,
    /// `args`, passed as-is (no shell, no expansion).
    pub args: Vec<String>,
    /// `env`: set in the child's environment (wins over a passed-through variable of the same name).
    pub env: BTreeMap<String, String>,
    /// `envPassthrough`: variables copied from agw's environment when set. Nothing else of agw's
    /// environment reaches the child.
    pub env_passthrough: Vec<String>,
    /// `cwd`: absolute working directory (default: agw's).
    pub cwd: Option<PathBuf>,
}

// `env` values are often credentials handed to the server: only their names are shown.
impl fmt::Debug for StdioConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StdioConfig")
            .field("command", &self.command)
            .field("args", &self.args)
            .field("env", &self.env.keys().map(|k| format!("{k}=***")).collect::<Vec<_>>())
            .field("env_passthrough", &self.env_passthrough)
            .field("cwd", &self.cwd)
            .finish()
    }
}

/// A streamable HTTP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpConfig {
    /// `url` of the MCP endpoint (`http://` or `https://`).
    pub url: String,
    /// `headers`: static, non-secret headers sent with every request.
    pub headers: BTreeMap<String, String>,
    /// `bearerTokenEnv`: the environment variable holding the bearer token, read at each connect.
    /// The token itself is never written in the file.
    pub bearer_token_env: Option<String>,
}

/// `startup`: when agw starts the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Startup {
    /// `"lazy"` (default): on first use ([`crate::McpHub::ensure`]).
    #[default]
    Lazy,
    /// `"boot"`: when the hub starts ([`crate::McpHub::start`]).
    Boot,
}

/// `timeouts`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// `connectMs`: spawn or connect, handshake and the first `tools/list`.
    pub connect: Duration,
    /// `callMs`: one `tools/call`.
    pub call: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts { connect: DEFAULT_CONNECT_TIMEOUT, call: DEFAULT_CALL_TIMEOUT }
    }
}

/// Why a server file was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The text is not JSON, or not a JSON object.
    #[error("not a JSON object: {0}")]
    Json(String),
    /// A key no transport knows.
    #[error("unknown key `{key}` (allowed: {allowed})")]
    UnknownKey {
        /// The key as written.
        key: String,
        /// The keys allowed at that place, comma-separated.
        allowed: String,
    },
    /// A key of the other transport.
    #[error("key `{key}` does not apply to transport \"{transport}\"")]
    WrongTransport {
        /// The key as written.
        key: String,
        /// The file's transport.
        transport: &'static str,
    },
    /// A required key is absent.
    #[error("missing required key `{0}`")]
    Missing(&'static str),
    /// A value of the wrong type or form.
    #[error("`{key}`: {reason}")]
    Invalid {
        /// The key (dotted for nested ones, e.g. `timeouts.callMs`).
        key: String,
        /// What is wrong, for people.
        reason: String,
    },
    /// A credential written in `headers`.
    #[error(
        "header `{0}` carries a credential; never write tokens in the file: put the token in an environment \
         variable and name that variable in `bearerTokenEnv`"
    )]
    SecretHeader(String),
}

fn invalid(key: impl Into<String>, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid { key: key.into(), reason: reason.into() }
}

/// Parses one server file. `file_stem` names the server unless the file has `"name"`.
pub fn parse_server(file_stem: &str, text: &str) -> Result<McpServerConfig, ConfigError> {
    let value: Value = serde_json::from_str(text).map_err(|e| ConfigError::Json(e.to_string()))?;
    let Value::Object(object) = value else {
        return Err(ConfigError::Json("the top level must be an object".to_owned()));
    };

    let transport_name = match object.get("transport") {
        None => return Err(ConfigError::Missing("transport")),
        Some(Value::String(s)) if s == "stdio" || s == "http" => s.clone(),
        Some(other) => return Err(invalid("transport", format!("must be \"stdio\" or \"http\", not {other}"))),
    };
    let (own, other): (&[&str], &[&str]) =
        if transport_name == "stdio" { (STDIO_KEYS, HTTP_KEYS) } else { (HTTP_KEYS, STDIO_KEYS) };
    for key in object.keys() {
        if COMMON_KEYS.contains(&key.as_str()) || own.contains(&key.as_str()) {
            continue;
        }
        if other.contains(&key.as_str()) {
            let transport = if transport_name == "stdio" { "stdio" } else { "http" };
            return Err(ConfigError::WrongTransport { key: key.clone(), transport });
        }
        let allowed = COMMON_KEYS.iter().chain(own).copied().collect::<Vec<_>>().join(", ");
        return Err(ConfigError::UnknownKey { key: key.clone(), allowed });
    }

    let name = match object.get("name") {
        None => file_stem.trim().to_owned(),
        Some(Value::String(s)) => s.trim().to_owned(),
        Some(_) => return Err(invalid("name", "must be a string")),
    };
    check_server_name(&name)?;
    let enabled = match object.get("enabled") {
        None => true,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(invalid("enabled", "must be true or false")),
    };
    let startup = match object.get("startup") {
        None => Startup::Lazy,
        Some(Value::String(s)) if s == "lazy" => Startup::Lazy,
        Some(Value::String(s)) if s == "boot" => Startup::Boot,
        Some(_) => return Err(invalid("startup", "must be \"lazy\" or \"boot\"")),
    };
    let timeouts = parse_timeouts(object.get("timeouts"))?;
    let transport = if transport_name == "stdio" {
        McpTransport::Stdio(parse_stdio(&object)?)
    } else {
        McpTransport::Http(parse_http(&object)?)
    };
    Ok(McpServerConfig { name, enabled, transport, startup, timeouts, source: None })
}

fn check_server_name(name: &str) -> Result<(), ConfigError> {
    if name.is_empty() {
        return Err(invalid("name", "must not be empty"));
    }
    if name.chars().count() > MAX_SERVER_NAME_CHARS {
        return Err(invalid("name", format!("longer than {MAX_SERVER_NAME_CHARS} characters")));
    }
    if name.chars().any(char::is_control) {
        return Err(invalid("name", "must not contain control characters"));
    }
    Ok(())
}

fn parse_timeouts(value: Option<&Value>) -> Result<Timeouts, ConfigError> {
    let mut timeouts = Timeouts::default();
    let Some(value) = value else { return Ok(timeouts) };
    let Value::Object(object) = value else { return Err(invalid("timeouts", "must be an object")) };
    for (key, value) in object {
        let slot = match key.as_str() {
            "connectMs" => &mut timeouts.connect,
            "callMs" => &mut timeouts.call,
            _ => {
                return Err(ConfigError::UnknownKey {
                    key: format!("timeouts.{key}"),
                    allowed: TIMEOUT_KEYS.join(", "),
                });
            }
        };
        match value.as_u64() {
            Some(ms) if (1..=MAX_TIMEOUT_MS).contains(&ms) => *slot = Duration::from_millis(ms),
            _ => {
                return Err(invalid(
                    format!("timeouts.{key}"),
                    format!("must be an integer from 1 to {MAX_TIMEOUT_MS}"),
                ));
            }
        }
    }
    Ok(timeouts)
}

fn parse_stdio(object: &Map<String, Value>) -> Result<StdioConfig, ConfigError> {
    let command = match object.get("command") {
        None => return Err(ConfigError::Missing("command")),
        Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
        Some(_) => return Err(invalid("command", "must be a non-empty string")),
    };
    if command.contains('\0') {
        return Err(invalid("command", "must not contain NUL"));
    }
    if command.contains('/') && !Path::new(&command).is_absolute() {
        return Err(invalid("command", "a path must be absolute (or give a bare program name)"));
    }
    let args = match object.get("args") {
        None => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(s) if !s.contains('\0') => Ok(s.clone()),
                _ => Err(invalid("args", "must be an array of strings")),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(invalid("args", "must be an array of strings")),
    };
    let env = string_map(object.get("env"), "env")?;
    for (name, value) in &env {
        check_env_name("env", name)?;
        if value.contains('\0') {
            return Err(invalid(format!("env.{name}"), "must not contain NUL"));
        }
    }
    let env_passthrough = match object.get("envPassthrough") {
        None => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => check_env_name("envPassthrough", s).map(|()| s.clone()),
                _ => Err(invalid("envPassthrough", "must be an array of variable names")),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(invalid("envPassthrough", "must be an array of variable names")),
    };
    let cwd = match object.get("cwd") {
        None => None,
        Some(Value::String(s)) if Path::new(s).is_absolute() => Some(PathBuf::from(s)),
        Some(_) => return Err(invalid("cwd", "must be an absolute path")),
    };
    Ok(StdioConfig { command, args, env, env_passthrough, cwd })
}

fn parse_http(object: &Map<String, Value>) -> Result<HttpConfig, ConfigError> {
    let url = match object.get("url") {
        None => return Err(ConfigError::Missing("url")),
        Some(Value::String(s)) => s.trim().to_owned(),
        Some(_) => return Err(invalid("url", "must be a string")),
    };
    let uri: http::Uri = url.parse().map_err(|e| invalid("url", format!("not a URL: {e}")))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
        return Err(invalid("url", "must be an http:// or https:// URL with a host"));
    }
    if uri.authority().is_some_and(|authority| authority.as_str().contains('@')) {
        return Err(invalid("url", "must not carry credentials (user:password@); use `bearerTokenEnv`"));
    }
    let headers = string_map(object.get("headers"), "headers")?;
    for (name, value) in &headers {
        let parsed = http::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| invalid(format!("headers.{name}"), "not a valid header name"))?;
        if looks_secret(name) {
            return Err(ConfigError::SecretHeader(name.clone()));
        }
        if RESERVED_HEADERS.contains(&parsed.as_str()) {
            return Err(invalid(format!("headers.{name}"), "is set by the MCP transport itself"));
        }
        http::HeaderValue::from_str(value)
            .map_err(|_| invalid(format!("headers.{name}"), "not a valid header value"))?;
    }
    let bearer_token_env = match object.get("bearerTokenEnv") {
        None => None,
        Some(Value::String(s)) => {
            check_env_name("bearerTokenEnv", s)?;
            Some(s.clone())
        }
        Some(_) => return Err(invalid("bearerTokenEnv", "must be the name of an environment variable")),
    };
    Ok(HttpConfig { url, headers, bearer_token_env })
}

/// Header names that carry credentials: `Authorization`, and anything named like a token, an API
/// key, a secret, a password or a cookie.
fn looks_secret(header: &str) -> bool {
    let folded: String = header.chars().filter(|c| c.is_ascii_alphanumeric()).collect::<String>().to_ascii_lowercase();
    ["authorization", "token", "apikey", "secret", "password", "cookie"].iter().any(|word| folded.contains(word))
}

fn string_map(value: Option<&Value>, key: &str) -> Result<BTreeMap<String, String>, ConfigError> {
    let Some(value) = value else { return Ok(BTreeMap::new()) };
    let Value::Object(object) = value else { return Err(invalid(key, "must be an object of strings")) };
    object
        .iter()
        .map(|(k, v)| match v {
            Value::String(s) => Ok((k.clone(), s.clone())),
            _ => Err(invalid(format!("{key}.{k}"), "must be a string")),
        })
        .collect()
}

fn check_env_name(key: &str, name: &str) -> Result<(), ConfigError> {
    if name.is_empty() || name.contains('=') || name.contains('\0') {
        return Err(invalid(key, format!("`{name}` is not a valid environment variable name")));
    }
    Ok(())
}

/// Loads every `*.json` file directly in `dir` (name order; hidden files skipped; a symlink
/// leading out of the directory skipped). A missing directory yields nothing. Broken files and
/// duplicate server names become problems; the other files still load.
pub fn load_dir(dir: &Path) -> (Vec<McpServerConfig>, Vec<LoadProblem>) {
    let canonical_dir = match dir.canonicalize() {
        Ok(canonical) => canonical,
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "MCP server directory not readable; no MCP servers");
            return (Vec::new(), Vec::new());
        }
    };
    let entries = match std::fs::read_dir(&canonical_dir) {
        Ok(entries) => entries,
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "MCP server directory not readable; no MCP servers");
            return (Vec::new(), Vec::new());
        }
    };
    let mut paths: Vec<(String, PathBuf)> = entries
        .flatten()
        .filter_map(|entry| {
            let file_name = entry.file_name().to_str()?.to_owned();
            let wanted = !file_name.starts_with('.') && file_name.to_ascii_lowercase().ends_with(".json");
            wanted.then(|| (file_name, entry.path()))
        })
        .collect();
    paths.sort();

    let mut sources = Vec::new();
    let mut problems = Vec::new();
    for (file_name, path) in paths {
        let origin = path.display().to_string();
        let Ok(resolved) = path.canonicalize() else { continue };
        if !resolved.starts_with(&canonical_dir) {
            tracing::warn!(file = %origin, "skipping a symlink that leads out of the MCP server directory");
            continue;
        }
        match std::fs::metadata(&resolved) {
            Ok(meta) if !meta.is_file() => continue,
            Ok(meta) if meta.len() > MAX_FILE_BYTES => {
                problems.push(problem(&origin, format!("file skipped: larger than {MAX_FILE_BYTES} bytes")));
                continue;
            }
            Ok(_) => {}
            Err(e) => {
                problems.push(problem(&origin, format!("file skipped: {e}")));
                continue;
            }
        }
        match std::fs::read_to_string(&resolved) {
            Ok(text) => sources.push((file_name, origin, text, Some(path))),
            Err(e) => problems.push(problem(&origin, format!("file skipped: cannot read file: {e}"))),
        }
    }
    let (configs, more) = load_parsed(sources);
    problems.extend(more);
    (configs, problems)
}

/// Same rules as [`load_dir`] over `(file name, text)` pairs (embedded or generated files).
pub fn load_sources<N, T>(sources: impl IntoIterator<Item = (N, T)>) -> (Vec<McpServerConfig>, Vec<LoadProblem>)
where
    N: Into<String>,
    T: Into<String>,
{
    let mut sources: Vec<(String, String, String, Option<PathBuf>)> = sources
        .into_iter()
        .map(|(name, text)| {
            let name: String = name.into();
            (name.clone(), name, text.into(), None)
        })
        .filter(|(name, ..)| !name.starts_with('.') && name.to_ascii_lowercase().ends_with(".json"))
        .collect();
    sources.sort_by(|a, b| a.0.cmp(&b.0));
    load_parsed(sources)
}

fn load_parsed(sources: Vec<(String, String, String, Option<PathBuf>)>) -> (Vec<McpServerConfig>, Vec<LoadProblem>) {
    let mut configs: Vec<McpServerConfig> = Vec::new();
    let mut origins: BTreeMap<String, String> = BTreeMap::new();
    let mut problems = Vec::new();
    for (file_name, origin, text, path) in sources {
        let stem = &file_name[..file_name.len() - ".json".len()];
        match parse_server(stem, &text) {
            Ok(mut config) => {
                if let Some(first) = origins.get(&config.name) {
                    problems.push(problem(
                        &origin,
                        format!("file skipped: MCP server \"{}\" is already declared by {first}", config.name),
                    ));
                    continue;
                }
                origins.insert(config.name.clone(), origin);
                config.source = path;
                configs.push(config);
            }
            Err(e) => problems.push(problem(&origin, format!("file skipped: {e}"))),
        }
    }
    (configs, problems)
}

fn problem(file: &str, message: String) -> LoadProblem {
    tracing::warn!(file = %file, "MCP server file problem: {message}");
    LoadProblem { file: file.to_owned(), message }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<McpServerConfig, ConfigError> {
        parse_server("stem", text)
    }

    #[test]
    fn full_stdio_file() {
        let config = parse(
            r#"{"name": "github", "enabled": false, "transport": "stdio",
                "command": "/usr/bin/npx", "args": ["-y", "x"], "env": {"FOO": "bar"},
                "envPassthrough": ["HOME", "PATH"], "cwd": "/tmp",
                "startup": "boot", "timeouts": {"connectMs": 1500, "callMs": 2500}}"#,
        )
        .unwrap();
        assert_eq!(config.name, "github");
        assert!(!config.enabled);
        assert_eq!(config.startup, Startup::Boot);
        assert_eq!(
            config.timeouts,
            Timeouts { connect: Duration::from_millis(1500), call: Duration::from_millis(2500) }
        );
        let McpTransport::Stdio(stdio) = &config.transport else { panic!("stdio expected") };
        assert_eq!(stdio.command, "/usr/bin/npx");
        assert_eq!(stdio.args, ["-y", "x"]);
        assert_eq!(stdio.env.get("FOO").map(String::as_str), Some("bar"));
        assert_eq!(stdio.env_passthrough, ["HOME", "PATH"]);
        assert_eq!(stdio.cwd.as_deref(), Some(Path::new("/tmp")));
    }

    #[test]
    fn minimal_http_file_takes_defaults_and_the_file_stem() {
        let config = parse(
            r#"{"transport": "http", "url": "https://mcp.example.com/mcp",
            "headers": {"X-Team": "a"}, "bearerTokenEnv": "GITHUB_MCP_TOKEN"}"#,
        )
        .unwrap();
        assert_eq!(config.name, "stem");
        assert!(config.enabled);
        assert_eq!(config.startup, Startup::Lazy);
        assert_eq!(config.timeouts, Timeouts::default());
        let McpTransport::Http(http) = &config.transport else { panic!("http expected") };
        assert_eq!(http.url, "https://mcp.example.com/mcp");
        assert_eq!(http.headers.get("X-Team").map(String::as_str), Some("a"));
        assert_eq!(http.bearer_token_env.as_deref(), Some("GITHUB_MCP_TOKEN"));
    }

    #[test]
    fn unknown_and_misplaced_keys_are_rejected() {
        let err = parse(r#"{"transport": "stdio", "command": "/bin/x", "comand": 1}"#).unwrap_err();
        assert!(matches!(&err, ConfigError::UnknownKey { key, .. } if key == "comand"), "{err}");
        let err = parse(r#"{"transport": "http", "url": "http://h/", "command": "/bin/x"}"#).unwrap_err();
        assert_eq!(err, ConfigError::WrongTransport { key: "command".into(), transport: "http" });
        let err = parse(r#"{"transport": "stdio", "command": "/bin/x", "timeouts": {"readMs": 1}}"#).unwrap_err();
        assert!(matches!(&err, ConfigError::UnknownKey { key, .. } if key == "timeouts.readMs"), "{err}");
    }

    #[test]
    fn credentials_in_headers_point_to_bearer_token_env() {
        for header in ["Authorization", "X-Api-Key", "apiKey", "x-auth-token", "Cookie"] {
            let text =
                format!(r#"{{"transport": "http", "url": "https://h/mcp", "headers": {{"{header}": "s3cr3t"}}}}"#);
            let err = parse(&text).unwrap_err();
            assert_eq!(err, ConfigError::SecretHeader(header.to_owned()));
            assert!(err.to_string().contains("bearerTokenEnv"), "{err}");
            assert!(!err.to_string().contains("s3cr3t"));
        }
    }

    #[test]
    fn bad_values_are_rejected() {
        let cases = [
            r#"[]"#,
            r#"{"command": "/bin/x"}"#,
            r#"{"transport": "websocket"}"#,
            r#"{"transport": "stdio"}"#,
            r#"{"transport": "stdio", "command": ""}"#,
            r#"{"transport": "stdio", "command": "bin/x"}"#,
            r#"{"transport": "stdio", "command": "/bin/x", "args": "a b"}"#,
            r#"{"transport": "stdio", "command": "/bin/x", "env": {"A": 1}}"#,
            r#"{"transport": "stdio", "command": "/bin/x", "env": {"A=B": "c"}}"#,
            r#"{"transport": "stdio", "command": "/bin/x", "envPassthrough": "HOME"}"#,
            r#"{"transport": "stdio", "command": "/bin/x", "cwd": "rel"}"#,
            r#"{"transport": "stdio", "command": "/bin/x", "startup": "eager"}"#,
            r#"{"transport": "stdio", "command": "/bin/x", "enabled": "yes"}"#,
            r#"{"transport": "stdio", "command": "/bin/x", "timeouts": {"callMs": 0}}"#,
            r#"{"transport": "stdio", "command": "/bin/x", "timeouts": {"callMs": 1.5}}"#,
            r#"{"transport": "stdio", "command": "/bin/x", "name": ""}"#,
            r#"{"transport": "http"}"#,
            r#"{"transport": "http", "url": "ftp://h/x"}"#,
            r#"{"transport": "http", "url": "not a url"}"#,
            r#"{"transport": "http", "url": "https://user:pw@h/mcp"}"#,
            r#"{"transport": "http", "url": "http://h/", "headers": {"bad header": "x"}}"#,
            r#"{"transport": "http", "url": "http://h/", "headers": {"Accept": "x"}}"#,
            r#"{"transport": "http", "url": "http://h/", "bearerTokenEnv": ""}"#,
        ];
        for text in cases {
            assert!(parse(text).is_err(), "accepted: {text}");
        }
    }

    #[test]
    fn env_values_are_masked_in_debug_output() {
        let config = parse(r#"{"transport": "stdio", "command": "/bin/x", "env": {"TOKEN": "s3cr3t"}}"#).unwrap();
        let debug = format!("{config:?}");
        assert!(debug.contains("TOKEN=***"), "{debug}");
        assert!(!debug.contains("s3cr3t"), "{debug}");
    }

    #[test]
    fn a_broken_file_is_a_problem_and_the_others_load() {
        let (configs, problems) = load_sources([
            ("b.json", r#"{"transport": "stdio", "command": "/bin/b"}"#),
            ("a.json", r#"{"transport": "stdio", "command": "/bin/a", "oops": true}"#),
            ("c.json", r#"{"name": "b", "transport": "stdio", "command": "/bin/c"}"#),
            ("notes.txt", "ignored"),
            (".hidden.json", "ignored"),
        ]);
        assert_eq!(configs.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["b"]);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert_eq!(problems[0].file, "a.json");
        assert!(problems[0].message.contains("unknown key `oops`"), "{problems:?}");
        assert_eq!(problems[1].file, "c.json");
        assert!(problems[1].message.contains("already declared by b.json"), "{problems:?}");
    }

    #[test]
    fn load_dir_reads_json_files_in_name_order() {
        let dir = std::env::temp_dir().join(format!("agw-mcp-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("zeta.json"), r#"{"transport": "http", "url": "http://127.0.0.1:1/mcp"}"#).unwrap();
        std::fs::write(dir.join("alpha.JSON"), r#"{"transport": "stdio", "command": "/bin/true"}"#).unwrap();
        std::fs::write(dir.join("broken.json"), "{").unwrap();
        let (configs, problems) = load_dir(&dir);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(configs.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["alpha", "zeta"]);
        assert!(configs[0].source.as_ref().is_some_and(|p| p.ends_with("alpha.JSON")));
        assert_eq!(problems.len(), 1);
        assert!(problems[0].file.ends_with("broken.json"));
        assert!(problems[0].message.starts_with("file skipped: not a JSON object"), "{problems:?}");
    }

    #[test]
    fn missing_directory_loads_nothing() {
        let (configs, problems) = load_dir(Path::new("/definitely/not/here/agw-mcp"));
        assert!(configs.is_empty() && problems.is_empty());
    }
}
