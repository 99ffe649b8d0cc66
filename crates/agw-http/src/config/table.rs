//! The one table of settings. Loading, `agw serve --help` and the unknown-key checks all read
//! it, so a setting cannot exist in one place and not the others.
//!
//! Each entry is a constant named after its environment variable (the variable is derived from
//! the name, so the two cannot drift apart); the section loaders take these constants, never
//! strings.

/// One documented setting.
#[derive(Debug, Clone, Copy)]
pub struct SettingSpec {
    /// Dotted property path; in TOML the last segment is the key of the table named by the rest.
    pub property: &'static str,
    /// The environment variable that also sets it (and wins over the file).
    pub env: &'static str,
    /// The value when unset, as written in the file; `None`: no default (unset means off or derived).
    pub default: Option<&'static str>,
    /// One line for `agw serve --help`.
    pub help: &'static str,
    /// Accepted because the contract (`docs/contract/config.md`) names it, but agw does nothing with it.
    pub ignored: bool,
}

macro_rules! settings {
    (
        used { $($name:ident: $property:literal = $default:expr, $help:literal;)* }
        ignored { $($iname:ident: $iproperty:literal = $idefault:expr, $ihelp:literal;)* }
    ) => {
        $(
            // The help is `--help` text, not Markdown (`<chatId>`, `[::1]`): shown verbatim.
            #[doc = concat!("`", $property, "` (`", stringify!($name), "`):\n\n```text\n", $help, "\n```")]
            pub(crate) const $name: SettingSpec = SettingSpec {
                property: $property,
                env: stringify!($name),
                default: $default,
                help: $help,
                ignored: false,
            };
        )*
        $(
            #[doc = concat!("`", $iproperty, "` (`", stringify!($iname), "`), no effect:\n\n```text\n", $ihelp, "\n```")]
            pub(crate) const $iname: SettingSpec = SettingSpec {
                property: $iproperty,
                env: stringify!($iname),
                default: $idefault,
                help: $ihelp,
                ignored: true,
            };
        )*
        /// Every setting, in `--help` order (providers are [`PROVIDER_FIELDS`]).
        pub const SETTINGS: &[SettingSpec] = &[$($name,)* $($iname,)*];
    };
}

