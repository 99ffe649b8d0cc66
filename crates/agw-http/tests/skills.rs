//! Skills over real HTTP with the fixture provider (`docs/contract/modes.md` §6.2–§6.3,
//! `docs/contract/tools-skills-viewports.md` §9 and §4.5, reference DefinitionDrivenAgentTest 5–9): the catalog
//! in every system prompt, the one-turn disclosure after a `_skill_run_script_` call, truncation,
//! the script's real output in the stream and in the next request, nothing of it in the history,
//! and `meta.skills`.
//!
//! The script runner's own guarantees (path confinement, timeouts killing the process group, the
//! output cap, inline code's temp directory) are tested in agw-skills; here one refusal and one
//! timeout go end to end.

mod common;

use std::path::PathBuf;

use std::time::{Duration, Instant};

use agw_testkit::{LogCapture, RecordedRequest, Transcript};
use common::Gateway;
use serde_json::{Value, json};

const STAGE_PROMPT: &str = "You are a test agent.";
const BODY: &str = "# Skill Prompt\nalways verify target window.";
const BODY_LINE: &str = "always verify target window.";
const CATALOG_HEADER: &str = agw_modes::definition::DEFAULT_SKILL_CATALOG_HEADER;
const DISCLOSURE_HEADER: &str = agw_modes::definition::DEFAULT_SKILL_DISCLOSURE_HEADER;

/// A skills directory: the bundled skills plus `probe` (frontmatter name/description, a body,
/// `scripts/echo.py` and `scripts/slow.py`). Removed on drop.
struct SkillsDir(PathBuf);

impl Drop for SkillsDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl SkillsDir {
    fn new(name: &str) -> SkillsDir {
        let dir = std::env::temp_dir().join(format!("agw-skills-http-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        agw_skills::bundled::materialize(&dir).unwrap();
        let probe = dir.join("probe");
        std::fs::create_dir_all(probe.join("scripts")).unwrap();
        std::fs::write(
            probe.join("SKILL.md"),
            format!("---\nname: probe\ndescription: capture screenshots\nlicense: MIT\n---\n{BODY}\n"),
        )
        .unwrap();
        std::fs::write(
            probe.join("scripts/echo.py"),
            "import json, sys\nprint(json.dumps({\"ok\": True, \"echo\": sys.argv[1:]}))\n",
        )
        .unwrap();
        std::fs::write(probe.join("scripts/slow.py"), "import time\ntime.sleep(30)\n").unwrap();
        SkillsDir(dir)
    }

    fn env(&self) -> (&'static str, &str) {
        ("AGENT_SKILL_EXTERNAL_DIR", self.0.to_str().unwrap())
    }
}

/// An agent on the fixture provider: ONESHOT (`plain`) or REACT (`react`, 4 steps).
fn agent(key: &str, mode: &str, tools: &[&str], skills: &[&str]) -> (String, String) {
    let mut root = json!({
        "key": key,
        "mode": mode,
        "modelConfig": {"providerKey": "fixture", "model": "m", "reasoning": {"enabled": false}},
        "toolConfig": if tools.is_empty() { Value::Null } else { json!({"backends": tools}) },
    });
    if !skills.is_empty() {
        root["skillConfig"] = json!({"skills": skills});
    }
    match mode {
        "REACT" => root["react"] = json!({"systemPrompt": STAGE_PROMPT, "maxSteps": 4}),
        _ => root["plain"] = json!({"systemPrompt": STAGE_PROMPT}),
    }
    (format!("{key}.json"), root.to_string())
}

fn run_script(call_id: &str, args: Value) -> Transcript {
    Transcript::openai_tool_call(call_id, "_skill_run_script_", &[&args.to_string()])
}

fn requests_of(gw: &Gateway, run_id: &str) -> Vec<RecordedRequest> {
    gw.fixture.requests().into_iter().filter(|r| r.header("x-agw-run-id") == Some(run_id)).collect()
}

fn request_of<'a>(requests: &'a [RecordedRequest], stage: &str) -> &'a RecordedRequest {
    requests.iter().find(|r| r.stage() == Some(stage)).unwrap_or_else(|| panic!("no request of stage {stage}"))
}

