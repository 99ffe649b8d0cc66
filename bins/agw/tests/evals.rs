//! `agw eval run` and its runner (issue 42, docs/evals.md) against the real binary on the
//! offline demo model: the example evalset of the bundled demo agents
//! (`crates/agw-eval/evalsets/demo.json`) passes, in-process and against a server, writing a
//! table, JSON and well-formed JUnit XML; a set with an expectation the agent does not meet
//! (a tool it never calls) fails with its reason and exit status 1.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

const DEMO_SET: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../crates/agw-eval/evalsets/demo.json");

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("agw-evals-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `agw` with a clean configuration, the demo model without delays, chats under `dir`.
fn agw(dir: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agw"));
    for var in ["AGENT_EXTERNAL_DIR", "AGW_CONFIG", "SERVER_ADDRESS", "SERVER_PORT", "AGENT_AUTH_ENABLED"] {
        cmd.env_remove(var);
    }
    cmd.env("AGW_DEMO_CHUNK_DELAY_MS", "0")
        .env("MEMORY_CHAT_DIR", dir.join("chats"))
        .env("AGENT_DATA_EXTERNAL_DIR", dir.join("data"))
        .env("AGENT_CHAT_EVENT_CALLBACK_ENABLED", "false");
    cmd
}

/// `agw serve` on a port of its own, as a user would point `--server` at it: the child and its URL.
fn serve(dir: &Path) -> (Child, String) {
    let mut server =
        agw(dir).args(["serve", "--port", "0"]).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let base = line.trim().strip_prefix("agw listening on ").unwrap().to_owned();
    (server, base)
}

fn eval(dir: &Path, args: &[&str]) -> Output {
    agw(dir).args(["eval", "run"]).args(args).output().expect("agw eval run")
}

#[test]
fn the_demo_evalset_passes_in_process_with_a_table_json_and_junit() {
    let dir = scratch("pass");
    let (json_path, junit_path) = (dir.join("out.json"), dir.join("out.xml"));
    let out = eval(&dir, &[DEMO_SET, "--json", json_path.to_str().unwrap(), "--junit", junit_path.to_str().unwrap()]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{table}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(table.contains("bundled demo agents: 100% of runs passed (at least 100% needed): PASS"), "{table}");
    for case in
        ["react-weather", "plan-weather-and-time", "structured-report", "approved-tool", "ask-the-user", "two-turns"]
    {
        assert!(table.lines().any(|l| l.starts_with(case) && l.contains("100%")), "{case}: {table}");
    }
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    let cases = json["sets"][0]["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 6);
    assert!(cases.iter().all(|c| c["runs"][0]["pass"] == true && c["runs"][0]["tokens"].as_u64() > Some(0)), "{json}");
    // The rubric, judged by another agent asked for {score, reason} with an output schema.
    let judged = &cases[0]["runs"][0];
    assert_eq!(judged["judge"], 1.0, "{judged}");
    assert!(judged["judgeReason"].as_str().unwrap().contains("offline demo model"), "{judged}");
    // Well-formed JUnit XML, read back by Python's own parser.
    let parsed = Command::new("python3")
        .args(["-c", "import sys, xml.etree.ElementTree as E; s = E.parse(sys.argv[1]).getroot()[0]; print(s.get('tests'), s.get('failures'), len(s))"])
        .arg(&junit_path)
        .output()
        .expect("python3");
    assert_eq!(String::from_utf8_lossy(&parsed.stdout).trim(), "6 0 6", "{}", String::from_utf8_lossy(&parsed.stderr));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_tool_the_agent_never_calls_fails_the_set_against_a_server() {
    let dir = scratch("fail");
    // A server of its own, as a user would point `--server` at one.
    let (mut server, base) = serve(&dir);

    let set = json!({"version": 1, "name": "changed", "agentKey": "demoModeReact", "cases": [{"id": "weather-and-time",
        "turns": [{"message": "What is the weather in Tokyo?"}],
        "expect": {"trajectory": {"calls": [{"name": "mock_city_weather"}, {"name": "city_datetime"}]}}}]});
    let path = dir.join("changed.json");
    std::fs::write(&path, set.to_string()).unwrap();
    let junit = dir.join("out.xml");
    let after = dir.join("after.json");
    let args = [path.to_str().unwrap(), "--server", &base, "--repeat", "2", "--junit", junit.to_str().unwrap()];
    let out = eval(&dir, &[&args[..], &["--json", after.to_str().unwrap()]].concat());
    let _ = server.kill();
    let _ = server.wait();
    let table = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{table}");
    assert!(table.contains("changed: 0% of runs passed (at least 100% needed): FAIL"), "{table}");
    assert!(
        table.contains("✗ trajectory scored 0.50 (at least 1.00 needed); the calls were [mock_city_weather]"),
        "{table}"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("failures=\"1\"") && xml.contains("<failure message=\"trajectory scored 0.50"), "{xml}");
    // Two runs of the case, both scored.
    assert!(String::from_utf8_lossy(&out.stderr).matches("FAIL weather-and-time").count() == 2);

    // Compared with a passing result of the same case (the expectation before the change):
    // the case regressed, first in the table, and the exit status says so.
    let mut before: Value = serde_json::from_str(&std::fs::read_to_string(&after).unwrap()).unwrap();
    for run in before["sets"][0]["cases"][0]["runs"].as_array_mut().unwrap() {
        *run = json!({"pass": true, "trajectory": 1.0, "tokens": 1, "elapsedMs": 1});
    }
    let before_path = dir.join("before.json");
    std::fs::write(&before_path, before.to_string()).unwrap();
    let compared = agw(&dir).args(["eval", "compare"]).arg(&before_path).arg(&after).output().unwrap();
    let text = String::from_utf8_lossy(&compared.stdout);
    assert_eq!(compared.status.code(), Some(1), "{text}");
    assert!(text.lines().nth(1).unwrap().starts_with("✗ changed / weather-and-time"), "{text}");
    assert!(text.contains("100% → 0%") && text.contains("1.00 → 0.50"), "{text}");
    assert!(text.contains("total: 100% → 0% of runs passed; 1 case(s) regressed"), "{text}");
    std::thread::sleep(Duration::from_millis(10));
    std::fs::remove_dir_all(&dir).ok();
}

/// `agw eval record`: a chat a person had (a frontend tool answered) becomes a case — its
/// message, that answer, the run's calls, its answer as the reference — which then passes when
/// played again.
#[test]
fn a_recorded_chat_becomes_a_case_that_passes_when_played_again() {
    let dir = scratch("record");
    let (mut server, base) = serve(&dir);

    // The chat, as a person has it: the question, then the dialog answered.
    let set = json!({"version": 1, "name": "live", "agentKey": "demoConfirmDialog", "cases": [{"id": "hike",
        "turns": [{"message": "Should we go hiking?",
                   "answers": [{"tool": "confirm_dialog", "params": {"selectedOption": "No", "selectedIndex": 2}}]}]}]});
    let live = dir.join("live.json");
    std::fs::write(&live, set.to_string()).unwrap();
    let results = dir.join("live-results.json");
    let out = eval(&dir, &[live.to_str().unwrap(), "--server", &base, "--json", results.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    let chats: Value = serde_json::from_slice(
        &Command::new("python3")
            .args(["-c", "import json,sys,urllib.request; print(urllib.request.urlopen(sys.argv[1]).read().decode())"])
            .arg(format!("{base}/api/ap/chats"))
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let chat = chats["data"][0]["chatId"].as_str().unwrap().to_owned();

    let recorded =
        agw(&dir).args(["eval", "record", "--chat", &chat, "--id", "hike-again", "--server", &base]).output().unwrap();
    assert!(recorded.status.success(), "{}", String::from_utf8_lossy(&recorded.stderr));
    let case_set: Value = serde_json::from_slice(&recorded.stdout).unwrap();
    let case = &case_set["cases"][0];
    assert_eq!(case["agentKey"], "demoConfirmDialog");
    assert_eq!(case["turns"][0]["message"], "Should we go hiking?");
    assert_eq!(
        case["turns"][0]["answers"][0],
        json!({"tool": "confirm_dialog", "params": {"selectedOption": "No", "selectedIndex": 2}})
    );
    assert_eq!(case["expect"]["trajectory"]["calls"][0]["name"], "confirm_dialog");
    assert!(case["expect"]["answer"]["reference"].as_str().unwrap().contains("No"), "{case}");

    let path = dir.join("recorded.json");
    std::fs::write(&path, case_set.to_string()).unwrap();
    let again = eval(&dir, &[path.to_str().unwrap(), "--server", &base]);
    let _ = server.kill();
    let _ = server.wait();
    let table = String::from_utf8_lossy(&again.stdout);
    assert!(again.status.success(), "{table}");
    assert!(table.lines().any(|l| l.starts_with("hike-again") && l.contains("100%")), "{table}");
    std::fs::remove_dir_all(&dir).ok();
}