settings! {
    used {
        SERVER_PORT: "server.port" = Some("8080"), "HTTP port";
        SERVER_ADDRESS: "server.address" = None,
            "listen address; default 0.0.0.0 when auth is enforced, else 127.0.0.1 (a non-loopback address without auth needs AGENT_AUTH_ENABLED=false)";
        SERVER_ALLOWED_HOSTS: "server.allowed-hosts" = None,
            "Host / :authority values accepted, comma-separated (name, name:port, *.domain, * = any); localhost, 127.0.0.1 and [::1] are always accepted; unset = only those when listening on a loopback address, any when listening elsewhere. Others get 403 (DNS rebinding)";
        SERVER_MAX_REQUEST_BYTES: "server.max-request-bytes" = Some("1048576"),
            "largest accepted request body; larger bodies get 413 before they are read";
        SERVER_HEADER_READ_TIMEOUT: "server.header-read-timeout" = Some("10s"),
            "time a client has to send a request's headers; also how long an idle keep-alive connection waits for its next request (slowloris)";
        SERVER_BODY_READ_TIMEOUT: "server.body-read-timeout" = Some("30s"),
            "time a client has to send a whole request body; 408 after it";
        SERVER_MAX_CONNECTIONS: "server.max-connections" = Some("10000"),
            "open connections at once; a connection over the cap is closed right after it is accepted";
        SERVER_MAX_CONNECTIONS_PER_IP: "server.max-connections-per-ip" = None,
            "open connections from one client address; unset = 0 (off) when listening on loopback, 256 elsewhere";
        SERVER_MAX_REQUESTS_PER_IP_PER_MINUTE: "server.max-requests-per-ip-per-minute" = None,
            "requests from one client address per minute, 429 with Retry-After beyond; unset = 0 (off) on loopback, 1200 elsewhere";
        SERVER_MAX_TOKEN_BYTES: "server.max-token-bytes" = Some("16384"),
            "longest Authorization header accepted; longer ones get 401 before any parsing";
        AGENT_AUTH_ENABLED: "agent.auth.enabled" = None,
            "JWT auth on /api/ap/** (except OPTIONS) is on whenever a key source is configured; false turns it off and allows a non-loopback address without it";
        AGENT_AUTH_LOCAL_PUBLIC_KEY: "agent.auth.local-public-key" = None,
            "RSA public key (PEM -----BEGIN PUBLIC KEY-----, >= 2048 bits) tried first to verify tokens";
        AGENT_AUTH_LOCAL_PUBLIC_KEY_FILE: "agent.auth.local-public-key-file" = None,
            "file holding agent.auth.local-public-key (set one or the other)";
        AGENT_AUTH_JWKS_URI: "agent.auth.jwks-uri" = None,
            "JWKS URL (http, https or file:); set together with issuer and jwks-cache-seconds";
        AGENT_AUTH_ISSUER: "agent.auth.issuer" = None,
            "required exact `iss` claim; set together with jwks-uri and jwks-cache-seconds";
        AGENT_AUTH_JWKS_CACHE_SECONDS: "agent.auth.jwks-cache-seconds" = None,
            "JWKS cache lifetime, > 0 (at least 30 s is used); an unknown kid refetches sooner";
        AGW_AUTH_JWKS_REFETCH_INTERVAL: "agw.auth.jwks-refetch-interval" = Some("5s"),
            "least time between two JWKS fetches (bounds refetches caused by unknown kids and failed fetches)";
        AGW_AUTH_TENANT_CLAIM: "agw.auth.tenant-claim" = None,
            "claim naming the caller's tenant (top-level name or dotted path); chats and runs belong to sub + tenant, tokens without it get 401; unset = one tenant";
        AGW_AUTH_OPERATOR_CLAIM: "agw.auth.operator-claim" = Some("roles"),
            "claim holding the caller's roles (string of space-separated roles or array; top-level name or dotted path)";
        AGW_AUTH_OPERATOR_ROLE: "agw.auth.operator-role" = None,
            "role (in agw.auth.operator-claim) that may see every user's chats and runs, and ownerless ones; unset = nobody";
        AGENT_CORS_PATH_PATTERN: "agent.cors.path-pattern" = Some("/api/**,/v1/**,/mcp,/chat"),
            "paths CORS applies to, comma-separated (** any segments, * within one); the default covers agw's API, the AI SDK and AG-UI endpoints, the OpenAI facade, /mcp and the phase stream's /chat for browser clients. Whatever it says, a request that changes state (any method but GET/HEAD/OPTIONS) from a foreign Origin, Origin: null or Sec-Fetch-Site: cross-site gets 403 origin_not_allowed on every path";
        AGENT_CORS_ALLOWED_ORIGIN_PATTERNS: "agent.cors.allowed-origin-patterns"
            = Some("http://localhost:[*],http://127.0.0.1:[*],http://[::1]:[*]"),
            "allowed Origin patterns, comma-separated; * matches anything, but a * port matches digits only; :[*] = optional port, :[80,8080] = listed ports";
        AGENT_CORS_ALLOWED_METHODS: "agent.cors.allowed-methods" = Some("GET,POST,PUT,PATCH,DELETE,OPTIONS"),
            "methods cross-origin requests may use (* = any)";
        AGENT_CORS_ALLOWED_HEADERS: "agent.cors.allowed-headers" = Some("*"),
            "request headers a preflight may ask for (* = any, echoed back)";
        AGENT_CORS_EXPOSED_HEADERS: "agent.cors.exposed-headers" = Some("Content-Type"),
            "Access-Control-Expose-Headers of cross-origin responses (empty in the config file = none)";
        AGENT_CORS_ALLOW_CREDENTIALS: "agent.cors.allow-credentials" = Some("false"),
            "send Access-Control-Allow-Credentials: true";
        AGENT_CORS_MAX_AGE_SECONDS: "agent.cors.max-age-seconds" = Some("3600"),
            "Access-Control-Max-Age of preflight responses";
        AGENT_EXTERNAL_DIR: "agent.catalog.external-dir" = None,
            "directory of agent JSON files; unset = the bundled demo agents";
        AGENT_TOOLS_EXTERNAL_DIR: "agent.capability.tools-external-dir" = None,
            "directory of *.backend / *.frontend / *.action tool files; unset = the bundled tools";
        AGENT_MCP_EXTERNAL_DIR: "agent.mcp.external-dir" = None,
            "directory of MCP server files (one *.json per server, docs/mcp.md); unset = no MCP servers";
        AGENT_A2A_EXTERNAL_DIR: "agent.a2a.external-dir" = None,
            "directory of remote A2A agent files (one *.json per agent, docs/a2a.md), each offered as the tool a2a__<name> to agents that list it in toolConfig.a2aAgents; unset = none";
        AGW_MCP_MAX_TOOLS_PER_SERVER: "agw.mcp.max-tools-per-server" = Some("256"),
            "most tools taken from one MCP server; later ones are skipped (logged) and its further tools/list pages not read";
        AGW_MCP_MAX_TOOL_BYTES: "agw.mcp.max-tool-bytes" = Some("16384"),
            "largest MCP tool definition (its JSON as the server lists it: description, schemas, ...); larger tools are skipped (logged)";
        AGW_MCP_MAX_REQUEST_TOOL_BYTES: "agw.mcp.max-request-tool-bytes" = Some("2097152"),
            "most bytes of MCP tool definitions offered in one model request; the tools past it are not offered (logged)";
        AGENT_VIEWPORT_EXTERNAL_DIR: "agent.viewport.external-dir" = None,
            "directory of viewports (.html .qlc .dqlc .json_schema .custom); unset = the bundled viewports";
        AGENT_DATA_EXTERNAL_DIR: "agent.data.external-dir" = Some("data"),
            "flat directory served by GET /api/ap/data/{filename}";
        AGENT_TOOLS_FRONTEND_SUBMIT_TIMEOUT_MS: "agent.tools.frontend.submit-timeout-ms" = Some("300000"),
            "how long a frontend tool waits for POST /api/ap/submit (also tool.start toolTimeout)";
        AGW_TOOLS_MAX_OUTPUT_BYTES: "agw.tools.max-output-bytes" = Some("51200"),
            "tool results longer than this are cut on a UTF-8 boundary with a notice to the model";
        AGW_SUB_AGENTS_MAX_TASKS: "agw.sub-agents.max-tasks" = Some("5"),
            "most sub-agent tasks one agent_invoke call may start (docs/multi-agent.md)";
        AGW_SUB_AGENTS_MAX_DEPTH: "agw.sub-agents.max-depth" = Some("1"),
            "levels of sub-agents below a run: 1 = sub-agents cannot invoke agents themselves; at most 4";
        AGENT_BASH_WORKING_DIRECTORY: "agent.tools.bash.working-directory" = Some("bash-workspace"),
            "_bash_ working directory and first allowed root (created 0755 on first use: sandboxed commands read it under their own uid); git works only on its own .git";
        AGENT_BASH_ALLOWED_PATHS: "agent.tools.bash.allowed-paths" = None,
            "extra roots _bash_ may touch (comma-separated)";
        AGENT_BASH_ALLOWED_COMMANDS: "agent.tools.bash.allowed-commands" = None,
            "commands _bash_ may run (comma-separated); empty = ls,pwd,cat,head,tail,top,free,df,git";
        AGENT_BASH_PATH_CHECKED_COMMANDS: "agent.tools.bash.path-checked-commands" = None,
            "commands whose arguments must stay inside the allowed roots; empty = ls,cat,head,tail,git";
        AGENT_TOOLS_AGENT_FILE_CREATE_DEFAULT_SYSTEM_PROMPT: "agent.tools.agent-file-create.default-system-prompt" = None,
            "system prompt agent_file_create writes when none is given";
        AGW_TOOLS_AGENT_FILE_CREATE_ALLOWED_TOOLS: "agw.tools.agent-file-create.allowed-tools" = None,
            "tools (any kind) agent_file_create may give an agent, comma-separated; unset = the shipped harmless tools (never _bash_, _skill_run_script_, agent_file_create); none = no tools";
        AGW_TOOLS_AGENT_FILE_CREATE_ALLOWED_SKILLS: "agw.tools.agent-file-create.allowed-skills" = None,
            "skills agent_file_create may give an agent, comma-separated; unset = none";
        AGW_TOOLS_AGENT_FILE_CREATE_ALLOW_OVERWRITE: "agw.tools.agent-file-create.allow-overwrite" = Some("false"),
            "let agent_file_create replace an existing or bundled agent (including the agent calling it)";
        AGW_PROVIDER_MAX_LINE_BYTES: "agw.provider.max-line-bytes" = Some("1048576"),
            "longest line of a provider's streamed response (an endless line ends the run with provider_error)";
        AGW_PROVIDER_MAX_RESPONSE_BYTES: "agw.provider.max-response-bytes" = Some("67108864"),
            "most bytes of one provider response (provider_error beyond)";
        AGW_PROVIDER_MAX_OUTPUT_BYTES: "agw.provider.max-output-bytes" = Some("4194304"),
            "most bytes of text (answer, reasoning, tool arguments) one model response may stream; bounds what a run holds of a turn (provider_error beyond)";
        AGW_PROVIDER_MAX_TOOL_CALLS: "agw.provider.max-tool-calls" = Some("64"),
            "most tool calls a model may make in one turn (provider_error beyond)";
        AGW_PROVIDER_FALLBACK_COOLDOWN: "agw.provider.fallback-cooldown" = Some("30s"),
            "least time a model that failed (rate limit, overload, server error, timeout, connection) is skipped by calls that have fallbacks; longer when its Retry-After says so";
        AGW_PROVIDER_FALLBACK_COOLDOWN_MAX: "agw.provider.fallback-cooldown-max" = Some("10m"),
            "most time a failed model is skipped, whatever its Retry-After asks";
        AGW_SANDBOX_ALLOW_UNCONFINED: "agw.sandbox.allow-unconfined" = Some("false"),
            "run _bash_ and _skill_run_script_ even when the kernel lacks Landlock or seccomp (unconfined; not recommended); false refuses them";
        AGW_SANDBOX_CPU_SECONDS: "agw.sandbox.cpu-seconds" = Some("60"),
            "CPU time limit of each model-started process (0 = none)";
        AGW_SANDBOX_MEMORY_MIB: "agw.sandbox.memory-mib" = Some("1024"),
            "address-space limit of each model-started process, MiB (0 = none)";
        AGW_SANDBOX_FILE_SIZE_MIB: "agw.sandbox.file-size-mib" = Some("64"),
            "largest file a model-started process may write, MiB (0 = none)";
        AGW_SANDBOX_MAX_PROCESSES: "agw.sandbox.max-processes" = Some("64"),
            "processes and threads of one sandboxed call (applies when agw runs as root; 0 = none)";
        AGW_SANDBOX_UID_BASE: "agw.sandbox.uid-base" = Some("1900000000"),
            "when agw runs as root, each sandboxed call runs as uid/gid uid-base + n (n < 256); no account may use these ids";
        MEMORY_CHAT_DIR: "memory.chat.dir" = Some("./chats"),
            "chat history files (<chatId>.json) and the chat index (_chats.jsonl)";
        MEMORY_CHAT_K: "memory.chat.k" = Some("20"),
            "how many of a chat's latest runs are sent back to the model (history on disk is never trimmed)";
        MEMORY_CHAT_ACTION_TOOLS: "memory.chat.action-tools" = None,
            "tool names persisted with _actionId instead of _toolId (comma-separated)";
        MEMORY_CHAT_FSYNC: "memory.chat.fsync" = Some("run"),
            "when history is fsynced: never | step (after every step) | run (when a run ends)";
        AGW_MEMORY_ENABLED: "agw.memory.enabled" = Some("true"),
            "chat memory: false = no history files, no chat index, no history sent back to the model";
        AGW_MEMORY_RETENTION: "agw.memory.retention" = Some("0"),
            "chats no run has touched for this long are deleted by the server (e.g. 720h; 0 = keep forever)";
        AGW_MEMORY_RETENTION_SWEEP: "agw.memory.retention-sweep" = Some("1h"),
            "how often the server looks for chats past agw.memory.retention";
        SERVER_SHUTDOWN_GRACE_MS: "server.shutdown-grace-ms" = Some("10000"),
            "on SIGTERM/SIGINT, how long in-flight runs may finish before they end with run.error";
        AGENT_REFRESH_INTERVAL_MS: "agent.catalog.refresh-interval-ms" = Some("10000"),
            "periodic rescan of the agents directory (file events reload at once)";
        AGENT_CAPABILITY_REFRESH_INTERVAL_MS: "agent.capability.refresh-interval-ms" = Some("30000"),
            "periodic rescan of the tools directory";
        AGENT_VIEWPORT_REFRESH_INTERVAL_MS: "agent.viewport.refresh-interval-ms" = Some("30000"),
            "periodic rescan of the viewports directory";
        AGENT_SKILL_EXTERNAL_DIR: "agent.skill.external-dir" = None,
            "skills root (skills/<id>/SKILL.md + scripts); unset = the bundled skills, unpacked to a temp directory";
        AGENT_SKILL_REFRESH_INTERVAL_MS: "agent.skill.refresh-interval-ms" = Some("30000"),
            "periodic rescan of the skills directory";
        AGENT_SKILL_MAX_PROMPT_CHARS: "agent.skill.max-prompt-chars" = Some("8000"),
            "skill instructions longer than this are truncated in prompts (0 = unlimited)";
        AGW_RESOURCES_SYNC_BUNDLED: "agw.resources.sync-bundled" = Some("true"),
            "copy the bundled demo agents/tools/viewports/skills into configured directories (never overwrites)";
        AGENT_LLM_INTERACTION_LOG_ENABLED: "agent.llm.interaction-log.enabled" = Some("true"),
            "log every LLM request, delta and response at debug level (target agw::llm)";
        AGENT_LLM_INTERACTION_LOG_MASK_SENSITIVE: "agent.llm.interaction-log.mask-sensitive" = Some("true"),
            "mask API keys, tokens, passwords and Bearer values in the interaction log";
        AGENT_CHAT_EVENT_CALLBACK_ENABLED: "agent.chat-event-callback.enabled" = Some("true"),
            "POST a signed chat event at each run's first content delta";
        AGENT_CHAT_EVENT_CALLBACK_URL: "agent.chat-event-callback.url"
            = Some("http://127.0.0.1:38080/api/app/internal/chat-events"),
            "chat event webhook URL";
        AGENT_CHAT_EVENT_CALLBACK_SECRET: "agent.chat-event-callback.secret" = Some("change-me"),
            "HMAC-SHA256 secret of the X-AGENT-Signature header";
        AGENT_CHAT_EVENT_CALLBACK_CONNECT_TIMEOUT_MS: "agent.chat-event-callback.connect-timeout-ms" = Some("1000"),
            "webhook connect timeout (min 100)";
        AGENT_CHAT_EVENT_CALLBACK_REQUEST_TIMEOUT_MS: "agent.chat-event-callback.request-timeout-ms" = Some("1500"),
            "webhook request timeout (min 200)";
        AGW_SSE_HEARTBEAT_INTERVAL: "agw.sse.heartbeat-interval" = Some("15s"),
            "period of `event:heartbeat` frames on open streams (e.g. 15s, 500ms)";
        AGW_RUNS_BUFFER_EVENTS: "agw.runs.buffer-events" = Some("10000"),
            "most events one run's buffer keeps for attach / Last-Event-ID (older ones are dropped; attach before them gets 409 seq_expired)";
        AGW_RUNS_BUFFER_BYTES: "agw.runs.buffer-bytes" = Some("8388608"),
            "most bytes of SSE frames one run's buffer keeps";
        AGW_RUNS_RETENTION: "agw.runs.retention" = Some("5m"),
            "how long a finished run stays attachable";
        AGW_RUNS_RETAINED_BYTES: "agw.runs.retained-bytes" = Some("67108864"),
            "bytes of all finished runs' buffers kept for attach; beyond it the oldest finished runs are forgotten first";
        AGW_RUNS_DETACH_GRACE: "agw.runs.detach-grace" = Some("30s"),
            "how long a run keeps going after its last observer left before it is cancelled (per query: onDisconnect cancel|continue)";
        AGW_RUNS_MAX_OBSERVERS: "agw.runs.max-observers" = Some("1000"),
            "most open streams (query + attaches) of one run; more attaches get 429";
        AGW_RUNS_CHAT_CONCURRENCY: "agw.runs.chat-concurrency" = Some("reject"),
            "a query into a chat with a run in flight: reject (409 chat_busy naming the run) | queue (starts when that run ends)";
        AGW_CONSOLE_ENABLED: "agw.console.enabled" = Some("true"),
            "the browser console at / and /console/ (static pages of the binary that use the API like any client); false: both answer 404";
        AGW_A2A_ENABLED: "agw.a2a.enabled" = Some("true"),
            "every agent is served over A2A 1.0 (its card and JSON-RPC endpoint under /a2a/<agentKey>); false: those paths and /.well-known/agent-card.json answer 404 (an agent opts out alone with \"a2a\": {\"enabled\": false})";
        AGW_A2A_PUSH_ENABLED: "agw.a2a.push.enabled" = Some("true"),
            "A2A clients may register push-notification webhooks for their tasks (each task state change is POSTed to them); false: the card says pushNotifications false and the methods answer PushNotificationNotSupportedError";
        AGW_A2A_PUSH_ALLOW_PRIVATE_NETWORKS: "agw.a2a.push.allow-private-networks" = Some("false"),
            "push-notification webhooks may target loopback, private, link-local and other non-public addresses (off: such URLs are refused, so a client cannot make agw call into its own network)";
        AGW_RECOVERY_ENABLED: "agw.recovery.enabled" = Some("true"),
            "runs in flight when agw stops (a crash, a kill, the shutdown grace period ending) are resumed from their last completed step by the next start";
        AGW_RECOVERY_MAX_AGE: "agw.recovery.max-age" = Some("1h"),
            "a run that started longer ago than this when agw comes back ends with run.error recovery_exhausted instead";
        AGW_RECOVERY_MAX_ATTEMPTS: "agw.recovery.max-attempts" = Some("3"),
            "how many times one run is resumed; the next stop ends it with run.error recovery_exhausted (a crash loop converges)";
        AGW_DATABASE_URL: "agw.database.url" = None,
            "PostgreSQL URL (postgres://user:pass@host/db): chat memory shared by replicas instead of files in memory.chat.dir";
        AGW_DATABASE_SCHEMA: "agw.database.schema" = Some("agw"),
            "PostgreSQL schema of agw's tables (created and migrated at start)";
        AGW_DATABASE_POOL_SIZE: "agw.database.pool-size" = Some("8"),
            "PostgreSQL connections this replica keeps";
        AGW_REDIS_URL: "agw.redis.url" = None,
            "Redis URL (redis://host:6379/): live runs across replicas — attach, interrupt, steer and submit on any replica";
        AGW_REDIS_PREFIX: "agw.redis.prefix" = Some("agw"),
            "prefix of every Redis key agw writes (deployments sharing one Redis use different prefixes)";
        AGW_NODE_ID: "agw.node.id" = None,
            "this replica's name in the cluster; each start adds a random incarnation suffix (unset = a random name)";
        AGW_CLUSTER_LEASE: "agw.cluster.lease" = Some("10s"),
            "a replica that has not renewed its lease for this long is lost: its running runs end with run.error node_lost";
        AGW_CLUSTER_SECRET: "agw.cluster.secret" = None,
            "secret shared by every replica (at least 32 bytes, e.g. openssl rand -base64 48): signs the requests and run records replicas exchange through Redis; required with agw.redis.url";
        AGW_CLUSTER_SECRET_FILE: "agw.cluster.secret-file" = None,
            "file holding agw.cluster.secret (set one or the other)";
        AGW_CLUSTER_CONTROL_DEADLINE: "agw.cluster.control-deadline" = Some("5s"),
            "how long an interrupt, steer or submit forwarded to the replica running the run is valid and awaited; that replica refuses it later, or a second time";
        AGW_QUOTAS_SUBJECT_CONCURRENT_RUNS: "agw.quotas.subject-concurrent-runs" = Some("0"),
            "runs one subject (JWT sub and tenant; all unauthenticated callers are one subject) may have in flight; more get 429 quota_exceeded (0 = no limit)";
        AGW_QUOTAS_SUBJECT_RUNS_PER_MINUTE: "agw.quotas.subject-runs-per-minute" = Some("0"),
            "runs one subject may start in any 60 s (0 = no limit)";
        AGW_QUOTAS_SUBJECT_TOKENS_PER_DAY: "agw.quotas.subject-tokens-per-day" = Some("0"),
            "tokens one subject's runs may use per UTC day, checked before every model call; past it runs get 429 and running ones run.error quota_exceeded (0 = no limit)";
        AGW_QUOTAS_SUBJECT_COST_PER_DAY: "agw.quotas.subject-cost-per-day" = Some("0"),
            "cost (in the prices' currency) one subject's runs may reach per UTC day, checked before every model call; priced models only (0 = no limit)";
        AGW_QUOTAS_AGENT_CONCURRENT_RUNS: "agw.quotas.agent-concurrent-runs" = Some("0"),
            "runs of one agent in flight, all subjects together (0 = no limit)";
        AGW_QUOTAS_AGENT_RUNS_PER_MINUTE: "agw.quotas.agent-runs-per-minute" = Some("0"),
            "runs of one agent started in any 60 s (0 = no limit)";
        AGW_QUOTAS_AGENT_TOKENS_PER_DAY: "agw.quotas.agent-tokens-per-day" = Some("0"),
            "tokens one agent's runs may use per UTC day (0 = no limit)";
        AGW_QUOTAS_AGENT_COST_PER_DAY: "agw.quotas.agent-cost-per-day" = Some("0"),
            "cost one agent's runs may reach per UTC day; priced models only (0 = no limit)";
        AGW_QUOTAS_RESERVE_TOKENS: "agw.quotas.reserve-tokens" = Some("1000"),
            "tokens a run reserves against each daily token quota when admitted, until its calls' real usage replaces the estimate: runs are admitted only while spend plus reservations is below the quota (0 = no reservation)";
        AGW_GUARDRAILS_DIR: "agw.guardrails.dir" = None,
            "guardrails rule files (<name>.json, referenced as rules:<name>), hot-reloaded; the bundled rule set `demo` is there unless a file of that name replaces it";
        AGW_GUARDRAILS_REFRESH_INTERVAL_MS: "agw.guardrails.refresh-interval-ms" = Some("30000"),
            "periodic rescan of the guardrails directory";
        AGW_GUARDRAILS_INPUT: "agw.guardrails.input" = None,
            "guards of every agent's input, before its own: comma-separated rules:<name>, webhook, judge:<agentKey>";
        AGW_GUARDRAILS_OUTPUT: "agw.guardrails.output" = None,
            "guards of every agent's streamed answer, before its own (same forms)";
        AGW_GUARDRAILS_TOOL_INPUT: "agw.guardrails.tool-input" = None,
            "guards of every backend call's arguments, before its own (same forms)";
        AGW_GUARDRAILS_TOOL_OUTPUT: "agw.guardrails.tool-output" = None,
            "guards of every backend call's result, before its own (same forms)";
        AGW_GUARDRAILS_CLASSIFY_EVERY: "agw.guardrails.classify-every" = Some("sentence"),
            "how often the webhook and judges see a streaming answer: sentence | a number of characters (and always at its end)";
        AGW_GUARDRAILS_FAIL_MODE: "agw.guardrails.fail-mode" = Some("closed"),
            "a webhook or judge that gives no verdict in time: closed (the text is blocked) | open (the text passes)";
        AGW_GUARDRAILS_JUDGE_TIMEOUT_MS: "agw.guardrails.judge-timeout-ms" = Some("15000"),
            "how long a judge agent may take for one verdict";
        AGW_GUARDRAILS_WEBHOOK_URL: "agw.guardrails.webhook.url" = None,
            "classifier webhook (guard `webhook`): POSTed {stage, text, complete, runId, chatId, agentKey, tool}, answers {action: allow|warn|block, reason}";
        AGW_GUARDRAILS_WEBHOOK_SECRET: "agw.guardrails.webhook.secret" = None,
            "HMAC-SHA256 secret of the classifier webhook's X-AGENT-Signature header (required with its URL)";
        AGW_GUARDRAILS_WEBHOOK_TIMEOUT_MS: "agw.guardrails.webhook.timeout-ms" = Some("2000"),
            "the classifier webhook's whole call, connecting included (min 50)";
        AGW_DEMO_ENABLED: "agw.demo.enabled" = Some("true"),
            "register the embedded offline demo model as provider `demo` (a configured real `demo` provider replaces it)";
        AGW_DEMO_CHUNK_DELAY_MS: "agw.demo.chunk-delay-ms" = Some("40"),
            "delay between the demo model's chunks";
    }
    ignored {
        MEMORY_CHAT_CHARSET: "memory.chat.charset" = Some("UTF-8"),
            "accepted for compatibility; history is always UTF-8";
        AGW_SSE_STREAM_TIMEOUT: "agw.sse.stream-timeout" = Some("5m"),
            "accepted for compatibility; a client-side timeout of the reference's SSE SDK";
    }
}

