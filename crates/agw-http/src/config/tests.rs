//! Loading settings from the file and the environment.

use std::net::IpAddr;
use std::time::Duration;

use super::*;

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn defaults_without_file_or_env() {
    let s = Settings::load(None, env(&[])).unwrap();
    assert_eq!(s.server.port, 8080);
    assert_eq!(s.server.address, IpAddr::from([127, 0, 0, 1]));
    assert_eq!(s.server.max_request_bytes, 1 << 20);
    assert_eq!(s.server.heartbeat_interval, Duration::from_secs(15));
    assert!(s.demo.enabled);
    assert!(s.resources.agents.dir.is_none());
    assert!(s.providers.is_empty());
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
    assert_eq!(s.server.port, 9100);
    assert_eq!(s.server.heartbeat_interval, Duration::from_secs(2));
    let bailian = s.providers.iter().find(|p| p.key == "bailian").unwrap();
    assert_eq!(bailian.base_url, "https://x/v1");
    assert_eq!(bailian.api_key, "sk-secret");
    assert_eq!(bailian.model, "qwen");
    assert!(s.providers.iter().any(|p| p.key == "my_lab" && p.model == "m"));
    assert_eq!(bailian.prompt_cache_key, None, "unset: decided by the provider's host");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn the_prompt_cache_key_switch_is_a_boolean() {
    let with = |value: &str| {
        Settings::load(
            None,
            env(&[("AGENT_PROVIDERS_LAB_MODEL", "m"), ("AGENT_PROVIDERS_LAB_PROMPT_CACHE_KEY", value)]),
        )
    };
    let lab = |s: Settings| s.providers.into_iter().find(|p| p.key == "lab").unwrap().prompt_cache_key;
    assert_eq!(lab(with("TRUE").unwrap()), Some(true));
    assert_eq!(lab(with(" false ").unwrap()), Some(false));
    let err = with("sometimes").unwrap_err().to_string();
    assert!(err.contains("lab") && err.contains("prompt-cache-key must be true or false"), "{err}");
}

#[test]
fn the_structured_output_route_is_native_or_tool() {
    let with = |value: &str| {
        Settings::load(
            None,
            env(&[("AGENT_PROVIDERS_LAB_MODEL", "m"), ("AGENT_PROVIDERS_LAB_STRUCTURED_OUTPUT", value)]),
        )
    };
    let lab = |s: Settings| s.providers.into_iter().find(|p| p.key == "lab").unwrap().structured_output;
    assert_eq!(lab(with("tool").unwrap()), Some(agw_llm::StructuredOutput::Tool));
    assert_eq!(lab(with(" native ").unwrap()), Some(agw_llm::StructuredOutput::Native));
    assert_eq!(lab(with("").unwrap()), None);
    let err = with("json").unwrap_err().to_string();
    assert!(err.contains("lab") && err.contains("structured-output must be native or tool"), "{err}");
}

#[test]
fn the_attachments_a_provider_takes_are_listed() {
    let with = |value: &str| {
        Settings::load(None, env(&[("AGENT_PROVIDERS_LAB_MODEL", "m"), ("AGENT_PROVIDERS_LAB_ATTACHMENTS", value)]))
    };
    let lab = |s: Settings| s.providers.into_iter().find(|p| p.key == "lab").unwrap().attachments;
    assert_eq!(lab(with("none").unwrap()), Some(agw_llm::AttachmentSupport::TEXT));
    assert_eq!(lab(with("Image").unwrap()), Some(agw_llm::AttachmentSupport { image: true, pdf: false }));
    let err = with("video").unwrap_err().to_string();
    assert!(err.contains("lab") && err.contains("attachments") && err.contains("video"), "{err}");
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
    assert_eq!(s.server.address, IpAddr::from([127, 0, 0, 1]));
    assert!(!s.auth.enforced());
    let s = Settings::load(None, env(&[("AGENT_AUTH_ENABLED", "false"), ("SERVER_ADDRESS", "0.0.0.0")])).unwrap();
    assert_eq!(s.server.address, IpAddr::from([0, 0, 0, 0]));
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
    assert_eq!(s.server.address, IpAddr::from([0, 0, 0, 0]));
    assert!(s.auth.describe().contains("cache 30 s"), "{}", s.auth.describe());
    let mut off = jwks.to_vec();
    off.push(("AGENT_AUTH_ENABLED", "false"));
    let s = Settings::load(None, env(&off)).unwrap();
    assert!(!s.auth.enforced());
    assert_eq!(s.server.address, IpAddr::from([127, 0, 0, 1]));
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
    assert_eq!(
        s.cors.path_patterns,
        ["/api/**", "/v1/**", "/mcp", "/chat"],
        "the native API, the AI SDK / AG-UI endpoints, the OpenAI façade and MCP"
    );
    assert_eq!(s.cors.allowed_origin_patterns, crate::cors::DEFAULT_ORIGIN_PATTERNS);
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
            ("AGENT_CORS_PATH_PATTERN", "/api/ap/**"),
        ]),
    )
    .unwrap();
    assert_eq!(s.cors.path_patterns, ["/api/ap/**"], "one pattern, as the contract spells it");
    assert_eq!(s.cors.allowed_origin_patterns, ["https://*.example.com", "http://localhost:[3000, 5173]"]);
    assert_eq!(s.cors.allowed_methods, ["GET", "POST"]);
    assert!(s.cors.allow_credentials);
    assert_eq!(s.cors.max_age_seconds, 60);
    for bad in ["api/**", "/api/**, v1/**", " , "] {
        let e = Settings::load(None, env(&[("AGENT_CORS_PATH_PATTERN", bad)])).unwrap_err().to_string();
        assert!(e.contains("agent.cors.path-pattern"), "{bad:?}: {e}");
    }
    let e = Settings::load(None, env(&[("AGENT_CORS_ALLOWED_HEADERS", "X Bad")])).unwrap_err().to_string();
    assert!(e.contains("agent.cors.allowed-headers"), "{e}");
}

