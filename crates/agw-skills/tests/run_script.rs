//! `_skill_run_script_` as a security boundary (docs/contract/tools-skills-viewports.md §4.5 + agw hardening):
//! result shapes, path confinement, process-tree kill on timeout, output caps, inline code.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agw_skills::{SkillRunScript, SkillScriptConfig};
use agw_tools::{Tool, ToolContext, ToolOutput};
use common::{SUCCESS_KEYS, gone, keys, run, running, temp, tool, write};
use serde_json::{Value, json};

/// A skills root with one skill `demo` holding a few scripts.
fn fixture() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let (guard, dir) = temp();
    let root = dir.join("skills");
    let skill = root.join("demo");
    write(skill.join("SKILL.md"), "---\nname: demo\n---\nbody");
    write(
        skill.join("scripts/echo.py"),
        "import json, os, sys\nprint(json.dumps({'argv': sys.argv[1:], 'cwd': os.getcwd()}))\n",
    );
    write(skill.join("scripts/echo.sh"), "printf '%s|' \"$@\"\n");
    write(skill.join("scripts/fail.py"), "import sys\nprint('out')\nprint('err', file=sys.stderr)\nsys.exit(3)\n");
    write(skill.join("notes.txt"), "not a script");
    (guard, root, skill)
}

fn failure(root: &Path, error: &str) -> Value {
    json!({
        "tool": "_skill_run_script_",
        "skillsRoot": root.display().to_string(),
        "ok": false,
        "timedOut": false,
        "exitCode": -1,
        "stdout": "",
        "stderr": "",
        "error": error,
    })
}

#[tokio::test]
async fn python_script_success_object() {
    let (_guard, root, skill) = fixture();
    let tool = tool(&root);
    let result = run(
        &tool,
        json!({"skill": " demo ", "script": "scripts/echo.py", "args": ["--a", "1 2", "$HOME;ls", null, 7]}),
    )
    .await;
    assert_eq!(keys(&result), SUCCESS_KEYS);
    let script = skill.join("scripts/echo.py");
    let stdout: Value = serde_json::from_str(result["stdout"].as_str().unwrap()).unwrap();
    assert_eq!(stdout, json!({"argv": ["--a", "1 2", "$HOME;ls", "7"], "cwd": skill.display().to_string()}));
    assert!(result["stdout"].as_str().unwrap().ends_with("}\n"));
    let mut result = result;
    result["stdout"] = json!("<checked>");
    assert_eq!(
        result,
        json!({
            "tool": "_skill_run_script_",
            "skillsRoot": root.display().to_string(),
            "skill": "demo",
            "scriptSource": "file",
            "script": script.display().to_string(),
            "timeoutMs": 10000,
            "command": format!("python3 {} --a 1 2 $HOME;ls 7", script.display()),
            "ok": true,
            "timedOut": false,
            "exitCode": 0,
            "stdout": "<checked>",
            "stderr": "",
        })
    );
}

#[tokio::test]
async fn shell_script_gets_arguments_verbatim() {
    let (_guard, root, _skill) = fixture();
    let result = run(
        &tool(&root),
        json!({"skill": "demo", "script": "./scripts/../scripts/echo.sh", "args": ["a b", "$(id)", "*", "`x`"]}),
    )
    .await;
    assert_eq!(result["ok"], true, "{result}");
    assert_eq!(result["stdout"], "a b|$(id)|*|`x`|");
    assert!(result["command"].as_str().unwrap().starts_with("bash /"));
}

#[tokio::test]
async fn exit_code_and_stderr_are_reported() {
    let (_guard, root, _skill) = fixture();
    let result = run(&tool(&root), json!({"skill": "demo", "script": "scripts/fail.py", "timeoutMs": " 25000 "})).await;
    assert_eq!(
        (
            &result["ok"],
            &result["exitCode"],
            &result["timedOut"],
            &result["stdout"],
            &result["stderr"],
            &result["timeoutMs"]
        ),
        (&json!(false), &json!(3), &json!(false), &json!("out\n"), &json!("err\n"), &json!(25000))
    );
}

#[tokio::test]
async fn skill_is_reported_lower_case_but_looked_up_as_given() {
    let (_guard, root, _skill) = fixture();
    write(root.join("MixedCase/scripts/echo.sh"), "echo hi\n");
    let tool = tool(&root);
    let result = run(&tool, json!({"skill": "MixedCase", "script": "scripts/echo.sh"})).await;
    assert_eq!((&result["skill"], &result["stdout"]), (&json!("mixedcase"), &json!("hi\n")));
    let result = run(&tool, json!({"skill": "mixedcase", "script": "scripts/echo.sh"})).await;
    assert_eq!(result, failure(&root, "Skill directory not found: mixedcase"));
}