/// One field of a provider: `[agent.providers.<key>] <key>` or `AGENT_PROVIDERS_<KEY><env_suffix>`.
#[derive(Debug, Clone, Copy)]
pub struct ProviderField {
    /// The key in the provider's table.
    pub key: &'static str,
    /// Appended to `AGENT_PROVIDERS_<KEY>` to form the variable.
    pub env_suffix: &'static str,
}

/// The table of provider settings, `<key>` being any provider key.
pub const PROVIDERS_TABLE: &str = "agent.providers";
/// Environment prefix of provider settings; the key (upper-cased) follows.
pub const PROVIDERS_ENV: &str = "AGENT_PROVIDERS_";

/// Every field a provider entry may set.
pub const PROVIDER_FIELDS: &[ProviderField] = &[
    ProviderField { key: "base-url", env_suffix: "_BASE_URL" },
    ProviderField { key: "api-key", env_suffix: "_API_KEY" },
    ProviderField { key: "model", env_suffix: "_MODEL" },
    ProviderField { key: "protocol", env_suffix: "_PROTOCOL" },
    ProviderField { key: "context-window", env_suffix: "_CONTEXT_WINDOW" },
    ProviderField { key: "max-output-tokens", env_suffix: "_MAX_OUTPUT_TOKENS" },
    ProviderField { key: "prices", env_suffix: "_PRICES" },
    ProviderField { key: "prompt-cache-key", env_suffix: "_PROMPT_CACHE_KEY" },
    ProviderField { key: "structured-output", env_suffix: "_STRUCTURED_OUTPUT" },
    ProviderField { key: "attachments", env_suffix: "_ATTACHMENTS" },
];