/// The system message of a request (`""` when there is none).
fn system(request: &RecordedRequest) -> String {
    let first = &request.body["messages"][0];
    if first["role"] == "system" { first["content"].as_str().unwrap().to_owned() } else { String::new() }
}

fn user_messages(request: &RecordedRequest) -> Vec<String> {
    request.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect()
}

fn run_id(stream: &common::Stream) -> String {
    stream.of_type("run.start")[0]["runId"].as_str().unwrap().to_owned()
}

fn assert_no_disclosure(prompt: &str) {
    assert!(!prompt.contains(BODY_LINE) && !prompt.contains("instructions:"), "no disclosure expected:\n{prompt}");
    assert!(!prompt.contains(DISCLOSURE_HEADER), "{prompt}");
}

#[tokio::test]
async fn the_catalog_lists_configured_skills_without_their_instructions() {
    let skills = SkillsDir::new("catalog");
    let gw = Gateway::start(
        &[
            agent("plain", "ONESHOT", &[], &[]),
            agent("skilled", "ONESHOT", &[], &["probe", "ghost", "math_basic"]),
            agent("tooled", "REACT", &["_skill_run_script_"], &["probe"]),
        ],
        &[skills.env()],
    )
    .await;
    gw.fixture.set_default(Transcript::openai_text(&["done"]));

    // Without skills: the stage prompt alone.
    let stream = gw.run(&json!({"agentKey": "plain", "message": "hi"})).await;
    let requests = requests_of(&gw, &run_id(&stream));
    assert_eq!(system(request_of(&requests, "agent-oneshot")), STAGE_PROMPT);

    // With skills: stage prompt, then the catalog of the skills that exist, in agent order.
    let stream = gw.run(&json!({"agentKey": "skilled", "message": "hi"})).await;
    let requests = requests_of(&gw, &run_id(&stream));
    let request = request_of(&requests, "agent-oneshot");
    let prompt = system(request);
    let math = agw_skills::bundled::SKILL_FILES.iter().find(|(p, _)| *p == "math_basic/SKILL.md").unwrap().1;
    let math_description = math.lines().find_map(|l| l.strip_prefix("description: ")).unwrap().trim_matches('"');
    assert_eq!(
        prompt,
        format!(
            "{STAGE_PROMPT}\n\n{CATALOG_HEADER}\n\nskillId: probe\nname: probe\ndescription: capture screenshots\
             \n\n---\n\nskillId: math_basic\nname: math_basic\ndescription: {math_description}"
        )
    );
    assert_no_disclosure(&prompt);
    assert!(!prompt.contains("ghost"), "unknown skills are left out: {prompt}");
    assert_eq!(user_messages(request), ["hi"], "no extra user prompt");

    // With tools: the catalog sits between the stage prompt and the tool appendix.
    let stream = gw.run(&json!({"agentKey": "tooled", "message": "hi"})).await;
    let requests = requests_of(&gw, &run_id(&stream));
    let prompt = system(request_of(&requests, "agent-react-step-1"));
    let catalog = prompt.find("skillId: probe").expect("catalog");
    let tools = prompt.find("- _skill_run_script_: ").expect("tool appendix");
    assert!(prompt.starts_with(STAGE_PROMPT) && catalog < tools, "{prompt}");
    assert_no_disclosure(&prompt);
}