#[tokio::test]
async fn validation_failures() {
    let (_guard, root, _skill) = fixture();
    let tool = tool(&root);
    let cases = [
        (json!({}), "Missing argument: skill"),
        (json!({"skill": "demo"}), "Missing argument: script or pythonCode"),
        (
            json!({"skill": "demo", "script": "a.py", "pythonCode": "print(1)"}),
            "Arguments script and pythonCode are mutually exclusive.",
        ),
        (
            json!({"skill": "demo", "script": "scripts/echo.py", "args": "x"}),
            "Invalid args. Expected array of strings.",
        ),
        (json!({"skill": "../x", "script": "scripts/echo.py"}), "Illegal skill path: ../x"),
        (json!({"skill": "..", "script": "demo/scripts/echo.py"}), "Illegal skill path: .."),
        (json!({"skill": ".", "script": "demo/scripts/echo.py"}), "Illegal skill path: ."),
        (json!({"skill": "demo/scripts", "script": "echo.py"}), "Illegal skill path: demo/scripts"),
        (json!({"skill": "/etc", "script": "passwd.py"}), "Illegal skill path: /etc"),
        (json!({"skill": "nope", "script": "scripts/echo.py"}), "Skill directory not found: nope"),
        (json!({"skill": "demo", "script": "../x.py"}), "Illegal script path: ../x.py"),
        (
            json!({"skill": "demo", "script": "scripts/../../demo/../../x.py"}),
            "Illegal script path: scripts/../../demo/../../x.py",
        ),
        (json!({"skill": "demo", "script": "/abs/path.py"}), "Illegal script path: /abs/path.py"),
        (json!({"skill": "demo", "script": "scripts/nope.py"}), "Script file not found: scripts/nope.py"),
        (json!({"skill": "demo", "script": "scripts"}), "Script file not found: scripts"),
        (json!({"skill": "demo", "script": "notes.txt"}), "Unsupported script type. Only .py and .sh are allowed."),
        (json!({"skill": "demo", "script": "SKILL.md"}), "Unsupported script type. Only .py and .sh are allowed."),
    ];
    for (args, error) in cases {
        assert_eq!(run(&tool, args.clone()).await, failure(&root, error), "{args}");
    }
    // A sibling skill's script is outside this skill's directory even though it is inside the root.
    let result = run(&tool, json!({"skill": "demo", "script": "../demo/scripts/echo.py"})).await;
    assert_eq!(result["ok"], true, "a path that comes back into the skill directory is fine: {result}");
    write(root.join("other/scripts/x.py"), "print(1)");
    let result = run(&tool, json!({"skill": "demo", "script": "../other/scripts/x.py"})).await;
    assert_eq!(result, failure(&root, "Illegal script path: ../other/scripts/x.py"));
}

#[tokio::test]
async fn inline_code_too_long() {
    let (_guard, root, _skill) = fixture();
    let mut config = SkillScriptConfig::new(&root);
    config.inline_max_chars = 8;
    let tool = SkillRunScript::new(config);
    let result = run(&tool, json!({"skill": "demo", "pythonCode": "print(123)"})).await;
    assert_eq!(result, failure(&root, "pythonCode too long. Maximum length is 8 characters."));
    let result = run(&tool, json!({"skill": "demo", "pythonCode": "print(1)"})).await;
    assert_eq!(result["stdout"], "1\n");
}

