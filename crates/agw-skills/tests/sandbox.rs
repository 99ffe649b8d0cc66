//! Issue 22, item 1: what a prompt-injected model tried through `_skill_run_script_`, as inline
//! code of an agent that enables it and as a script file of a skill. Each attempt must be denied
//! by the OS sandbox and show up as a failed run (non-zero exit, the error on stderr) while the
//! call itself completes. Then the resource limits, the agent's grants, and the refusal on a
//! kernel that cannot confine.
//!
//! The test process stands for agw: its pid is the "gateway pid" the scripts go after.

#![cfg(target_os = "linux")]

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agw_skills::{SkillRunScript, SkillScriptConfig};
use agw_tools::CodeGrants;
use agw_tools::sandbox::{Limits, SandboxConfig, SandboxSupport, probe};
use common::{gone, temp, write};
use serde_json::{Value, json};

/// Prints what it managed, then fails loudly (exit 1) if the attack was denied.
const ATTACKS: &[(&str, &str)] = &[
    ("read_passwd", "print(open('/etc/passwd').read())"),
    ("read_gateway_environ", "import sys\nprint(open(f'/proc/{sys.argv[1]}/environ', 'rb').read())"),
    ("write_outside", "import sys\nopen(sys.argv[2], 'w').write('pwned')\nprint('written')"),
    (
        "listen",
        "import socket\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen()\nprint('listening', s.getsockname())",
    ),
    (
        "call_gateway",
        "import socket, sys\nc = socket.create_connection(('127.0.0.1', int(sys.argv[3])), timeout=3)\n\
         c.sendall(b'GET /api/ap/chats HTTP/1.0\\r\\n\\r\\n')\nprint(c.recv(1000))",
    ),
];

/// A skills root with skill `attack` holding each attack as `scripts/<name>.py`.
struct Fixture {
    _guard: tempfile::TempDir,
    root: PathBuf,
    /// Where `write_outside` tries to write: outside every directory the script is given.
    outside: PathBuf,
}

fn fixture() -> Fixture {
    let (guard, dir) = temp();
    let root = dir.join("skills");
    write(root.join("attack/SKILL.md"), "---\nname: attack\n---\nbody");
    for (name, code) in ATTACKS {
        write(root.join(format!("attack/scripts/{name}.py")), code);
    }
    Fixture { _guard: guard, outside: dir.join("pwned.txt"), root }
}

fn config(root: &Path) -> SkillScriptConfig {
    SkillScriptConfig::new(root)
}

fn agent(inline: bool, network: bool) -> CodeGrants {
    CodeGrants { skills: vec!["attack".into()], allow_inline_code: inline, network }
}

/// The kernel confines, or these tests cannot say anything.
fn confined() -> bool {
    let support = probe();
    if !support.confines() {
        eprintln!("skipped: this kernel cannot confine ({} missing)", support.missing());
    }
    support.confines()
}

/// A loopback listener standing for agw's HTTP port; counts what reached it.
struct Gateway {
    listener: TcpListener,
}

impl Gateway {
    fn new() -> Gateway {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        Gateway { listener }
    }

    fn port(&self) -> u16 {
        self.listener.local_addr().unwrap().port()
    }

    /// Accepts what is pending and answers it; `true` when anything connected.
    fn reached(&self) -> bool {
        let mut reached = false;
        while let Ok((mut stream, _)) = self.listener.accept() {
            reached = true;
            let _ = stream.set_nonblocking(false);
            let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
            let _ = stream.read(&mut [0; 256]);
            let _ = stream.write_all(b"HTTP/1.0 200 OK\r\n\r\n{\"chats\":[]}");
        }
        reached
    }
}

fn args(fixture: &Fixture, gateway: &Gateway) -> Value {
    json!([std::process::id().to_string(), fixture.outside.display().to_string(), gateway.port().to_string()])
}

/// The run completed (no timeout, no start failure) and the attack failed in the script.
#[track_caller]
fn assert_denied(result: &Value, name: &str) {
    assert_eq!(result["timedOut"], false, "{name}: {result}");
    assert!(result.get("error").is_none(), "{name}: refused before running: {result}");
    assert_eq!(result["ok"], false, "{name} was not denied: {result}");
    assert_ne!(result["exitCode"], 0, "{name}: {result}");
    let stderr = result["stderr"].as_str().unwrap();
    assert!(stderr.contains("PermissionError") || stderr.contains("Permission denied"), "{name}: {stderr}");
    let stdout = result["stdout"].as_str().unwrap();
    assert!(!stdout.contains("root:") && !stdout.contains("listening") && !stdout.contains("written"), "{stdout}");
}