#[test]
fn overflowing_durations_name_the_setting() {
    let err = |pairs: &[(&str, &str)]| Settings::load(None, env(pairs)).unwrap_err().to_string();
    // Before: `18446744073709552s` multiplied into milliseconds wrapped (release) or panicked (debug).
    let e = err(&[("AGW_SSE_HEARTBEAT_INTERVAL", "18446744073709552s")]);
    assert!(e.contains("agw.sse.heartbeat-interval (AGW_SSE_HEARTBEAT_INTERVAL)") && e.contains("too large"), "{e}");
    let e = err(&[("SERVER_SHUTDOWN_GRACE_MS", "18446744073709551616")]);
    assert_eq!(
        e,
        "setting server.shutdown-grace-ms (SERVER_SHUTDOWN_GRACE_MS): \"18446744073709551616\": too large (at most 18446744073709551615)"
    );
    let e = err(&[("AGW_AUTH_JWKS_REFETCH_INTERVAL", "9999999999999999h")]);
    assert!(e.contains("agw.auth.jwks-refetch-interval") && e.contains("too large"), "{e}");
}

/// A config file `agw.toml` in a fresh directory.
fn config_file(tag: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("agw-config-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("agw.toml");
    std::fs::write(&file, text).unwrap();
    file
}

#[test]
fn unknown_file_keys_refuse_to_load_naming_the_nearest_key() {
    let file = config_file("typo", "[server]\nprot = 8081\n[agent.providers.bailian]\nbase_url = \"https://x\"\n");
    let e = Settings::load(Some(&file), env(&[])).unwrap_err().to_string();
    let path = file.display();
    assert_eq!(
        e,
        format!(
            "unknown setting `agent.providers.bailian.base_url` in {path}; did you mean `agent.providers.bailian.base-url`?\nunknown setting `server.prot` in {path}; did you mean `server.port`?"
        )
    );
    // Settings the contract names but agw ignores are accepted.
    let file = config_file("compat", "[memory.chat]\ncharset = \"UTF-8\"\n[agw.sse]\nstream-timeout = \"5m\"\n");
    Settings::load(Some(&file), env(&[])).unwrap();
    let file = config_file("provider-type", "[agent.providers.bailian]\nmodel = 3\n");
    let e = Settings::load(Some(&file), env(&[])).unwrap_err().to_string();
    assert_eq!(e, "provider bailian: model must be a string");
    std::fs::remove_dir_all(file.parent().unwrap()).ok();
}

#[test]
fn unknown_setting_variables_are_warnings() {
    let s = Settings::load(
        None,
        env(&[
            ("AGENT_PROVIDRES_X_BASE_URL", "https://x"),
            ("AGENT_PROVIDERS_X_BASE_URL", "https://x"),
            ("AGW_LOG", "debug"),
            ("AGW_SOAK_SECS", "5"),
            ("HOME", "/root"),
            ("MEMORY_CHAT_KK", ""),
        ]),
    )
    .unwrap();
    let warnings: Vec<String> = s.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(
        warnings,
        [
            "unknown environment variable `AGENT_PROVIDRES_X_BASE_URL` ignored; did you mean `AGENT_PROVIDERS_X_BASE_URL`?",
            "unknown environment variable `MEMORY_CHAT_KK` ignored; did you mean `MEMORY_CHAT_K`?",
        ]
    );
    assert_eq!(s.providers.len(), 1, "the well-spelt provider variable is read");
}

#[test]
fn allowed_hosts_default_to_loopback_names_on_loopback_and_any_elsewhere() {
    use crate::hosts::AllowedHosts;
    let s = Settings::load(None, env(&[])).unwrap();
    assert_eq!(s.server.allowed_hosts, AllowedHosts::Only(Vec::new()));
    assert!(s.server.allowed_hosts.allows("localhost:8080") && !s.server.allowed_hosts.allows("evil.example"));
    let s = Settings::load(None, env(&[("AGENT_AUTH_ENABLED", "false"), ("SERVER_ADDRESS", "0.0.0.0")])).unwrap();
    assert_eq!(s.server.allowed_hosts, AllowedHosts::Any);
    let s = Settings::load(
        None,
        env(&[("AGENT_AUTH_ENABLED", "false"), ("SERVER_ADDRESS", "0.0.0.0"), ("SERVER_ALLOWED_HOSTS", "gw.example")]),
    )
    .unwrap();
    assert!(s.server.allowed_hosts.allows("gw.example:443") && !s.server.allowed_hosts.allows("evil.example"));
    let e = Settings::load(None, env(&[("SERVER_ALLOWED_HOSTS", "https://gw.example/")])).unwrap_err().to_string();
    assert!(e.starts_with("setting server.allowed-hosts (SERVER_ALLOWED_HOSTS): "), "{e}");
}

#[test]
fn isolation_settings() {
    use crate::auth::IdentityClaims;
    let s = Settings::load(None, env(&[])).unwrap();
    assert_eq!(s.tools.bash.working_directory, Some(std::path::PathBuf::from("bash-workspace")));
    assert_eq!(s.tools.agent_file_allowed_tools, None);
    assert!(s.tools.agent_file_allowed_skills.is_empty() && !s.tools.agent_file_allow_overwrite);
    assert_eq!(s.auth.identity, IdentityClaims { operator_claim: "roles".into(), ..Default::default() });
    let s = Settings::load(
        None,
        env(&[
            ("AGW_TOOLS_AGENT_FILE_CREATE_ALLOWED_TOOLS", "none"),
            ("AGW_TOOLS_AGENT_FILE_CREATE_ALLOWED_SKILLS", "Math_Basic, text_utils"),
            ("AGW_TOOLS_AGENT_FILE_CREATE_ALLOW_OVERWRITE", "true"),
            ("AGW_AUTH_TENANT_CLAIM", "org"),
            ("AGW_AUTH_OPERATOR_ROLE", "agw-admin"),
        ]),
    )
    .unwrap();
    assert_eq!(s.tools.agent_file_allowed_tools, Some(vec![]));
    assert_eq!(s.tools.agent_file_allowed_skills, ["math_basic", "text_utils"]);
    assert!(s.tools.agent_file_allow_overwrite);
    assert_eq!(s.auth.identity.tenant_claim.as_deref(), Some("org"));
    assert_eq!(s.auth.identity.operator_role.as_deref(), Some("agw-admin"));
}

#[test]
fn sandbox_settings_and_their_defaults() {
    use agw_tools::sandbox::Limits;
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
fn mcp_limits_and_their_defaults() {
    let s = Settings::load(None, env(&[])).unwrap();
    assert_eq!(s.mcp.limits, agw_mcp::McpLimits::default());
    assert_eq!((s.mcp.limits.max_tools_per_server, s.mcp.limits.max_tool_bytes), (256, 16 * 1024));
    assert_eq!(s.mcp.max_request_tool_bytes, agw_modes::runtime::DEFAULT_MCP_REQUEST_TOOL_BYTES);
    let file = config_file("mcp", "[agw.mcp]\nmax-tool-bytes = 4096\n");
    let s = Settings::load(
        Some(&file),
        env(&[("AGW_MCP_MAX_TOOLS_PER_SERVER", "10"), ("AGW_MCP_MAX_REQUEST_TOOL_BYTES", "65536")]),
    )
    .unwrap();
    assert_eq!(s.mcp.limits, agw_mcp::McpLimits { max_tools_per_server: 10, max_tool_bytes: 4096 });
    assert_eq!(s.mcp.max_request_tool_bytes, 65536);
    let err = Settings::load(None, env(&[("AGW_MCP_MAX_TOOL_BYTES", "-1")])).unwrap_err().to_string();
    assert!(err.contains("agw.mcp.max-tool-bytes"), "{err}");
}

#[test]
fn the_builder_sets_settings_by_property_and_checks_them_like_the_file() {
    let s = Settings::builder()
        .set("server.port", "9000")
        .set("agw.sse.heartbeat-interval", "2s")
        .set("agent.providers.OpenAI.base-url", "http://127.0.0.1:1/v1")
        .set("agent.providers.OpenAI.api-key", "k")
        .set("agent.providers.OpenAI.model", "m")
        .set("server.port", "9001")
        .build()
        .unwrap();
    assert_eq!(s.server.port, 9001, "the later value wins");
    assert_eq!(s.server.heartbeat_interval, Duration::from_secs(2));
    assert_eq!(s.providers.len(), 1);
    assert_eq!(Settings::default().server.port, 8080, "the defaults are the table's");

    let err = Settings::builder().set("server.prot", "1").build().unwrap_err().to_string();
    assert!(err.contains("unknown setting `server.prot`") && err.contains("did you mean `server.port`"), "{err}");
    let err = Settings::builder().set("server.port", "eighty").build().unwrap_err().to_string();
    assert!(err.contains("server.port") && err.contains("SERVER_PORT"), "{err}");
}