#[tokio::test]
async fn a_script_call_discloses_the_skill_once_in_the_next_turn_and_nothing_is_persisted() {
    let skills = SkillsDir::new("react");
    let gw = Gateway::start(&[agent("react", "REACT", &["_skill_run_script_"], &["PROBE"])], &[skills.env()]).await;
    let call = json!({"skill": " probe ", "script": "scripts/echo.py", "args": ["a", "b"]});
    gw.fixture.on_stage("agent-react-step-1", run_script("call_s1", call.clone()));
    gw.fixture.on_stage("agent-react-step-2", run_script("call_s2", call));
    gw.fixture.on_stage("agent-react-step-3", Transcript::openai_text(&["all ", "done"]));

    let chat = "5d7c1a3e-2b4f-4e6a-8c9d-0e1f2a3b4c5d";
    let stream = gw.run(&json!({"agentKey": "react", "message": "take a look", "chatId": chat})).await;
    assert_eq!(stream.last()["type"], "run.complete", "{:?}", stream.types());
    let requests = requests_of(&gw, &run_id(&stream));

    // The script really ran: its JSON output is the tool result, in the stream and sent back.
    let results = stream.of_type("tool.result");
    assert_eq!(results.len(), 2);
    let result_text = results[0]["result"].as_str().unwrap();
    let result: Value = serde_json::from_str(result_text).unwrap();
    assert_eq!((result["ok"].as_bool(), result["exitCode"].as_i64()), (Some(true), Some(0)), "{result}");
    assert_eq!(result["skill"], "probe");
    let stdout: Value = serde_json::from_str(result["stdout"].as_str().unwrap()).unwrap();
    assert_eq!(stdout, json!({"ok": true, "echo": ["a", "b"]}));
    let step2 = request_of(&requests, "agent-react-step-2");
    let tool_message = step2.body["messages"].as_array().unwrap().iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(
        (tool_message["tool_call_id"].as_str(), tool_message["content"].as_str()),
        (Some("call_s1"), Some(result_text))
    );

    // Step 1: catalog only. Step 2: catalog + disclosure (body and label), before the tool
    // appendix. Step 3: the same skill was called again, but it was disclosed already.
    let step1 = system(request_of(&requests, "agent-react-step-1"));
    assert!(step1.contains("skillId: probe"), "{step1}");
    assert_no_disclosure(&step1);
    let prompt = system(step2);
    let disclosure = format!(
        "{DISCLOSURE_HEADER}\n\nskillId: probe\nname: probe\ndescription: capture screenshots\ninstructions:\n{BODY}"
    );
    let at = prompt.find(&disclosure).unwrap_or_else(|| panic!("disclosure expected:\n{prompt}"));
    assert!(prompt.find("skillId: probe").unwrap() < at, "the catalog comes first: {prompt}");
    assert!(at < prompt.find("- _skill_run_script_: ").unwrap(), "the tool appendix comes last: {prompt}");
    let step3 = system(request_of(&requests, "agent-react-step-3"));
    assert!(step3.contains("skillId: probe"), "{step3}");
    assert_no_disclosure(&step3);
    for request in &requests {
        assert_eq!(user_messages(request), ["take a look"], "no extra user prompt");
    }

    // The history holds the run (tool calls and results) but never a system prompt.
    let history = std::fs::read_to_string(gw.agents_dir.join("chats").join(format!("{chat}.json"))).unwrap();
    assert!(history.contains("take a look") && history.contains("call_s1"), "{history}");
    assert!(!history.contains(BODY_LINE) && !history.contains("instructions:"), "{history}");

    // A new run of the same chat starts with nothing disclosed: the history sent back carries no
    // instructions, and the disclosure comes again after this run's own script call.
    let stream = gw.run(&json!({"agentKey": "react", "message": "again", "chatId": chat})).await;
    assert_eq!(stream.last()["type"], "run.complete");
    let requests = requests_of(&gw, &run_id(&stream));
    let step1 = request_of(&requests, "agent-react-step-1");
    assert!(!step1.body.to_string().contains(BODY_LINE), "{}", step1.body);
    assert!(system(request_of(&requests, "agent-react-step-2")).contains(&disclosure));
}

