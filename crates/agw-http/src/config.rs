//! Settings: an optional TOML file, overridden by environment variables.
//!
//! Every setting is declared once in [`SETTINGS`] with its property path (the TOML table path,
//! mirroring `config.md`), its environment variable and its default. Loading, `--help` text and
//! validation all read that table, so a setting cannot exist in one place and not the others.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use agw_llm::{ProviderConfig, ProviderProtocol};
use agw_memory::{FsyncPolicy, MemoryConfig};
use agw_tools::sandbox::{Limits, SLOTS, SandboxConfig};

use crate::webhook::WebhookConfig;
use http::{HeaderName, Method};

use crate::auth::{AuthSettings, JwksSettings, JwksSource, KeyProblem, LocalPublicKey};
use crate::cors::CorsConfig;

/// One documented setting.
#[derive(Debug, Clone, Copy)]
pub struct SettingSpec {
    /// Dotted property path; in TOML the last segment is the key of the table named by the rest.
    pub property: &'static str,
    pub env: &'static str,
    pub default: Option<&'static str>,
    pub help: &'static str,
}

/// Every setting agw reads (providers are documented separately: `agent.providers.<key>.*`).
pub const SETTINGS: &[SettingSpec] = &[
    SettingSpec { property: "server.port", env: "SERVER_PORT", default: Some("8080"), help: "HTTP port" },
    SettingSpec {
        property: "server.address",
        env: "SERVER_ADDRESS",
        default: None,
        help: "listen address; default 0.0.0.0 when auth is enforced, else 127.0.0.1 (a non-loopback address without auth needs AGENT_AUTH_ENABLED=false)",
    },
    SettingSpec {
        property: "server.max-request-bytes",
        env: "SERVER_MAX_REQUEST_BYTES",
        default: Some("1048576"),
        help: "largest accepted request body; larger bodies get 413 before they are read",
    },
    SettingSpec {
        property: "agent.auth.enabled",
        env: "AGENT_AUTH_ENABLED",
        default: None,
        help: "JWT auth on /api/ap/** (except OPTIONS) is on whenever a key source is configured; false turns it off and allows a non-loopback address without it",
    },
    SettingSpec {
        property: "agent.auth.local-public-key",
        env: "AGENT_AUTH_LOCAL_PUBLIC_KEY",
        default: None,
        help: "RSA public key (PEM -----BEGIN PUBLIC KEY-----, >= 2048 bits) tried first to verify tokens",
    },
    SettingSpec {
        property: "agent.auth.local-public-key-file",
        env: "AGENT_AUTH_LOCAL_PUBLIC_KEY_FILE",
        default: None,
        help: "file holding agent.auth.local-public-key (set one or the other)",
    },
    SettingSpec {
        property: "agent.auth.jwks-uri",
        env: "AGENT_AUTH_JWKS_URI",
        default: None,
        help: "JWKS URL (http, https or file:); set together with issuer and jwks-cache-seconds",
    },
    SettingSpec {
        property: "agent.auth.issuer",
        env: "AGENT_AUTH_ISSUER",
        default: None,
        help: "required exact `iss` claim; set together with jwks-uri and jwks-cache-seconds",
    },
    SettingSpec {
        property: "agent.auth.jwks-cache-seconds",
        env: "AGENT_AUTH_JWKS_CACHE_SECONDS",
        default: None,
        help: "JWKS cache lifetime, > 0 (at least 30 s is used); an unknown kid refetches sooner",
    },
    SettingSpec {
        property: "agw.auth.jwks-refetch-interval",
        env: "AGW_AUTH_JWKS_REFETCH_INTERVAL",
        default: Some("5s"),
        help: "least time between two JWKS fetches (bounds refetches caused by unknown kids and failed fetches)",
    },
    SettingSpec {
        property: "agent.cors.path-pattern",
        env: "AGENT_CORS_PATH_PATTERN",
        default: Some("/api/ap/**"),
        help: "paths CORS applies to (** any segments, * within one)",
    },
    SettingSpec {
        property: "agent.cors.allowed-origin-patterns",
        env: "AGENT_CORS_ALLOWED_ORIGIN_PATTERNS",
        default: Some("http://localhost:*"),
        help: "allowed Origin patterns, comma-separated; * matches anything, :[*] / :[80,8080] ports",
    },
    SettingSpec {
        property: "agent.cors.allowed-methods",
        env: "AGENT_CORS_ALLOWED_METHODS",
        default: Some("GET,POST,PUT,PATCH,DELETE,OPTIONS"),
        help: "methods cross-origin requests may use (* = any)",
    },
    SettingSpec {
        property: "agent.cors.allowed-headers",
        env: "AGENT_CORS_ALLOWED_HEADERS",
        default: Some("*"),
        help: "request headers a preflight may ask for (* = any, echoed back)",
    },
    SettingSpec {
        property: "agent.cors.exposed-headers",
        env: "AGENT_CORS_EXPOSED_HEADERS",
        default: Some("Content-Type"),
        help: "Access-Control-Expose-Headers of cross-origin responses (empty in the config file = none)",
    },
    SettingSpec {
        property: "agent.cors.allow-credentials",
        env: "AGENT_CORS_ALLOW_CREDENTIALS",
        default: Some("false"),
        help: "send Access-Control-Allow-Credentials: true",
    },
    SettingSpec {
        property: "agent.cors.max-age-seconds",
        env: "AGENT_CORS_MAX_AGE_SECONDS",
        default: Some("3600"),
        help: "Access-Control-Max-Age of preflight responses",
    },
    SettingSpec {
        property: "agent.catalog.external-dir",
        env: "AGENT_EXTERNAL_DIR",
        default: None,
        help: "directory of agent JSON files; unset = the bundled demo agents",
    },
    SettingSpec {
        property: "agent.capability.tools-external-dir",
        env: "AGENT_TOOLS_EXTERNAL_DIR",
        default: None,
        help: "directory of *.backend / *.frontend / *.action tool files; unset = the bundled tools",
    },
    SettingSpec {
        property: "agent.viewport.external-dir",
        env: "AGENT_VIEWPORT_EXTERNAL_DIR",
        default: None,
        help: "directory of viewports (.html .qlc .dqlc .json_schema .custom); unset = the bundled viewports",
    },
    SettingSpec {
        property: "agent.data.external-dir",
        env: "AGENT_DATA_EXTERNAL_DIR",
        default: Some("data"),
        help: "flat directory served by GET /api/ap/data/{filename}",
    },
    SettingSpec {
        property: "agent.tools.frontend.submit-timeout-ms",
        env: "AGENT_TOOLS_FRONTEND_SUBMIT_TIMEOUT_MS",
        default: Some("300000"),
        help: "how long a frontend tool waits for POST /api/ap/submit (also tool.start toolTimeout)",
    },
    SettingSpec {
        property: "agw.tools.max-output-bytes",
        env: "AGW_TOOLS_MAX_OUTPUT_BYTES",
        default: Some("51200"),
        help: "tool results longer than this are cut on a UTF-8 boundary with a notice to the model",
    },
    SettingSpec {
        property: "agent.tools.bash.working-directory",
        env: "AGENT_BASH_WORKING_DIRECTORY",
        default: None,
        help: "_bash_ working directory and first allowed root; unset = the process working directory",
    },
    SettingSpec {
        property: "agent.tools.bash.allowed-paths",
        env: "AGENT_BASH_ALLOWED_PATHS",
        default: None,
        help: "extra roots _bash_ may touch (comma-separated)",
    },
    SettingSpec {
        property: "agent.tools.bash.allowed-commands",
        env: "AGENT_BASH_ALLOWED_COMMANDS",
        default: None,
        help: "commands _bash_ may run (comma-separated); empty = ls,pwd,cat,head,tail,top,free,df,git",
    },
    SettingSpec {
        property: "agent.tools.bash.path-checked-commands",
        env: "AGENT_BASH_PATH_CHECKED_COMMANDS",
        default: None,
        help: "commands whose arguments must stay inside the allowed roots; empty = ls,cat,head,tail,git",
    },
    SettingSpec {
        property: "agent.tools.agent-file-create.default-system-prompt",
        env: "AGENT_TOOLS_AGENT_FILE_CREATE_DEFAULT_SYSTEM_PROMPT",
        default: None,
        help: "system prompt agent_file_create writes when none is given",
    },
    SettingSpec {
        property: "memory.chat.dir",
        env: "MEMORY_CHAT_DIR",
        default: Some("./chats"),
        help: "chat history files (<chatId>.json) and the chat index (_chats.jsonl)",
    },
    SettingSpec {
        property: "memory.chat.k",
        env: "MEMORY_CHAT_K",
        default: Some("20"),
        help: "how many of a chat's latest runs are sent back to the model (history on disk is never trimmed)",
    },
    SettingSpec {
        property: "memory.chat.action-tools",
        env: "MEMORY_CHAT_ACTION_TOOLS",
        default: None,
        help: "tool names persisted with _actionId instead of _toolId (comma-separated)",
    },
    SettingSpec {
        property: "memory.chat.fsync",
        env: "MEMORY_CHAT_FSYNC",
        default: Some("run"),
        help: "when history is fsynced: never | step (after every step) | run (when a run ends)",
    },
    SettingSpec {
        property: "agw.memory.enabled",
        env: "AGW_MEMORY_ENABLED",
        default: Some("true"),
        help: "chat memory: false = no history files, no chat index, no history sent back to the model",
    },
    SettingSpec {
        property: "server.shutdown-grace-ms",
        env: "SERVER_SHUTDOWN_GRACE_MS",
        default: Some("10000"),
        help: "on SIGTERM/SIGINT, how long in-flight runs may finish before they end with run.error",
    },
    SettingSpec {
        property: "agent.catalog.refresh-interval-ms",
        env: "AGENT_REFRESH_INTERVAL_MS",
        default: Some("10000"),
        help: "periodic rescan of the agents directory (file events reload at once)",
    },
    SettingSpec {
        property: "agent.capability.refresh-interval-ms",
        env: "AGENT_CAPABILITY_REFRESH_INTERVAL_MS",
        default: Some("30000"),
        help: "periodic rescan of the tools directory",
    },
    SettingSpec {
        property: "agent.viewport.refresh-interval-ms",
        env: "AGENT_VIEWPORT_REFRESH_INTERVAL_MS",
        default: Some("30000"),
        help: "periodic rescan of the viewports directory",
    },
    SettingSpec {
        property: "agent.skill.external-dir",
        env: "AGENT_SKILL_EXTERNAL_DIR",
        default: None,
        help: "skills root (skills/<id>/SKILL.md + scripts); unset = the bundled skills, unpacked to a temp directory",
    },
    SettingSpec {
        property: "agent.skill.refresh-interval-ms",
        env: "AGENT_SKILL_REFRESH_INTERVAL_MS",
        default: Some("30000"),
        help: "periodic rescan of the skills directory",
    },
    SettingSpec {
        property: "agent.skill.max-prompt-chars",
        env: "AGENT_SKILL_MAX_PROMPT_CHARS",
        default: Some("8000"),
        help: "skill instructions longer than this are truncated in prompts (0 = unlimited)",
    },
    SettingSpec {
        property: "agw.resources.sync-bundled",
        env: "AGW_RESOURCES_SYNC_BUNDLED",
        default: Some("true"),
        help: "copy the bundled demo agents/tools/viewports/skills into configured directories (never overwrites)",
    },
    SettingSpec {
        property: "agent.llm.interaction-log.enabled",
        env: "AGENT_LLM_INTERACTION_LOG_ENABLED",
        default: Some("true"),
        help: "log every LLM request, delta and response at debug level (target agw::llm)",
    },
    SettingSpec {
        property: "agent.llm.interaction-log.mask-sensitive",
        env: "AGENT_LLM_INTERACTION_LOG_MASK_SENSITIVE",
        default: Some("true"),
        help: "mask API keys, tokens, passwords and Bearer values in the interaction log",
    },
    SettingSpec {
        property: "agent.chat-event-callback.enabled",
        env: "AGENT_CHAT_EVENT_CALLBACK_ENABLED",
        default: Some("true"),
        help: "POST a signed chat event at each run's first content delta",
    },
    SettingSpec {
        property: "agent.chat-event-callback.url",
        env: "AGENT_CHAT_EVENT_CALLBACK_URL",
        default: Some("http://127.0.0.1:38080/api/app/internal/chat-events"),
        help: "chat event webhook URL",
    },
    SettingSpec {
        property: "agent.chat-event-callback.secret",
        env: "AGENT_CHAT_EVENT_CALLBACK_SECRET",
        default: Some("change-me"),
        help: "HMAC-SHA256 secret of the X-AGENT-Signature header",
    },
    SettingSpec {
        property: "agent.chat-event-callback.connect-timeout-ms",
        env: "AGENT_CHAT_EVENT_CALLBACK_CONNECT_TIMEOUT_MS",
        default: Some("1000"),
        help: "webhook connect timeout (min 100)",
    },
    SettingSpec {
        property: "agent.chat-event-callback.request-timeout-ms",
        env: "AGENT_CHAT_EVENT_CALLBACK_REQUEST_TIMEOUT_MS",
        default: Some("1500"),
        help: "webhook request timeout (min 200)",
    },
    SettingSpec {
        property: "agw.sse.heartbeat-interval",
        env: "AGW_SSE_HEARTBEAT_INTERVAL",
        default: Some("15s"),
        help: "period of `event:heartbeat` frames on open streams (e.g. 15s, 500ms)",
    },
    SettingSpec {
        property: "agw.demo.enabled",
        env: "AGW_DEMO_ENABLED",
        default: Some("true"),
        help: "register the embedded offline demo model as provider `demo` (a configured real `demo` provider replaces it)",
    },
    SettingSpec {
        property: "agw.demo.chunk-delay-ms",
        env: "AGW_DEMO_CHUNK_DELAY_MS",
        default: Some("40"),
        help: "delay between the demo model's chunks",
    },
    SettingSpec {
        property: "agw.sandbox.allow-unconfined",
        env: "AGW_SANDBOX_ALLOW_UNCONFINED",
        default: Some("false"),
        help: "run _bash_ and _skill_run_script_ even when the kernel lacks Landlock or seccomp (unconfined; not recommended); false refuses them",
    },
    SettingSpec {
        property: "agw.sandbox.cpu-seconds",
        env: "AGW_SANDBOX_CPU_SECONDS",
        default: Some("60"),
        help: "CPU time limit of each model-started process (0 = none)",
    },
    SettingSpec {
        property: "agw.sandbox.memory-mib",
        env: "AGW_SANDBOX_MEMORY_MIB",
        default: Some("1024"),
        help: "address-space limit of each model-started process, MiB (0 = none)",
    },
    SettingSpec {
        property: "agw.sandbox.file-size-mib",
        env: "AGW_SANDBOX_FILE_SIZE_MIB",
        default: Some("64"),
        help: "largest file a model-started process may write, MiB (0 = none)",
    },
    SettingSpec {
        property: "agw.sandbox.max-processes",
        env: "AGW_SANDBOX_MAX_PROCESSES",
        default: Some("64"),
        help: "processes and threads of one sandboxed call (applies when agw runs as root; 0 = none)",
    },
    SettingSpec {
        property: "agw.sandbox.uid-base",
        env: "AGW_SANDBOX_UID_BASE",
        default: Some("1900000000"),
        help: "when agw runs as root, each sandboxed call runs as uid/gid uid-base + n (n < 256); no account may use these ids",
    },
];