/// Variables with a setting prefix that agw reads but that are not settings (listed by
/// `--help`, never reported as unknown).
pub const OTHER_ENV: &[(&str, &str)] = &[
    ("AGW_LOG", "log filter, e.g. info, debug, agw::llm=debug (RUST_LOG is read when it is unset)"),
    ("AGW_CONFIG", "the TOML config file (--config)"),
    (
        "AGW_OPENAI_STREAM",
        "async-openai: stream OpenAI-compatible providers through async-openai (the A/B fallback path)",
    ),
];

/// Variables with a setting prefix that only the test suites and examples read: a developer's
/// shell may hold them, so they are not reported as unknown either.
pub const TEST_ENV: &[&str] = &[
    "AGW_SOAK_SECS",
    "AGW_SOAK_CONCURRENCY",
    "AGW_SOAK_KINDS",
    "AGW_SOAK_CHATS",
    "AGW_FUZZ_CASES",
    "AGW_FUZZ_SEED",
    "AGW_TEST_SECRET",
    "AGW_EXAMPLE_BASE_URL",
    "AGW_EXAMPLE_API_KEY",
    "AGW_EXAMPLE_MODEL",
];

/// Environment prefixes whose unknown variables are reported (as warnings): likely typos.
pub const CHECKED_ENV_PREFIXES: &[&str] = &["AGENT_", "AGW_", "MEMORY_"];
