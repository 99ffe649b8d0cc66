//! Configuration mistakes over the real binary: typos in the config file refuse to start and are
//! reported by `agw check`; setting-shaped variables nothing reads are warned about.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// A scratch directory holding `agw.toml` with `text`.
fn with_config(tag: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("agw-config-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("agw.toml"), text).unwrap();
    dir
}

/// `agw serve` on a free port with `cmd`'s setup, until it listens: its warnings (stderr).
fn startup_log(mut cmd: Command) -> String {
    let mut child = cmd
        .args(["serve", "--port", "0"])
        .env("AGW_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert!(line.starts_with("agw listening on "), "{line:?}");
    child.kill().unwrap();
    child.wait().unwrap();
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    stderr
}

/// `agw` run in `dir`, with no operator configuration leaking in.
fn agw(dir: &std::path::Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agw"));
    cmd.current_dir(dir)
        .env_remove("AGW_CONFIG")
        .env_remove("SERVER_ADDRESS")
        .env_remove("AGENT_EXTERNAL_DIR")
        .env("MEMORY_CHAT_DIR", dir.join("chats"))
        .env("AGENT_CHAT_EVENT_CALLBACK_ENABLED", "false");
    cmd
}

const TYPO: &str = "unknown setting `server.prot` in agw.toml; did you mean `server.port`?";

#[test]
fn a_typo_in_the_config_file_refuses_to_start_and_check_reports_it() {
    let dir = with_config("typo", "[server]\nprot = 8081\n");
    let out = agw(&dir).args(["serve", "--port", "0", "--config", "agw.toml"]).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(TYPO), "{stderr}");

    let out = agw(&dir).args(["check", "--config", "agw.toml"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(&format!("error: configuration: {TYPO}")), "{stdout}");

    // A provider table's fields are checked too; its key is free.
    std::fs::write(dir.join("agw.toml"), "[agent.providers.my-lab]\nbase-url = \"http://x\"\napi_key = \"k\"\n")
        .unwrap();
    let out = agw(&dir).args(["check", "--config", "agw.toml"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(
            "unknown setting `agent.providers.my-lab.api_key` in agw.toml; did you mean `agent.providers.my-lab.api-key`?"
        ),
        "{stdout}"
    );
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn check_warns_about_unknown_setting_variables_but_not_provider_ones() {
    let dir = with_config("env-check", "");
    let out = agw(&dir)
        .arg("check")
        .env("AGENT_PROVIDRES_X_BASE_URL", "http://x")
        .env("AGENT_PROVIDERS_X_BASE_URL", "http://x")
        .env("AGW_SOAK_SECS", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "warnings do not fail the check: {stdout}");
    assert!(
        stdout.contains(
            "warning: environment: unknown environment variable `AGENT_PROVIDRES_X_BASE_URL` ignored; did you mean `AGENT_PROVIDERS_X_BASE_URL`?"
        ),
        "{stdout}"
    );
    assert!(!stdout.contains("`AGENT_PROVIDERS_X_BASE_URL` ignored"), "{stdout}");
    assert!(!stdout.contains("AGW_SOAK_SECS"), "a test-only variable is known: {stdout}");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn serve_logs_a_warning_for_an_unknown_setting_variable() {
    let dir = with_config("env-serve", "");
    let mut serve = agw(&dir);
    serve.env("AGW_DEMO_ENABLE", "false");
    let stderr = startup_log(serve);
    assert!(
        stderr.contains("unknown environment variable `AGW_DEMO_ENABLE` ignored; did you mean `AGW_DEMO_ENABLED`?"),
        "{stderr}"
    );
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn help_lists_new_and_compatibility_settings() {
    let out = Command::new(env!("CARGO_BIN_EXE_agw")).args(["serve", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    let compat = help.split("Accepted for compatibility, no effect:").nth(1).expect("compat section");
    assert!(compat.contains("MEMORY_CHAT_CHARSET") && compat.contains("agw.sse.stream-timeout"), "{help}");
    assert!(help.contains("AGW_LOG"), "{help}");
    // The settings this branch added, with their defaults.
    assert!(help.contains("SERVER_ALLOWED_HOSTS") && help.contains("server.allowed-hosts"), "{help}");
    assert!(help.contains("[default: http://localhost:[*],http://127.0.0.1:[*],http://[::1]:[*]]"), "{help}");
}

/// Issue 32: run as root, agw runs every code call as an unprivileged uid of its own, which reads
/// only what "others" may. A skills directory and a `_bash_` root under a private (0700) parent,
/// like a home directory, are named at startup (one WARN line each) and by `agw check`, with the
/// directory that blocks them and the fix — not only when a model's first call fails.
#[cfg(unix)]
#[test]
fn unreadable_code_roots_are_named_at_startup_and_by_check() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = with_config("private-roots", "");
    if std::fs::metadata(&dir).unwrap().uid() != 0 {
        eprintln!("skipped: agw keeps its own identity for code calls unless it runs as root");
        std::fs::remove_dir_all(dir).ok();
        return;
    }
    let home = dir.join("home");
    let (skills, work) = (home.join("agw/skills"), home.join("agw/work"));
    std::fs::create_dir_all(&skills).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
    let configured = |cmd: &mut Command| {
        cmd.env("AGENT_SKILL_EXTERNAL_DIR", &skills).env("AGENT_BASH_WORKING_DIRECTORY", &work);
    };
    let expected = |role: &str, path: &std::path::Path| {
        format!(
            "the {role} {} cannot be read by the sandbox identity (each call runs as a uid of its own): {} (mode \
             0700) not searchable by others. Move it to a directory every user can enter, or run `chmod o+x {}`",
            path.display(),
            home.display(),
            home.display()
        )
    };

    let mut check = agw(&dir);
    check.arg("check");
    configured(&mut check);
    let out = check.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "warnings do not fail the check: {stdout}");
    for (setting, role, path) in [
        ("agent.skill.external-dir", "skills directory", &skills),
        ("agent.tools.bash.working-directory", "_bash_ working directory", &work),
    ] {
        let line = format!("warning: {setting}: {}", expected(role, path));
        assert!(stdout.contains(&line), "expected {line:?} in:\n{stdout}");
    }

    let mut serve = agw(&dir);
    configured(&mut serve);
    let stderr = startup_log(serve);
    for (role, path) in [("skills directory", &skills), ("_bash_ working directory", &work)] {
        let warned = stderr.lines().filter(|l| l.contains("WARN") && l.contains(&expected(role, path))).count();
        assert_eq!(warned, 1, "one WARN line for the {role}:\n{stderr}");
    }

    // Fixed as the message says: nothing more to report.
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o711)).unwrap();
    let mut check = agw(&dir);
    check.arg("check");
    configured(&mut check);
    let stdout = String::from_utf8_lossy(&check.output().unwrap().stdout).into_owned();
    assert!(!stdout.contains("cannot be read by the sandbox identity"), "{stdout}");
    std::fs::remove_dir_all(dir).ok();
}

/// docs/contract/config.md says its settings tables are checked against the table: every
/// setting in exactly one row, with the same variable, default and `--help` text.
#[test]
fn the_contracts_settings_tables_match_the_table() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/contract/config.md");
    let doc = std::fs::read_to_string(&path).expect("docs/contract/config.md");
    // `| `prop` | `ENV` | default | meaning |` rows only (the provider table has three columns).
    let mut rows: std::collections::HashMap<String, Vec<[String; 3]>> = Default::default();
    for line in doc.lines().filter(|l| l.starts_with("| `")) {
        let cells = markdown_cells(line);
        if cells.len() != 4 || !cells[1].starts_with('`') {
            continue;
        }
        let code = |c: &str| c.trim_matches('`').to_owned();
        rows.entry(code(&cells[0])).or_default().push([code(&cells[1]), code(&cells[2]), cells[3].clone()]);
    }
    let mut wrong = Vec::new();
    for spec in agw_http::config::table::SETTINGS {
        let default = spec.default.map_or("unset".to_owned(), str::to_owned);
        let help = if spec.ignored { format!("**accepted, no effect**: {}", spec.help) } else { spec.help.to_owned() };
        let want = [spec.env.to_owned(), default.clone(), help];
        match rows.remove(spec.property).as_deref() {
            Some([row]) if *row == want => {}
            found => wrong.push(format!(
                "{}: found {found:?}\n  want | `{}` | `{}` | {} | {} |",
                spec.property,
                spec.property,
                spec.env,
                spec.default.map_or("unset".to_owned(), |d| format!("`{d}`")),
                markdown_escape(&want[2])
            )),
        }
    }
    wrong.extend(rows.keys().map(|p| format!("{p}: in docs/contract/config.md but not a setting")));
    assert!(wrong.is_empty(), "docs/contract/config.md is out of date:\n{}", wrong.join("\n"));
}

/// The cells of one table row, Markdown escapes (`\_`, `\*`, `\|`) undone.
fn markdown_cells(line: &str) -> Vec<String> {
    let mut cells = vec![String::new()];
    let mut chars = line.trim().trim_start_matches('|').trim_end_matches('|').chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => cells.last_mut().unwrap().extend(chars.next()),
            '|' => cells.push(String::new()),
            c => cells.last_mut().unwrap().push(c),
        }
    }
    cells.iter().map(|c| c.trim().replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")).collect()
}

fn markdown_escape(text: &str) -> String {
    text.replace('_', "\\_").replace('*', "\\*").replace('|', "\\|")
}

#[test]
fn check_warns_about_a_sub_agent_that_is_not_loaded() {
    let dir = with_config("sub-agents", "");
    let agents = dir.join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    let lead = serde_json::json!({"key": "lead", "mode": "REACT", "modelConfig": {"providerKey": "demo"},
        "toolConfig": {"subAgents": ["demoModePlain", "ghost"]}, "react": {"systemPrompt": "Lead."}});
    std::fs::write(agents.join("lead.json"), lead.to_string()).unwrap();
    let plain = serde_json::json!({"key": "demoModePlain", "mode": "ONESHOT", "modelConfig": {"providerKey": "demo"},
        "plain": {"systemPrompt": "Plain."}});
    std::fs::write(agents.join("plain.json"), plain.to_string()).unwrap();
    let out = agw(&dir).arg("check").env("AGENT_EXTERNAL_DIR", &agents).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "a warning does not fail the check: {stdout}");
    assert!(stdout.contains("agent lead lists sub-agent \"ghost\", which is not loaded"), "{stdout}");
    assert!(!stdout.contains("\"demoModePlain\", which is not loaded"), "{stdout}");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn check_names_guards_that_do_not_resolve_and_broken_rule_files() {
    let dir = with_config("guards", "");
    let agents = dir.join("agents");
    let rules = dir.join("guardrails");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::create_dir_all(&rules).unwrap();
    std::fs::write(rules.join("ok.json"), r#"{"rules": [{"id": "a", "keywords": ["x"], "action": "warn"}]}"#).unwrap();
    std::fs::write(rules.join("broken.json"), r#"{"rules": [{"id": "a", "action": "warn"}]}"#).unwrap();
    let guarded = serde_json::json!({"key": "guarded", "mode": "ONESHOT", "modelConfig": {"providerKey": "demo"},
        "guardrails": {"output": ["rules:ok", "rules:ghost", "judge:nobody", "webhook"]},
        "plain": {"systemPrompt": "Guarded."}});
    std::fs::write(agents.join("guarded.json"), guarded.to_string()).unwrap();
    let out = agw(&dir)
        .arg("check")
        .env("AGENT_EXTERNAL_DIR", &agents)
        .env("AGW_GUARDRAILS_DIR", &rules)
        .env("AGW_GUARDRAILS_INPUT", "rules:missing")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_ne!(out.status.code(), Some(0), "guards that do not resolve are errors: {stdout}");
    for expected in [
        "broken.json",
        "agent guarded names guard rules:ghost, which is not in the guardrails catalog",
        "agent guarded names guard judge:nobody, which is not a loaded agent",
        "agent guarded names guard webhook, but agw.guardrails.webhook.url is not set",
        "agw.guardrails names guard rules:missing, which is not in the guardrails catalog",
    ] {
        assert!(stdout.contains(expected), "{expected:?} missing in:\n{stdout}");
    }
    assert!(!stdout.contains("rules:ok,"), "{stdout}");
    std::fs::remove_dir_all(dir).ok();
}