/// A configuration problem, always naming the setting.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("config file {path} is not valid TOML: {message}")]
    Toml { path: String, message: String },
    #[error("setting {property} ({env}): {message}")]
    Invalid { property: &'static str, env: &'static str, message: String },
    #[error("provider {key}: {message}")]
    Provider { key: String, message: String },
    /// An `agent.auth.*` problem; the message names the settings involved (http-api.md §9).
    #[error("{message}")]
    Auth { message: String },
}

/// Typed settings of the server.
#[derive(Debug, Clone)]
pub struct Settings {
    pub port: u16,
    pub address: IpAddr,
    pub max_request_bytes: usize,
    /// `agent.auth.*`: key sources, validated; [`AuthSettings::enforced`] says whether auth is on.
    pub auth: AuthSettings,
    pub cors: CorsConfig,
    pub agents_dir: Option<PathBuf>,
    pub tools_dir: Option<PathBuf>,
    pub viewports_dir: Option<PathBuf>,
    pub data_dir: PathBuf,
    pub frontend_submit_timeout: Duration,
    pub tool_output_limit: usize,
    pub bash_working_directory: Option<PathBuf>,
    pub bash_allowed_paths: Vec<String>,
    pub bash_allowed_commands: Vec<String>,
    pub bash_path_checked_commands: Vec<String>,
    pub agent_file_default_prompt: Option<String>,
    pub memory: MemoryConfig,
    /// `agw.memory.enabled`: false runs every query without chat memory (stateless gateway).
    pub memory_enabled: bool,
    pub heartbeat_interval: Duration,
    pub demo_enabled: bool,
    pub demo_chunk_delay: Duration,
    pub providers: Vec<ProviderConfig>,
    pub shutdown_grace: Duration,
    pub agents_refresh: Duration,
    pub tools_refresh: Duration,
    pub viewports_refresh: Duration,
    pub skills_dir: Option<PathBuf>,
    pub skills_refresh: Duration,
    pub skill_max_prompt_chars: usize,
    pub sync_bundled: bool,
    pub interaction_log: bool,
    pub interaction_log_mask: bool,
    pub webhook: WebhookConfig,
    /// `agw.sandbox.*`: confinement of `_bash_` and `_skill_run_script_` processes.
    pub sandbox: SandboxConfig,
}