#[cfg(unix)]
#[tokio::test]
async fn symlinks_cannot_escape() {
    use std::os::unix::fs::symlink;
    let (_guard, root, skill) = fixture();
    let outside = root.parent().unwrap().join("outside");
    write(outside.join("evil.py"), "print('escaped')");
    write(outside.join("scripts/echo.py"), "print('escaped')");
    symlink(outside.join("evil.py"), skill.join("scripts/link.py")).unwrap();
    symlink(&outside, skill.join("linkdir")).unwrap();
    symlink(&outside, root.join("evil_skill")).unwrap();
    symlink(skill.join("scripts/echo.py"), skill.join("inside_link.py")).unwrap();
    symlink(skill.join("missing.py"), skill.join("dangling.py")).unwrap();
    let tool = tool(&root);
    assert_eq!(
        run(&tool, json!({"skill": "demo", "script": "scripts/link.py"})).await,
        failure(&root, "Illegal script path: scripts/link.py")
    );
    assert_eq!(
        run(&tool, json!({"skill": "demo", "script": "linkdir/evil.py"})).await,
        failure(&root, "Illegal script path: linkdir/evil.py")
    );
    // `linkdir/..` is the parent of `outside`, not the skill directory.
    assert_eq!(
        run(&tool, json!({"skill": "demo", "script": "linkdir/../skills/demo/scripts/echo.py"})).await["ok"],
        true,
        "resolves back into the skill directory"
    );
    assert_eq!(
        run(&tool, json!({"skill": "evil_skill", "script": "scripts/echo.py"})).await,
        failure(&root, "Illegal skill path: evil_skill")
    );
    assert_eq!(
        run(&tool, json!({"skill": "demo", "script": "dangling.py"})).await,
        failure(&root, "Illegal script path: dangling.py")
    );
    // A symlink that stays inside runs the real file, and reports it.
    let result = run(&tool, json!({"skill": "demo", "script": "inside_link.py"})).await;
    assert_eq!(result["ok"], true);
    assert_eq!(result["script"], skill.join("scripts/echo.py").display().to_string());
}

// The sandbox lets scripts write only to their own scratch directory, which goes with the call, so
// these tests see whether a process outlived its call in the process table (unique `sleep`
// durations mark them), not through a file it would write later.

#[tokio::test]
async fn timeout_kills_the_process_tree() {
    let (_guard, root, skill) = fixture();
    write(skill.join("scripts/slow.sh"), "(sleep 41.75; echo late) &\necho started\nsleep 42.25\necho never\n");
    let started = Instant::now();
    let result = run(&tool(&root), json!({"skill": "demo", "script": "scripts/slow.sh", "timeoutMs": 700})).await;
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    assert_eq!(
        (&result["ok"], &result["timedOut"], &result["exitCode"], &result["timeoutMs"]),
        (&json!(false), &json!(true), &json!(-1), &json!(700))
    );
    // What was printed before the limit is kept.
    assert_eq!(result["stdout"], "started\n");
    assert!(gone("42.25").await, "the script outlived the timeout");
    assert!(gone("41.75").await, "the background child outlived the timeout");
}

#[tokio::test]
async fn background_children_do_not_outlive_a_finished_script() {
    let (_guard, root, skill) = fixture();
    // The orphan keeps no pipe open, so the script's own exit ends the call at once.
    write(skill.join("scripts/orphan.sh"), "(sleep 43.5; echo late) >/dev/null 2>&1 &\necho done\n");
    let started = Instant::now();
    let result = run(&tool(&root), json!({"skill": "demo", "script": "scripts/orphan.sh"})).await;
    assert_eq!((&result["ok"], &result["stdout"]), (&json!(true), &json!("done\n")));
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(gone("43.5").await, "a background child outlived the script");
}

#[tokio::test]
async fn a_child_holding_the_pipe_does_not_stall_the_call() {
    let (_guard, root, skill) = fixture();
    write(skill.join("scripts/holder.sh"), "sleep 30 &\necho bye\n");
    let started = Instant::now();
    let result = run(&tool(&root), json!({"skill": "demo", "script": "scripts/holder.sh", "timeoutMs": 20000})).await;
    assert_eq!((&result["ok"], &result["timedOut"], &result["stdout"]), (&json!(true), &json!(false), &json!("bye\n")));
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
}

#[tokio::test]
async fn oversized_output_is_capped() {
    let (_guard, root, skill) = fixture();
    write(
        skill.join("scripts/loud.py"),
        "import sys\nsys.stdout.write('x' * 3_000_000)\nsys.stderr.write('é' * 3_000_000)\nprint('end')\n",
    );
    let result = run(&tool(&root), json!({"skill": "demo", "script": "scripts/loud.py"})).await;
    // Both pipes were drained while waiting: no deadlock, a clean exit.
    assert_eq!((&result["ok"], &result["exitCode"]), (&json!(true), &json!(0)), "{}", result["stderr"]);
    assert_eq!(result["stdout"], format!("{}\n[TRUNCATED]", "x".repeat(8000)));
    assert_eq!(result["stderr"], format!("{}\n[TRUNCATED]", "é".repeat(8000)));

    let mut config = SkillScriptConfig::new(&root);
    config.output_cap_chars = 5;
    let result = run(&SkillRunScript::new(config), json!({"skill": "demo", "script": "scripts/loud.py"})).await;
    assert_eq!((&result["stdout"], &result["stderr"]), (&json!("xxxxx\n[TRUNCATED]"), &json!("ééééé\n[TRUNCATED]")));
}