#[tokio::test]
async fn oneshot_discloses_in_the_final_turn_truncated_to_the_limit() {
    let skills = SkillsDir::new("truncate");
    let gw = Gateway::start(
        &[agent("oneshot", "ONESHOT", &["_skill_run_script_"], &["probe"])],
        &[skills.env(), ("AGENT_SKILL_MAX_PROMPT_CHARS", "10")],
    )
    .await;
    gw.fixture.on_stage(
        "agent-oneshot-tool-first",
        run_script("call_t1", json!({"skill": "probe", "script": "scripts/echo.py"})),
    );
    gw.fixture.on_stage("agent-oneshot-tool-final", Transcript::openai_text(&["ok"]));
    let stream = gw.run(&json!({"agentKey": "oneshot", "message": "go"})).await;
    assert_eq!(stream.last()["type"], "run.complete", "{:?}", stream.types());
    let requests = requests_of(&gw, &run_id(&stream));

    let first = system(request_of(&requests, "agent-oneshot-tool-first"));
    assert!(first.contains("skillId: probe"), "{first}");
    assert_no_disclosure(&first);
    let last = system(request_of(&requests, "agent-oneshot-tool-final"));
    assert!(
        last.contains("instructions:\n# Skill Pr\n\n[TRUNCATED: skill prompt exceeds maxPromptChars=10]"),
        "{last}"
    );
    assert!(!last.contains(BODY_LINE), "{last}");
}

#[tokio::test]
async fn unknown_or_unconfigured_skills_are_never_disclosed() {
    // The test runtime is single-threaded: the run task logs on this thread.
    let logs = LogCapture::default();
    let _guard = tracing::subscriber::set_default(logs.clone());
    let skills = SkillsDir::new("unknown");
    let gw = Gateway::start(&[agent("oneshot", "ONESHOT", &["_skill_run_script_"], &["probe"])], &[skills.env()]).await;
    let unknown = json!({"skill": "unknown_skill", "script": "scripts/echo.py"});
    // math_basic exists in the directory but the agent does not configure it.
    let unconfigured =
        json!({"skill": "math_basic", "script": "scripts/calc.py", "args": ["--op", "add", "--a", "1", "--b", "2"]});
    gw.fixture.on_stage(
        "agent-oneshot-tool-first",
        Transcript::new()
            .tool_call_start(0, "call_u1", "_skill_run_script_")
            .tool_args(0, &unknown.to_string())
            .tool_call_start(1, "call_u2", "_skill_run_script_")
            .tool_args(1, &unconfigured.to_string())
            .finish("tool_calls")
            .done(),
    );
    gw.fixture.on_stage("agent-oneshot-tool-final", Transcript::openai_text(&["ok"]));
    let stream = gw.run(&json!({"agentKey": "oneshot", "message": "go"})).await;
    assert_eq!(stream.last()["type"], "run.complete", "{:?}", stream.types());
    assert_eq!(stream.of_type("tool.result").len(), 2);
    let requests = requests_of(&gw, &run_id(&stream));
    let last = system(request_of(&requests, "agent-oneshot-tool-final"));
    assert!(last.contains("skillId: probe"), "{last}");
    assert_no_disclosure(&last);
    assert!(!last.contains("skillId: math_basic"), "{last}");
    let logs = logs.text();
    assert!(logs.contains("requested unknown skill 'unknown_skill'"), "{logs}");
    assert!(logs.contains("requested unknown skill 'math_basic'"), "{logs}");
}

#[tokio::test]
async fn escaping_script_paths_are_refused_and_a_slow_script_times_out() {
    let skills = SkillsDir::new("refuse");
    let gw = Gateway::start(&[agent("react", "REACT", &["_skill_run_script_"], &["probe"])], &[skills.env()]).await;
    let slow = json!({"skill": "probe", "script": "scripts/slow.py", "timeoutMs": 300});
    gw.fixture
        .on_stage("agent-react-step-1", run_script("call_p1", json!({"skill": "probe", "script": "../../etc/passwd"})));
    gw.fixture
        .on_stage("agent-react-step-2", run_script("call_p2", json!({"skill": "probe", "script": "/etc/passwd"})));
    gw.fixture.on_stage("agent-react-step-3", run_script("call_p3", slow));
    gw.fixture.on_stage("agent-react-step-4", Transcript::openai_text(&["done"]));
    let started = Instant::now();
    let stream = gw.run(&json!({"agentKey": "react", "message": "go"})).await;
    assert_eq!(stream.last()["type"], "run.complete", "{:?}", stream.types());
    assert!(started.elapsed() < Duration::from_secs(15), "the slow script was cut off: {:?}", started.elapsed());

    let results: Vec<Value> = stream
        .of_type("tool.result")
        .iter()
        .map(|e| serde_json::from_str(e["result"].as_str().unwrap()).unwrap())
        .collect();
    assert_eq!(results.len(), 3);
    for refused in &results[..2] {
        assert_eq!(refused["ok"], false, "{refused}");
        assert!(refused["error"].as_str().is_some_and(|e| !e.is_empty()), "{refused}");
        assert!(!refused["stdout"].as_str().unwrap_or_default().contains("root:"), "{refused}");
    }
    assert_eq!(
        (results[2]["ok"].as_bool(), results[2]["timedOut"].as_bool()),
        (Some(false), Some(true)),
        "{}",
        results[2]
    );
}