impl Settings {
    /// Reads `config_file` (if any), then the environment `env` (pass `std::env::vars()`).
    pub fn load(
        config_file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        let table = match config_file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|source| ConfigError::Read { path: path.display().to_string(), source })?;
                text.parse::<toml::Table>()
                    .map_err(|e| ConfigError::Toml { path: path.display().to_string(), message: e.to_string() })?
            }
            None => toml::Table::new(),
        };
        // Empty environment values count as unset (config.md §5).
        let env: HashMap<String, String> = env.into_iter().filter(|(_, v)| !v.trim().is_empty()).collect();
        let raw = RawSettings { table: &table, env: &env };

        let auth = auth_settings(&raw)?;
        // Auth on → every interface by default; auth off → loopback unless the operator sets an
        // address (and a non-loopback one needs the explicit AGENT_AUTH_ENABLED=false).
        let address = match raw.parse_opt("server.address", |s| s.parse::<IpAddr>().map_err(|e| e.to_string()))? {
            Some(addr) => addr,
            None if auth.enforced() => IpAddr::from([0, 0, 0, 0]),
            None => IpAddr::from([127, 0, 0, 1]),
        };
        if !address.is_loopback() && !auth.enforced() && auth.enabled != Some(false) {
            return Err(ConfigError::Invalid {
                property: "server.address",
                env: "SERVER_ADDRESS",
                message: format!(
                    "{address} is not a loopback address and no auth key source is configured; configure agent.auth.local-public-key or agent.auth.jwks-uri, or set AGENT_AUTH_ENABLED=false to serve without auth"
                ),
            });
        }
        Ok(Settings {
            port: raw.parse("server.port", |s| s.parse::<u16>().map_err(|e| e.to_string()))?,
            address,
            max_request_bytes: raw
                .parse("server.max-request-bytes", |s| s.parse::<usize>().map_err(|e| e.to_string()))?,
            auth,
            cors: cors_settings(&raw)?,
            agents_dir: raw.parse_opt("agent.catalog.external-dir", |s| Ok(PathBuf::from(s)))?,
            tools_dir: raw.parse_opt("agent.capability.tools-external-dir", |s| Ok(PathBuf::from(s)))?,
            viewports_dir: raw.parse_opt("agent.viewport.external-dir", |s| Ok(PathBuf::from(s)))?,
            data_dir: raw.parse("agent.data.external-dir", |s| Ok(PathBuf::from(s)))?,
            frontend_submit_timeout: Duration::from_millis(
                raw.parse("agent.tools.frontend.submit-timeout-ms", |s| s.parse::<u64>().map_err(|e| e.to_string()))?
                    .max(1),
            ),
            tool_output_limit: raw
                .parse("agw.tools.max-output-bytes", |s| s.parse::<usize>().map_err(|e| e.to_string()))?,
            bash_working_directory: raw.parse_opt("agent.tools.bash.working-directory", |s| Ok(PathBuf::from(s)))?,
            bash_allowed_paths: raw.parse_opt("agent.tools.bash.allowed-paths", list)?.unwrap_or_default(),
            bash_allowed_commands: raw.parse_opt("agent.tools.bash.allowed-commands", list)?.unwrap_or_default(),
            bash_path_checked_commands: raw
                .parse_opt("agent.tools.bash.path-checked-commands", list)?
                .unwrap_or_default(),
            agent_file_default_prompt: raw
                .parse_opt("agent.tools.agent-file-create.default-system-prompt", |s| Ok(s.to_string()))?,
            memory: MemoryConfig {
                dir: raw.parse("memory.chat.dir", |s| Ok(PathBuf::from(s)))?,
                k: raw.parse("memory.chat.k", |s| s.parse::<usize>().map_err(|e| e.to_string()))?.max(1),
                fsync: raw.parse("memory.chat.fsync", |s| match s.trim().to_ascii_lowercase().as_str() {
                    "never" => Ok(FsyncPolicy::Never),
                    "step" => Ok(FsyncPolicy::EveryStep),
                    "run" => Ok(FsyncPolicy::EveryRun),
                    _ => Err("expected never, step or run".into()),
                })?,
                action_tools: raw
                    .parse_opt("memory.chat.action-tools", list)?
                    .unwrap_or_default()
                    .into_iter()
                    .map(|t| t.to_lowercase())
                    .collect(),
            },
            memory_enabled: raw.parse("agw.memory.enabled", parse_bool)?,
            heartbeat_interval: raw.parse("agw.sse.heartbeat-interval", parse_duration)?,
            demo_enabled: raw.parse("agw.demo.enabled", parse_bool)?,
            demo_chunk_delay: Duration::from_millis(
                raw.parse("agw.demo.chunk-delay-ms", |s| s.parse::<u64>().map_err(|e| e.to_string()))?,
            ),
            providers: providers(&table, &env)?,
            shutdown_grace: Duration::from_millis(raw.parse("server.shutdown-grace-ms", parse_u64)?),
            agents_refresh: Duration::from_millis(raw.parse("agent.catalog.refresh-interval-ms", parse_u64)?),
            tools_refresh: Duration::from_millis(raw.parse("agent.capability.refresh-interval-ms", parse_u64)?),
            viewports_refresh: Duration::from_millis(raw.parse("agent.viewport.refresh-interval-ms", parse_u64)?),
            skills_dir: raw.parse_opt("agent.skill.external-dir", |s| Ok(PathBuf::from(s)))?,
            skills_refresh: Duration::from_millis(raw.parse("agent.skill.refresh-interval-ms", parse_u64)?),
            // Negative means unlimited like 0 (config.md §2).
            skill_max_prompt_chars: raw
                .parse("agent.skill.max-prompt-chars", |s| s.trim().parse::<i64>().map_err(|e| e.to_string()))?
                .max(0) as usize,
            sync_bundled: raw.parse("agw.resources.sync-bundled", parse_bool)?,
            interaction_log: raw.parse("agent.llm.interaction-log.enabled", parse_bool)?,
            interaction_log_mask: raw.parse("agent.llm.interaction-log.mask-sensitive", parse_bool)?,
            webhook: WebhookConfig {
                enabled: raw.parse("agent.chat-event-callback.enabled", parse_bool)?,
                url: raw.parse("agent.chat-event-callback.url", |s| Ok(s.to_string()))?,
                secret: raw.parse("agent.chat-event-callback.secret", |s| Ok(s.to_string()))?,
                connect_timeout: Duration::from_millis(
                    raw.parse("agent.chat-event-callback.connect-timeout-ms", parse_u64)?,
                ),
                request_timeout: Duration::from_millis(
                    raw.parse("agent.chat-event-callback.request-timeout-ms", parse_u64)?,
                ),
            },
            sandbox: sandbox_settings(&raw)?,
        })
    }
}