#[tokio::test]
async fn stdin_is_empty() {
    let (_guard, root, skill) = fixture();
    write(skill.join("scripts/stdin.py"), "import sys\nprint(repr(sys.stdin.read()))\n");
    let result = run(&tool(&root), json!({"skill": "demo", "script": "scripts/stdin.py", "timeoutMs": 30000})).await;
    assert_eq!((&result["ok"], &result["stdout"]), (&json!(true), &json!("''\n")));
}

#[tokio::test]
async fn timeout_is_capped_at_the_maximum() {
    let (_guard, root, _skill) = fixture();
    let result =
        run(&tool(&root), json!({"skill": "demo", "script": "scripts/echo.sh", "timeoutMs": 10_000_000})).await;
    assert_eq!(result["timeoutMs"], 120000);
    let result = run(&tool(&root), json!({"skill": "demo", "script": "scripts/echo.sh", "timeoutMs": -1})).await;
    assert_eq!(result["timeoutMs"], 10000);
}

#[tokio::test]
async fn missing_interpreter_is_a_start_failure() {
    let (_guard, root, skill) = fixture();
    let mut config = SkillScriptConfig::new(&root);
    config.python = "agw-no-such-python".to_owned();
    let result =
        run(&SkillRunScript::new(config), json!({"skill": "demo", "script": "scripts/echo.py", "args": ["a"]})).await;
    let script = skill.join("scripts/echo.py").display().to_string();
    assert_eq!(
        result,
        json!({
            "tool": "_skill_run_script_",
            "skillsRoot": root.display().to_string(),
            "skill": "demo",
            "scriptSource": "file",
            "script": script,
            "timeoutMs": 10000,
            "command": format!("agw-no-such-python {script} a"),
            "ok": false,
            "timedOut": false,
            "exitCode": -1,
            "stdout": "",
            "stderr": "Cannot run program \"agw-no-such-python\": not found in PATH",
        })
    );
}

#[tokio::test]
async fn inline_code_runs_in_the_skill_directory_and_its_directory_is_removed() {
    let (_guard, root, skill) = fixture();
    let code = "import os, sys\nprint(os.getcwd())\nprint(sys.argv[1:])\nprint(sorted(os.listdir(os.path.dirname(os.path.abspath(__file__)))) == [os.path.basename(__file__)])\n";
    let result = run(&tool(&root), json!({"skill": "demo", "pythonCode": code, "args": ["x", "y z"]})).await;
    assert_eq!(keys(&result), SUCCESS_KEYS);
    assert_eq!(result["scriptSource"], "inline");
    assert_eq!(result["ok"], true, "{result}");
    assert_eq!(result["stdout"], format!("{}\n['x', 'y z']\nTrue\n", skill.display()));
    let script = PathBuf::from(result["script"].as_str().unwrap());
    let name = script.file_name().unwrap().to_str().unwrap();
    assert!(name.starts_with("inline_") && name.ends_with(".py"), "{name}");
    assert!(result["command"].as_str().unwrap().starts_with(&format!("python3 {} x y z", script.display())));
    let dir = script.parent().unwrap();
    assert!(dir.file_name().unwrap().to_str().unwrap().starts_with("agw-skill-inline-"));
    assert!(!script.exists() && !dir.exists(), "inline directory left behind: {}", dir.display());
}

#[tokio::test]
async fn inline_directories_are_unique_per_call() {
    let (_guard, root, _skill) = fixture();
    let tool = tool(&root);
    let code = "import os\nprint(os.path.dirname(os.path.abspath(__file__)))";
    let (a, b) = tokio::join!(
        run(&tool, json!({"skill": "demo", "pythonCode": code})),
        run(&tool, json!({"skill": "demo", "pythonCode": code}))
    );
    assert_ne!(a["stdout"], b["stdout"]);
    assert_ne!(a["script"], b["script"]);
}