#[tokio::test]
async fn plan_execute_turns_show_the_catalog_and_the_disclosure() {
    let skills = SkillsDir::new("plan");
    let plan_agent = (
        "planner.json".to_owned(),
        json!({
            "key": "planner",
            "mode": "PLAN_EXECUTE",
            "modelConfig": {"providerKey": "fixture", "model": "m"},
            "toolConfig": {"backends": ["_skill_run_script_"]},
            "skills": ["probe"],
            "planExecute": {
                "plan": {"systemPrompt": "Plan it.", "deepThinking": true},
                "execute": {"systemPrompt": "Do it."},
                "summary": {"systemPrompt": "Sum it up."}
            }
        })
        .to_string(),
    );
    let gw = Gateway::start(&[plan_agent], &[skills.env()]).await;
    let probe = json!({"skill": "probe", "script": "scripts/echo.py"});
    gw.fixture.set_responder(move |stage, body| {
        let stage = stage?;
        let tool_results = body["messages"].as_array()?.iter().filter(|m| m["role"] == "tool").count();
        if stage == "agent-plan-draft" || stage == "agent-plan-final" {
            return Some(Transcript::openai_text(&["text"]));
        }
        if stage == "agent-plan-generate" {
            let tasks = json!({"tasks": [{"description": "look"}]}).to_string();
            return Some(Transcript::openai_tool_call("call_plan", "_plan_add_tasks_", &[&tasks]));
        }
        // Execute rounds: the add-tasks result is the only tool message before the first round.
        if tool_results == 1 {
            return Some(run_script("call_x1", probe.clone()));
        }
        let prompt = body["messages"].as_array()?.iter().rev().find(|m| m["role"] == "user")?["content"].as_str()?;
        let task_id = prompt.lines().find_map(|l| l.trim().strip_prefix("Current task ID:"))?.trim().to_owned();
        let update = json!({"taskId": task_id, "status": "completed"}).to_string();
        Some(Transcript::openai_tool_call("call_x2", "_plan_update_task_", &[&update]))
    });
    let stream = gw.run(&json!({"agentKey": "planner", "message": "go"})).await;
    assert_eq!(stream.last()["type"], "run.complete", "{:?}", stream.types());
    let requests = requests_of(&gw, &run_id(&stream));
    let prompt_of = |stage: &str| system(request_of(&requests, stage));

    for stage in ["agent-plan-draft", "agent-plan-generate", "agent-plan-execute-step-1", "agent-plan-final"] {
        let prompt = prompt_of(stage);
        assert!(prompt.contains("skillId: probe"), "{stage}: {prompt}");
    }
    for stage in ["agent-plan-draft", "agent-plan-generate", "agent-plan-execute-step-1", "agent-plan-final"] {
        assert_no_disclosure(&prompt_of(stage));
    }
    // The plan prompt: augmented stage prompt, catalog, then the plan stage's tool descriptions.
    let plan = prompt_of("agent-plan-generate");
    let catalog = plan.find("skillId: probe").unwrap();
    let callable = plan.find("Tools callable in the planning stage").expect("augmented stage prompt");
    let tools = plan.find(agw_modes::definition::DEFAULT_TOOL_DESCRIPTION_TITLE).expect("tool appendix");
    assert!(plan.starts_with("Plan it.") && callable < catalog && catalog < tools, "{plan}");
    let next = prompt_of("agent-plan-execute-step-1-work-2");
    assert!(next.contains("instructions:\n# Skill Prompt"), "{next}");
}