/// `agw.sandbox.*`; what the kernel supports is probed, not configured.
fn sandbox_settings(raw: &RawSettings) -> Result<SandboxConfig, ConfigError> {
    Ok(SandboxConfig {
        limits: Limits {
            cpu_seconds: raw.parse("agw.sandbox.cpu-seconds", parse_u64)?,
            memory_mib: raw.parse("agw.sandbox.memory-mib", parse_u64)?,
            file_size_mib: raw.parse("agw.sandbox.file-size-mib", parse_u64)?,
            processes: raw.parse("agw.sandbox.max-processes", parse_u64)?,
        },
        allow_unconfined: raw.parse("agw.sandbox.allow-unconfined", parse_bool)?,
        uid_base: raw.parse("agw.sandbox.uid-base", |s| {
            let base = s.trim().parse::<u32>().map_err(|e| e.to_string())?;
            // Root's ids, and ids whose range would wrap, can never be a sandbox identity.
            if base == 0 || base.checked_add(SLOTS).is_none() {
                return Err(format!("expected 1..={}", u32::MAX - SLOTS));
            }
            Ok(base)
        })?,
        ..SandboxConfig::default()
    })
}

/// `agent.auth.*`, checked as http-api.md §9 says: a key setting that is present but unusable
/// refuses startup with a message naming it.
fn auth_settings(raw: &RawSettings) -> Result<AuthSettings, ConfigError> {
    const TOGETHER: &str =
        "agent.auth.jwks-uri, agent.auth.issuer and agent.auth.jwks-cache-seconds must be configured together";
    let fail = |message: String| ConfigError::Auth { message };
    let enabled = raw.parse_opt("agent.auth.enabled", parse_bool)?;

    let inline = raw.text("agent.auth.local-public-key");
    let file = raw.text("agent.auth.local-public-key-file").filter(|p| !p.trim().is_empty());
    let (pem, from) = match (inline, file) {
        (Some(_), Some(_)) => {
            return Err(fail(
                "set only one of agent.auth.local-public-key (AGENT_AUTH_LOCAL_PUBLIC_KEY) and agent.auth.local-public-key-file (AGENT_AUTH_LOCAL_PUBLIC_KEY_FILE)".into(),
            ));
        }
        (Some(pem), None) => (Some(pem), "agent.auth.local-public-key / AGENT_AUTH_LOCAL_PUBLIC_KEY".to_string()),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path.trim()).map_err(|e| {
                fail(format!(
                    "agent.auth.local-public-key-file (AGENT_AUTH_LOCAL_PUBLIC_KEY_FILE): cannot read {:?}: {e}",
                    path.trim()
                ))
            })?;
            (Some(text), format!("agent.auth.local-public-key-file {:?}", path.trim()))
        }
        (None, None) => (None, String::new()),
    };
    let local_public_key = match pem {
        None => None,
        Some(pem) => Some(LocalPublicKey::from_pem(&pem).map_err(|problem| match problem {
            KeyProblem::Blank => fail(format!("agent.auth.local-public-key cannot be blank (from {from})")),
            KeyProblem::Invalid(why) => {
                fail(format!("agent.auth.local-public-key is not a valid PEM RSA public key (from {from}): {why}"))
            }
        })?),
    };

    let uri = raw.text("agent.auth.jwks-uri").filter(|v| !v.trim().is_empty());
    let issuer = raw.text("agent.auth.issuer").filter(|v| !v.trim().is_empty());
    let cache = raw.text("agent.auth.jwks-cache-seconds").filter(|v| !v.trim().is_empty());
    let jwks = match (uri, issuer, cache) {
        (None, None, None) => None,
        (Some(uri), Some(issuer), Some(cache)) => {
            let cache_seconds = match cache.trim().parse::<i64>() {
                Ok(n) if n > 0 => n as u64,
                Ok(_) => {
                    return Err(fail(format!(
                        "agent.auth.jwks-cache-seconds must be greater than 0 (AGENT_AUTH_JWKS_CACHE_SECONDS is {cache:?})"
                    )));
                }
                Err(_) => {
                    return Err(fail(format!(
                        "agent.auth.jwks-cache-seconds (AGENT_AUTH_JWKS_CACHE_SECONDS): {cache:?} is not a whole number of seconds"
                    )));
                }
            };
            let source = JwksSource::parse(uri.trim())
                .map_err(|e| fail(format!("agent.auth.jwks-uri (AGENT_AUTH_JWKS_URI): {e}")))?;
            Some(JwksSettings { source, issuer, cache_seconds })
        }
        (uri, issuer, cache) => {
            let missing: Vec<&str> = [
                (uri.is_none(), "agent.auth.jwks-uri (AGENT_AUTH_JWKS_URI)"),
                (issuer.is_none(), "agent.auth.issuer (AGENT_AUTH_ISSUER)"),
                (cache.is_none(), "agent.auth.jwks-cache-seconds (AGENT_AUTH_JWKS_CACHE_SECONDS)"),
            ]
            .into_iter()
            .filter_map(|(missing, name)| missing.then_some(name))
            .collect();
            return Err(fail(format!("{TOGETHER}; missing: {}", missing.join(", "))));
        }
    };
    let settings = AuthSettings {
        enabled,
        local_public_key,
        jwks,
        jwks_refetch_interval: raw.parse("agw.auth.jwks-refetch-interval", parse_duration)?,
    };
    if enabled == Some(true) && !settings.has_key_source() {
        return Err(fail(
            "agent.auth.enabled (AGENT_AUTH_ENABLED) is true but no key source is configured: set agent.auth.local-public-key (AGENT_AUTH_LOCAL_PUBLIC_KEY / AGENT_AUTH_LOCAL_PUBLIC_KEY_FILE) or agent.auth.jwks-uri (AGENT_AUTH_JWKS_URI)".into(),
        ));
    }
    Ok(settings)
}