async fn each_attack_is_denied(inline: bool) {
    if !confined() {
        return;
    }
    let fixture = fixture();
    let gateway = Gateway::new();
    let tool = SkillRunScript::new(config(&fixture.root));
    for (name, code) in ATTACKS {
        let call = if inline {
            json!({"skill": "attack", "pythonCode": code, "args": args(&fixture, &gateway)})
        } else {
            json!({"skill": "attack", "script": format!("scripts/{name}.py"), "args": args(&fixture, &gateway)})
        };
        let result = tool.run(&call, &agent(inline, false)).await;
        assert_denied(&result, name);
    }
    assert!(!fixture.outside.exists(), "a file was written outside the scratch directory");
    assert!(!gateway.reached(), "a script reached the gateway's port");
}

#[tokio::test]
async fn inline_code_attacks_are_denied() {
    each_attack_is_denied(true).await;
}

#[tokio::test]
async fn skill_script_attacks_are_denied() {
    each_attack_is_denied(false).await;
}

#[tokio::test]
async fn the_scratch_directory_is_writable_and_private() {
    if !confined() {
        return;
    }
    let fixture = fixture();
    let tool = SkillRunScript::new(config(&fixture.root));
    let code = "import os, tempfile\n\
                home = os.environ['HOME']\n\
                assert home == os.environ['TMPDIR'] == tempfile.gettempdir(), home\n\
                open(os.path.join(home, 'note.txt'), 'w').write('ok')\n\
                print(open(os.path.join(home, 'note.txt')).read(), oct(os.stat(home).st_mode & 0o777), home)\n\
                try:\n    open('in-skill-dir.txt', 'w')\nexcept PermissionError:\n    print('skill dir read-only')\n";
    let result = tool.run(&json!({"skill": "attack", "pythonCode": code}), &agent(true, false)).await;
    assert_eq!(result["ok"], true, "{result}");
    let stdout = result["stdout"].as_str().unwrap();
    assert!(stdout.starts_with("ok 0o700 "), "{stdout}");
    assert!(stdout.contains("skill dir read-only"), "{stdout}");
    let scratch = stdout.lines().next().unwrap().rsplit(' ').next().unwrap();
    assert!(!Path::new(scratch).exists(), "the scratch directory outlived the call: {scratch}");
}

#[tokio::test]
async fn the_network_opens_only_for_an_agent_that_allows_it() {
    if !confined() {
        return;
    }
    let fixture = fixture();
    let gateway = Gateway::new();
    let tool = SkillRunScript::new(config(&fixture.root));
    let call = json!({"skill": "attack", "script": "scripts/call_gateway.py", "args": args(&fixture, &gateway)});
    // The listener answers once the script connected; run both at once.
    let grants = agent(false, true);
    let run = tool.run(&call, &grants);
    tokio::pin!(run);
    let mut reached = false;
    let result = loop {
        tokio::select! {
            result = &mut run => break result,
            () = tokio::time::sleep(Duration::from_millis(20)) => reached |= gateway.reached(),
        }
    };
    assert_eq!(result["ok"], true, "{result}");
    assert!(reached && result["stdout"].as_str().unwrap().contains("chats"), "{result}");
}

/// A tool whose sandbox has `limits`.
fn limited(root: &Path, limits: Limits) -> SkillRunScript {
    let mut config = config(root);
    config.sandbox.limits = limits;
    SkillRunScript::new(config)
}

#[tokio::test]
async fn a_fork_bomb_ends_at_the_process_limit() {
    if !confined() || !probe().root {
        eprintln!("skipped: the process limit applies when agw runs as root");
        return;
    }
    let fixture = fixture();
    let tool = limited(&fixture.root, Limits { processes: 16, ..Limits::default() });
    // Children sleep (marked by their duration) so each fork holds a slot; the parent counts.
    let code = "import os, time\nn = 0\nwhile n < 1000:\n    try:\n        pid = os.fork()\n    except OSError as e:\n        \
                print('refused after', n, 'errno', e.errno)\n        break\n    if pid == 0:\n        time.sleep(45.125)\n        \
                os._exit(0)\n    n += 1\n";
    let started = Instant::now();
    let result =
        tool.run(&json!({"skill": "attack", "pythonCode": code, "timeoutMs": 20000}), &agent(true, false)).await;
    assert!(started.elapsed() < Duration::from_secs(15), "{:?}", started.elapsed());
    let stdout = result["stdout"].as_str().unwrap();
    let forked: u32 = stdout.split_whitespace().nth(2).and_then(|n| n.parse().ok()).unwrap_or(u32::MAX);
    assert!(stdout.starts_with("refused after") && forked < 16, "{result}");
    assert!(stdout.trim_end().ends_with("errno 11"), "EAGAIN expected: {stdout}");
    // The script returned while its children slept: the call's end killed them all.
    assert!(gone("45.125").await, "forked children outlived the call");
}