#[tokio::test]
async fn agent_detail_lists_the_configured_skills() {
    let bundled = agw_demo::bundled::AGENT_FILES.iter().find(|(name, _)| *name == "demoMathSkill.json").unwrap();
    let gw = Gateway::start(
        &[(bundled.0.to_owned(), bundled.1.to_owned()), agent("skilled", "ONESHOT", &[], &["Probe", "probe", "x"])],
        &[],
    )
    .await;
    let (status, body) = gw.get_json("/api/ap/agent?agentKey=demoMathSkill").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["meta"]["skills"], json!(["math_basic", "math_stats", "text_utils"]));
    assert_eq!(body["data"]["meta"]["tools"], json!(["_skill_run_script_"]));
    assert_eq!(body["data"]["meta"]["mode"], "ONESHOT");
    let (_, body) = gw.get_json("/api/ap/agent?agentKey=skilled").await;
    assert_eq!(body["data"]["meta"]["skills"], json!(["probe", "x"]), "configured ids, lower-cased, distinct");
}

/// Issue 22 end to end: the model's script calls go after the gateway (its environment through
/// `/proc`, its own HTTP API on loopback); the sandbox denies them, the tool results say so, and
/// the run still completes. An agent without `allowInlineCode` gets its inline code refused.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn sandboxed_script_attacks_on_the_gateway_are_denied_and_the_run_completes() {
    if !agw_tools::sandbox::probe().confines() {
        eprintln!("skipped: this kernel cannot confine");
        return;
    }
    let skills = SkillsDir::new("attack");
    std::fs::write(
        skills.0.join("probe/scripts/call_api.py"),
        "import socket, sys\nc = socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=3)\n\
         c.sendall(b'GET /api/ap/chats HTTP/1.0\\r\\n\\r\\n')\nprint(c.recv(4000))\n",
    )
    .unwrap();
    let (name, text) = agent("inline", "REACT", &["_skill_run_script_"], &["probe"]);
    let mut inline: Value = serde_json::from_str(&text).unwrap();
    inline["skillConfig"]["allowInlineCode"] = json!(true);
    let gw = Gateway::start(
        &[(name, inline.to_string()), agent("plain", "REACT", &["_skill_run_script_"], &["probe"])],
        &[skills.env()],
    )
    .await;
    let port = gw.base.rsplit(':').next().unwrap().to_owned();
    let environ = format!("print(open('/proc/{}/environ', 'rb').read())", std::process::id());
    gw.fixture.on_stage("agent-react-step-1", run_script("call_a1", json!({"skill": "probe", "pythonCode": environ})));
    gw.fixture.on_stage(
        "agent-react-step-2",
        run_script("call_a2", json!({"skill": "probe", "script": "scripts/call_api.py", "args": [port]})),
    );
    gw.fixture.on_stage("agent-react-step-3", Transcript::openai_text(&["nothing to see"]));

    let stream = gw.run(&json!({"agentKey": "inline", "message": "go"})).await;
    assert_eq!(stream.last()["type"], "run.complete", "{:?}", stream.types());
    let results: Vec<Value> = stream
        .of_type("tool.result")
        .iter()
        .map(|e| serde_json::from_str(e["result"].as_str().unwrap()).unwrap())
        .collect();
    assert_eq!(results.len(), 2);
    for result in &results {
        assert_eq!(
            (&result["ok"], &result["exitCode"], &result["timedOut"]),
            (&json!(false), &json!(1), &json!(false))
        );
        assert!(result["stderr"].as_str().unwrap().contains("PermissionError"), "{result}");
        assert!(!result["stdout"].as_str().unwrap().contains("chats"), "{result}");
    }

    // An agent that does not enable inline code: refused before anything runs.
    let stream = gw.run(&json!({"agentKey": "plain", "message": "go"})).await;
    assert_eq!(stream.last()["type"], "run.complete", "{:?}", stream.types());
    let result: Value = serde_json::from_str(stream.of_type("tool.result")[0]["result"].as_str().unwrap()).unwrap();
    assert!(
        result["error"].as_str().unwrap().starts_with("Inline pythonCode is not enabled for this agent"),
        "{result}"
    );
}