/// `agent.cors.*` (config.md §8; list items trimmed, blanks dropped).
fn cors_settings(raw: &RawSettings) -> Result<CorsConfig, ConfigError> {
    let path_pattern = raw.parse("agent.cors.path-pattern", |s| {
        let s = s.trim();
        if s.starts_with('/') { Ok(s.to_string()) } else { Err("must start with /".into()) }
    })?;
    let header_list = |s: &str| {
        let items = list(s)?;
        match items.iter().find(|h| h.as_str() != "*" && HeaderName::from_bytes(h.as_bytes()).is_err()) {
            Some(bad) => Err(format!("{bad:?} is not a header name")),
            None => Ok(items),
        }
    };
    Ok(CorsConfig {
        path_pattern,
        allowed_origin_patterns: raw.parse_opt("agent.cors.allowed-origin-patterns", origin_list)?.unwrap_or_default(),
        allowed_methods: raw
            .parse_opt("agent.cors.allowed-methods", |s| {
                let items = list(s)?;
                match items.iter().find(|m| m.as_str() != "*" && Method::from_bytes(m.as_bytes()).is_err()) {
                    Some(bad) => Err(format!("{bad:?} is not an HTTP method")),
                    None => Ok(items.into_iter().map(|m| m.to_ascii_uppercase()).collect()),
                }
            })?
            .unwrap_or_default(),
        allowed_headers: raw.parse_opt("agent.cors.allowed-headers", header_list)?.unwrap_or_default(),
        exposed_headers: raw.parse_opt("agent.cors.exposed-headers", header_list)?.unwrap_or_default(),
        allow_credentials: raw.parse("agent.cors.allow-credentials", parse_bool)?,
        max_age_seconds: raw.parse("agent.cors.max-age-seconds", |s| s.parse::<u64>().map_err(|e| e.to_string()))?,
    })
}