#[tokio::test]
async fn inline_directory_is_removed_after_a_timeout() {
    let (_guard, root, _skill) = fixture();
    let code = "import time\nprint('sleeping', flush=True)\ntime.sleep(30)\n";
    let result = run(&tool(&root), json!({"skill": "demo", "pythonCode": code, "timeoutMs": 800})).await;
    assert_eq!((&result["timedOut"], &result["exitCode"]), (&json!(true), &json!(-1)));
    // (Under load the interpreter may not even have printed yet.)
    assert!(result["stdout"] == "sleeping\n" || result["stdout"] == "", "{result}");
    let script = PathBuf::from(result["script"].as_str().unwrap());
    assert!(!script.parent().unwrap().exists());
}

#[tokio::test]
async fn a_cancelled_call_kills_its_process_and_removes_the_inline_directory() {
    let (_guard, root, _skill) = fixture();
    let marker = format!("cancel-marker-{}-{}", std::process::id(), Instant::now().elapsed().as_nanos());
    let code = "import time\ntime.sleep(44.25)\n";
    let tool = tool(&root);
    let call = run(&tool, json!({"skill": "demo", "pythonCode": code, "args": [marker], "timeoutMs": 60000}));
    // The interpreter's command line names the inline file: `python3 <dir>/inline_<uuid>.py <marker>`.
    let waiting = async {
        loop {
            if let Some(pid) = running(&marker).first() {
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let args: Vec<String> =
                    cmdline.split(|b| *b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
                if let Some(script) = args.iter().find(|a| a.ends_with(".py")) {
                    return PathBuf::from(script).parent().unwrap().to_path_buf();
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let inline_dir = tokio::select! {
        _ = call => panic!("the call should still be running"),
        dir = waiting => dir,
    };
    // `call` is dropped here: the run is cancelled.
    assert!(!inline_dir.exists(), "inline directory left behind after cancellation: {}", inline_dir.display());
    assert!(gone(&marker).await, "the cancelled script kept running");
}

#[tokio::test]
async fn implements_the_tool_trait() {
    let (_guard, root, _skill) = fixture();
    let tool = tool(&root);
    let dyn_tool: &dyn Tool = &tool;
    assert_eq!(dyn_tool.name(), "_skill_run_script_");
    let args = json!({"skill": "demo", "script": "scripts/echo.sh", "args": ["1"]});
    let ctx = ToolContext::default().with_grants(common::grants_for(&args));
    let output = dyn_tool.call(args, &ctx).await;
    let Ok(ToolOutput::Json(value)) = output else { panic!("{output:?}") };
    assert_eq!(value["stdout"], "1|");
    // Validation failures are results, not errors.
    let output = dyn_tool.call(json!({}), &ToolContext::default()).await;
    let Ok(ToolOutput::Json(value)) = output else { panic!("{output:?}") };
    assert_eq!(value["error"], "Missing argument: skill");
}

#[tokio::test]
async fn missing_root_reports_a_missing_skill() {
    let (_guard, dir) = temp();
    let root = dir.join("absent");
    let result = run(&tool(&root), json!({"skill": "demo", "script": "scripts/echo.py"})).await;
    assert_eq!(result, failure(&root, "Skill directory not found: demo"));
}

/// A script that pauses for the user (`docs/pausing-tools.md`): until the user continued, it
/// prints only the `needsUser` signal; the call's `continued` count reaches it as
/// `AGW_TOOL_CONTINUED`.
#[tokio::test]
async fn a_script_can_pause_for_the_user_and_sees_how_often_it_was_continued() {
    let (_guard, root, skill) = fixture();
    write(
        skill.join("scripts/credits.sh"),
        "if [ \"$AGW_TOOL_CONTINUED\" = 0 ]; then\n  printf '%s\\n' '{\"needsUser\":{\"code\":-1002,\"message\":\"Not enough credits\",\"data\":{\"balance\":0}}}'\nelse\n  printf '{\"image\":\"ok\",\"continued\":%s}' \"$AGW_TOOL_CONTINUED\"\nfi\n",
    );
    let tool = tool(&root);
    let args = json!({"skill": "demo", "script": "scripts/credits.sh"});
    let ctx = ToolContext::default().with_grants(common::grants_for(&args));
    let output = tool.call(args.clone(), &ctx).await;
    let Ok(ToolOutput::NeedsUser(status)) = output else { panic!("{output:?}") };
    assert_eq!((status.code, status.message.as_str()), (-1002, "Not enough credits"));
    assert_eq!(status.data, json!({"balance": 0}));

    let output = tool.call(args, &ctx.with_continued(1)).await;
    let Ok(ToolOutput::Json(value)) = output else { panic!("{output:?}") };
    assert_eq!(value["stdout"], r#"{"image":"ok","continued":1}"#, "a result like any other: {value}");
}