#[tokio::test]
async fn a_memory_hog_ends_at_the_memory_limit() {
    if !confined() {
        return;
    }
    let fixture = fixture();
    let tool = limited(&fixture.root, Limits { memory_mib: 256, ..Limits::default() });
    let code =
        "blocks = []\nfor _ in range(64):\n    blocks.append(bytearray(64 * 1024 * 1024))\nprint('allocated 4 GiB')\n";
    let started = Instant::now();
    let result =
        tool.run(&json!({"skill": "attack", "pythonCode": code, "timeoutMs": 20000}), &agent(true, false)).await;
    assert!(started.elapsed() < Duration::from_secs(15), "{:?}", started.elapsed());
    assert_eq!((&result["ok"], &result["timedOut"], &result["exitCode"]), (&json!(false), &json!(false), &json!(1)));
    assert!(result["stderr"].as_str().unwrap().contains("MemoryError"), "{result}");
}

#[tokio::test]
async fn a_cpu_spin_ends_at_the_cpu_limit() {
    if !confined() {
        return;
    }
    let fixture = fixture();
    let tool = limited(&fixture.root, Limits { cpu_seconds: 1, ..Limits::default() });
    let started = Instant::now();
    let call = json!({"skill": "attack", "pythonCode": "while True:\n    pass\n", "timeoutMs": 30000});
    let result = tool.run(&call, &agent(true, false)).await;
    // SIGXCPU after one second of CPU (a little more wall time on a busy machine), not the 30 s
    // wall-clock timeout.
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
    assert_eq!((&result["ok"], &result["timedOut"], &result["exitCode"]), (&json!(false), &json!(false), &json!(-1)));
}

#[tokio::test]
async fn a_huge_file_ends_at_the_file_size_limit() {
    if !confined() {
        return;
    }
    let fixture = fixture();
    let tool = limited(&fixture.root, Limits { file_size_mib: 1, ..Limits::default() });
    let code =
        "import os\nwith open(os.path.join(os.environ['TMPDIR'], 'big'), 'wb') as f:\n    f.write(b'x' * 2_000_000)\n";
    let result = tool.run(&json!({"skill": "attack", "pythonCode": code}), &agent(true, false)).await;
    assert_eq!(result["ok"], false, "{result}");
    assert!(result["stderr"].as_str().unwrap().contains("File too large"), "{result}");
}

#[tokio::test]
async fn inline_code_is_refused_unless_the_agent_enables_it() {
    let fixture = fixture();
    let tool = SkillRunScript::new(config(&fixture.root));
    let call = json!({"skill": "attack", "pythonCode": "print('ran')"});
    let result = tool.run(&call, &agent(false, false)).await;
    assert_eq!(result["ok"], false);
    assert_eq!(
        result["error"],
        "Inline pythonCode is not enabled for this agent (skillConfig.allowInlineCode is false); run one of the \
         skill's scripts instead."
    );
    assert_eq!(result["stdout"], "");
    // An agent that enables it runs the same call.
    assert_eq!(tool.run(&call, &agent(true, false)).await["stdout"], "ran\n");
}

#[tokio::test]
async fn a_skill_the_agent_does_not_configure_is_refused() {
    let fixture = fixture();
    write(fixture.root.join("other/scripts/hello.py"), "print('hello')");
    let tool = SkillRunScript::new(config(&fixture.root));
    let call = json!({"skill": "other", "script": "scripts/hello.py"});
    let result = tool.run(&call, &agent(true, false)).await;
    assert_eq!(result["error"], "Skill not enabled for this agent: other. Allowed skills: attack");
    let none = CodeGrants::default();
    let result = tool.run(&call, &none).await;
    assert_eq!(result["error"], "Skill not enabled for this agent: other. This agent has no skills configured.");
    let grants = CodeGrants { skills: vec!["attack".into(), "other".into()], ..CodeGrants::default() };
    assert_eq!(tool.run(&call, &grants).await["stdout"], "hello\n");
}

#[tokio::test]
async fn code_runs_are_refused_when_the_kernel_cannot_confine_them() {
    let fixture = fixture();
    let old_kernel = SandboxConfig {
        support: SandboxSupport { root: probe().root, ..SandboxSupport::none() },
        ..SandboxConfig::default()
    };
    let mut refused = config(&fixture.root);
    refused.sandbox = old_kernel.clone();
    let call = json!({"skill": "attack", "pythonCode": "print('ran')"});
    let result = SkillRunScript::new(refused).run(&call, &agent(true, false)).await;
    assert_eq!(result["ok"], false);
    let error = result["error"].as_str().unwrap();
    assert!(error.starts_with("Code execution is disabled: this system cannot confine"), "{error}");
    assert!(error.contains("Landlock and seccomp unavailable") && error.contains("AGW_SANDBOX_ALLOW_UNCONFINED=true"));

    // The operator's explicit choice runs it anyway (with what is left: identity and limits).
    let mut accepted = config(&fixture.root);
    accepted.sandbox = SandboxConfig { allow_unconfined: true, ..old_kernel };
    let result = SkillRunScript::new(accepted).run(&call, &agent(true, false)).await;
    assert_eq!((&result["ok"], &result["stdout"]), (&json!(true), &json!("ran\n")), "{result}");
}