struct RawSettings<'a> {
    table: &'a toml::Table,
    env: &'a HashMap<String, String>,
}

impl RawSettings<'_> {
    fn spec(property: &str) -> &'static SettingSpec {
        SETTINGS.iter().find(|s| s.property == property).expect("every property read is declared in SETTINGS")
    }

    fn value(&self, spec: &SettingSpec) -> Option<String> {
        if let Some(v) = self.env.get(spec.env) {
            return Some(v.trim().to_string());
        }
        toml_lookup(self.table, spec.property).or_else(|| spec.default.map(str::to_string))
    }

    /// The raw text of a setting (environment first, then the file, then the default).
    fn text(&self, property: &str) -> Option<String> {
        self.value(Self::spec(property))
    }

    fn parse_opt<T>(&self, property: &str, f: impl Fn(&str) -> Result<T, String>) -> Result<Option<T>, ConfigError> {
        let spec = Self::spec(property);
        self.value(spec)
            .map(|v| {
                f(&v).map_err(|message| ConfigError::Invalid {
                    property: spec.property,
                    env: spec.env,
                    message: format!("{v:?}: {message}"),
                })
            })
            .transpose()
    }

    fn parse<T>(&self, property: &str, f: impl Fn(&str) -> Result<T, String>) -> Result<T, ConfigError> {
        let spec = Self::spec(property);
        self.parse_opt(property, f)?.ok_or(ConfigError::Invalid {
            property: spec.property,
            env: spec.env,
            message: "missing".into(),
        })
    }
}

/// Scalar at a dotted path, rendered as a string.
fn toml_lookup(table: &toml::Table, property: &str) -> Option<String> {
    let mut parts = property.split('.').peekable();
    let mut current = table;
    while let Some(part) = parts.next() {
        let value = current.get(part)?;
        if parts.peek().is_none() {
            return match value {
                toml::Value::String(s) => Some(s.clone()),
                toml::Value::Integer(i) => Some(i.to_string()),
                toml::Value::Float(f) => Some(f.to_string()),
                toml::Value::Boolean(b) => Some(b.to_string()),
                // Lists may be TOML arrays or comma-separated strings, like the environment form.
                toml::Value::Array(items) => {
                    Some(items.iter().filter_map(|i| i.as_str().map(str::to_string)).collect::<Vec<_>>().join(","))
                }
                _ => None,
            };
        }
        current = value.as_table()?;
    }
    None
}

fn parse_u64(s: &str) -> Result<u64, String> {
    s.trim().parse::<u64>().map_err(|e| e.to_string())
}

/// Comma-separated list; items trimmed, blanks dropped.
fn list(s: &str) -> Result<Vec<String>, String> {
    Ok(s.split(',').map(str::trim).filter(|i| !i.is_empty()).map(str::to_string).collect())
}

/// Like [`list`], but a comma inside `[...]` (a port list, `http://localhost:[3000,5173]`) does
/// not split.
fn origin_list(s: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (i, c) in s.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    Ok(out.into_iter().map(str::trim).filter(|i| !i.is_empty()).map(str::to_string).collect())
}

fn parse_bool(s: &str) -> Result<bool, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err("expected true or false".into()),
    }
}

/// `15s`, `500ms`, `5m`, `1h`, or a bare number of milliseconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = s.find(|c: char| !c.is_ascii_digit()).map_or((s, ""), |i| s.split_at(i));
    let n: u64 = num.parse().map_err(|_| format!("invalid duration {s:?}"))?;
    let ms = match unit.trim() {
        "" | "ms" => n,
        "s" => n * 1000,
        "m" => n * 60_000,
        "h" => n * 3_600_000,
        other => return Err(format!("unknown duration unit {other:?} (use ms, s, m or h)")),
    };
    Ok(Duration::from_millis(ms))
}