/// Issue 32 end to end: the model's script connects to a unix socket that file permissions leave
/// open to everyone (a local database's; here one the test listens on, in a world-writable
/// directory). Without the agent's `sandbox.unixSockets` the socket cannot even be created: the
/// run completes, the model reads the refusal, nothing reaches the socket. An agent that grants
/// unix sockets gets through.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_scripts_unix_socket_is_refused_unless_the_agent_grants_it() {
    use std::os::unix::fs::PermissionsExt;
    if !agw_tools::sandbox::probe().confines() {
        eprintln!("skipped: this kernel cannot confine");
        return;
    }
    let skills = SkillsDir::new("unix");
    std::fs::write(
        skills.0.join("probe/scripts/connect_unix.py"),
        "import socket, sys\ns = socket.socket(socket.AF_UNIX)\ns.settimeout(5)\ns.connect(sys.argv[1])\n\
         print('connected to', sys.argv[1])\n",
    )
    .unwrap();
    let public = std::env::temp_dir().join(format!("agw-skills-http-unix-socket-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&public);
    std::fs::create_dir(&public).unwrap();
    std::fs::set_permissions(&public, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let socket = public.join("service.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o777)).unwrap();
    listener.set_nonblocking(true).unwrap();
    let reached = || std::iter::from_fn(|| listener.accept().ok()).count() > 0;

    let closed = agent("closed", "REACT", &["_skill_run_script_"], &["probe"]);
    let (name, text) = agent("granted", "REACT", &["_skill_run_script_"], &["probe"]);
    let mut granted: Value = serde_json::from_str(&text).unwrap();
    granted["sandbox"] = json!({"unixSockets": true});
    let gw = Gateway::start(&[closed, (name, granted.to_string())], &[skills.env()]).await;
    let call = json!({"skill": "probe", "script": "scripts/connect_unix.py", "args": [socket.display().to_string()]});
    gw.fixture.on_stage("agent-react-step-1", run_script("call_u1", call));
    gw.fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["noted"]));

    let stream = gw.run(&json!({"agentKey": "closed", "message": "go"})).await;
    assert_eq!(stream.last()["type"], "run.complete", "{:?}", stream.types());
    let result_text = stream.of_type("tool.result")[0]["result"].as_str().unwrap().to_owned();
    let result: Value = serde_json::from_str(&result_text).unwrap();
    assert_eq!((&result["ok"], &result["exitCode"], &result["timedOut"]), (&json!(false), &json!(1), &json!(false)));
    assert!(result["stderr"].as_str().unwrap().contains("PermissionError"), "{result}");
    assert!(!result["stdout"].as_str().unwrap().contains("connected"), "{result}");
    // The model's next turn carries the refusal as the call's result.
    let requests = requests_of(&gw, &run_id(&stream));
    let step2 = request_of(&requests, "agent-react-step-2");
    let tool_message = step2.body["messages"].as_array().unwrap().iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(tool_message["content"].as_str(), Some(result_text.as_str()));
    assert!(!reached(), "the script reached the unix socket");

    let stream = gw.run(&json!({"agentKey": "granted", "message": "go"})).await;
    assert_eq!(stream.last()["type"], "run.complete", "{:?}", stream.types());
    let result: Value = serde_json::from_str(stream.of_type("tool.result")[0]["result"].as_str().unwrap()).unwrap();
    assert_eq!(result["ok"], true, "{result}");
    assert!(reached(), "the granted connection did not arrive");
    let _ = std::fs::remove_dir_all(&public);
}