/// Provider settings: `[agent.providers.<key>]` tables, then `AGENT_PROVIDERS_<KEY>_<FIELD>`
/// variables, merged per field so a file can hold the URL and the environment the secret.
fn providers(table: &toml::Table, env: &HashMap<String, String>) -> Result<Vec<ProviderConfig>, ConfigError> {
    const FIELDS: [(&str, &str); 4] =
        [("base-url", "_BASE_URL"), ("api-key", "_API_KEY"), ("model", "_MODEL"), ("protocol", "_PROTOCOL")];
    let mut merged: BTreeMap<String, HashMap<&str, String>> = BTreeMap::new();
    if let Some(tables) = table.get("agent").and_then(|a| a.get("providers")).and_then(|p| p.as_table()) {
        for (key, value) in tables {
            let Some(fields) = value.as_table() else {
                return Err(ConfigError::Provider { key: key.clone(), message: "must be a table".into() });
            };
            let entry = merged.entry(key.trim().to_lowercase()).or_default();
            for (field, _) in FIELDS {
                if let Some(v) = fields.get(field).and_then(|v| v.as_str()) {
                    entry.insert(field, v.to_string());
                }
            }
        }
    }
    for (name, value) in env {
        let Some(rest) = name.strip_prefix("AGENT_PROVIDERS_") else { continue };
        for (field, suffix) in FIELDS {
            if let Some(key) = rest.strip_suffix(suffix).filter(|k| !k.is_empty()) {
                merged.entry(key.to_lowercase()).or_default().insert(field, value.trim().to_string());
                break;
            }
        }
    }
    let mut out = Vec::new();
    for (key, fields) in merged {
        let protocol = match fields.get("protocol") {
            Some(p) => p
                .parse::<ProviderProtocol>()
                .map_err(|e| ConfigError::Provider { key: key.clone(), message: e.to_string() })?,
            None => ProviderProtocol::OpenAiCompatible,
        };
        let get = |f: &str| fields.get(f).cloned().unwrap_or_default();
        out.push(ProviderConfig {
            key,
            protocol,
            base_url: get("base-url"),
            api_key: get("api-key"),
            model: get("model"),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn defaults_without_file_or_env() {
        let s = Settings::load(None, env(&[])).unwrap();
        assert_eq!(s.port, 8080);
        assert_eq!(s.address, IpAddr::from([127, 0, 0, 1]));
        assert_eq!(s.max_request_bytes, 1 << 20);
        assert_eq!(s.heartbeat_interval, Duration::from_secs(15));
        assert!(s.demo_enabled);
        assert!(s.agents_dir.is_none());
        assert!(s.providers.is_empty());
    }

    #[test]
    fn sandbox_settings_and_their_defaults() {
        let s = Settings::load(None, env(&[])).unwrap();
        assert!(!s.sandbox.allow_unconfined, "refusing is the default");
        assert_eq!(s.sandbox.limits, Limits::default());
        assert_eq!(s.sandbox.uid_base, agw_tools::sandbox::DEFAULT_UID_BASE);
        assert_eq!(s.sandbox.support, agw_tools::sandbox::probe());
        let s = Settings::load(
            None,
            env(&[
                ("AGW_SANDBOX_ALLOW_UNCONFINED", "true"),
                ("AGW_SANDBOX_CPU_SECONDS", "5"),
                ("AGW_SANDBOX_MEMORY_MIB", "256"),
                ("AGW_SANDBOX_FILE_SIZE_MIB", "0"),
                ("AGW_SANDBOX_MAX_PROCESSES", "8"),
                ("AGW_SANDBOX_UID_BASE", "70000"),
            ]),
        )
        .unwrap();
        assert!(s.sandbox.allow_unconfined);
        assert_eq!(s.sandbox.limits, Limits { cpu_seconds: 5, memory_mib: 256, file_size_mib: 0, processes: 8 });
        assert_eq!(s.sandbox.uid_base, 70000);
        for bad in ["0", "-1", "4294967295"] {
            let err = Settings::load(None, env(&[("AGW_SANDBOX_UID_BASE", bad)])).unwrap_err().to_string();
            assert!(err.contains("agw.sandbox.uid-base"), "{err}");
        }
    }

    #[test]
    fn env_overrides_file_and_providers_merge_per_field() {
        let dir = std::env::temp_dir().join(format!("agw-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("agw.toml");
        std::fs::write(
            &file,
            "[server]\nport = 9000\n[agw.sse]\nheartbeat-interval = \"2s\"\n[agent.providers.bailian]\nbase-url = \"https://x/v1\"\nmodel = \"qwen\"\n",
        )
        .unwrap();
        let s = Settings::load(
            Some(&file),
            env(&[
                ("SERVER_PORT", "9100"),
                ("AGENT_PROVIDERS_BAILIAN_API_KEY", "sk-secret"),
                ("AGENT_PROVIDERS_MY_LAB_MODEL", "m"),
            ]),
        )
        .unwrap();
        assert_eq!(s.port, 9100);
        assert_eq!(s.heartbeat_interval, Duration::from_secs(2));
        let bailian = s.providers.iter().find(|p| p.key == "bailian").unwrap();
        assert_eq!(bailian.base_url, "https://x/v1");
        assert_eq!(bailian.api_key, "sk-secret");
        assert_eq!(bailian.model, "qwen");
        assert!(s.providers.iter().any(|p| p.key == "my_lab" && p.model == "m"));
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn invalid_values_name_the_setting() {
        let err = Settings::load(None, env(&[("SERVER_PORT", "eighty")])).unwrap_err().to_string();
        assert!(err.contains("server.port") && err.contains("SERVER_PORT"), "{err}");
        let err = Settings::load(None, env(&[("AGW_SSE_HEARTBEAT_INTERVAL", "5 parsecs")])).unwrap_err().to_string();
        assert!(err.contains("agw.sse.heartbeat-interval"), "{err}");
    }

    #[test]
    fn non_loopback_without_auth_needs_explicit_opt_out() {
        let err = Settings::load(None, env(&[("SERVER_ADDRESS", "0.0.0.0")])).unwrap_err().to_string();
        assert!(err.contains("AGENT_AUTH_ENABLED=false"), "{err}");
        // Explicitly off: still loopback by default (auth is not enforced), any address allowed.
        let s = Settings::load(None, env(&[("AGENT_AUTH_ENABLED", "false")])).unwrap();
        assert_eq!(s.address, IpAddr::from([127, 0, 0, 1]));
        assert!(!s.auth.enforced());
        let s = Settings::load(None, env(&[("AGENT_AUTH_ENABLED", "false"), ("SERVER_ADDRESS", "0.0.0.0")])).unwrap();
        assert_eq!(s.address, IpAddr::from([0, 0, 0, 0]));
    }

    #[test]
    fn jwks_source_turns_auth_on_and_listens_everywhere() {
        let jwks = [
            ("AGENT_AUTH_JWKS_URI", "https://idp.example/jwks.json"),
            ("AGENT_AUTH_ISSUER", "https://idp.example"),
            ("AGENT_AUTH_JWKS_CACHE_SECONDS", "10"),
        ];
        let s = Settings::load(None, env(&jwks)).unwrap();
        assert!(s.auth.enforced());
        assert_eq!(s.address, IpAddr::from([0, 0, 0, 0]));
        assert!(s.auth.describe().contains("cache 30 s"), "{}", s.auth.describe());
        let mut off = jwks.to_vec();
        off.push(("AGENT_AUTH_ENABLED", "false"));
        let s = Settings::load(None, env(&off)).unwrap();
        assert!(!s.auth.enforced());
        assert_eq!(s.address, IpAddr::from([127, 0, 0, 1]));
    }

    #[test]
    fn auth_misconfiguration_names_the_setting() {
        let err = |pairs: &[(&str, &str)]| Settings::load(None, env(pairs)).unwrap_err().to_string();
        let e = err(&[("AGENT_AUTH_JWKS_URI", "https://idp.example/jwks.json")]);
        assert!(
            e.starts_with(
                "agent.auth.jwks-uri, agent.auth.issuer and agent.auth.jwks-cache-seconds must be configured together"
            ),
            "{e}"
        );
        assert!(e.contains("AGENT_AUTH_ISSUER") && e.contains("AGENT_AUTH_JWKS_CACHE_SECONDS"), "{e}");
        let e = err(&[
            ("AGENT_AUTH_JWKS_URI", "https://idp.example/jwks.json"),
            ("AGENT_AUTH_ISSUER", "x"),
            ("AGENT_AUTH_JWKS_CACHE_SECONDS", "0"),
        ]);
        assert!(e.starts_with("agent.auth.jwks-cache-seconds must be greater than 0"), "{e}");
        let e = err(&[
            ("AGENT_AUTH_JWKS_URI", "ftp://idp.example/jwks.json"),
            ("AGENT_AUTH_ISSUER", "x"),
            ("AGENT_AUTH_JWKS_CACHE_SECONDS", "60"),
        ]);
        assert!(e.contains("agent.auth.jwks-uri"), "{e}");
        let e = err(&[("AGENT_AUTH_LOCAL_PUBLIC_KEY", "not a key")]);
        assert!(e.starts_with("agent.auth.local-public-key is not a valid PEM RSA public key"), "{e}");
        let e = err(&[("AGENT_AUTH_ENABLED", "true")]);
        assert!(e.contains("agent.auth.enabled") && e.contains("no key source"), "{e}");
        let e = err(&[("AGENT_AUTH_LOCAL_PUBLIC_KEY_FILE", "/nonexistent/agw-key.pem")]);
        assert!(e.contains("agent.auth.local-public-key-file") && e.contains("/nonexistent/agw-key.pem"), "{e}");
        let e = err(&[("AGW_AUTH_JWKS_REFETCH_INTERVAL", "soon")]);
        assert!(e.contains("agw.auth.jwks-refetch-interval"), "{e}");
    }

    #[test]
    fn blank_local_key_in_the_file_is_refused() {
        let dir = std::env::temp_dir().join(format!("agw-config-auth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("agw.toml");
        std::fs::write(&file, "[agent.auth]\nlocal-public-key = \"\"\"\n   \n\"\"\"\n").unwrap();
        let e = Settings::load(Some(&file), env(&[])).unwrap_err().to_string();
        assert!(e.starts_with("agent.auth.local-public-key cannot be blank"), "{e}");
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn cors_defaults_and_overrides() {
        let s = Settings::load(None, env(&[])).unwrap();
        assert_eq!(s.cors.path_pattern, "/api/ap/**");
        assert_eq!(s.cors.allowed_origin_patterns, ["http://localhost:*"]);
        assert_eq!(s.cors.allowed_methods, ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);
        assert_eq!(s.cors.allowed_headers, ["*"]);
        assert_eq!(s.cors.exposed_headers, ["Content-Type"]);
        assert!(!s.cors.allow_credentials);
        assert_eq!(s.cors.max_age_seconds, 3600);
        let s = Settings::load(
            None,
            env(&[
                ("AGENT_CORS_ALLOWED_ORIGIN_PATTERNS", " https://*.example.com , ,http://localhost:[3000, 5173]"),
                ("AGENT_CORS_ALLOWED_METHODS", "get,post"),
                ("AGENT_CORS_ALLOW_CREDENTIALS", "true"),
                ("AGENT_CORS_MAX_AGE_SECONDS", "60"),
            ]),
        )
        .unwrap();
        assert_eq!(s.cors.allowed_origin_patterns, ["https://*.example.com", "http://localhost:[3000, 5173]"]);
        assert_eq!(s.cors.allowed_methods, ["GET", "POST"]);
        assert!(s.cors.allow_credentials);
        assert_eq!(s.cors.max_age_seconds, 60);
        let e = Settings::load(None, env(&[("AGENT_CORS_PATH_PATTERN", "api/**")])).unwrap_err().to_string();
        assert!(e.contains("agent.cors.path-pattern"), "{e}");
        let e = Settings::load(None, env(&[("AGENT_CORS_ALLOWED_HEADERS", "X Bad")])).unwrap_err().to_string();
        assert!(e.contains("agent.cors.allowed-headers"), "{e}");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("100").unwrap(), Duration::from_millis(100));
        assert!(parse_duration("x").is_err());
    }
}
