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
use std::os::unix::net::{UnixDatagram, UnixListener};
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
    // Issue 32: a pathname unix socket any user may write to (argv[4]: a stream socket, argv[5]: a
    // datagram socket, both in a world-writable directory).
    (
        "connect_unix_socket",
        "import socket, sys\ns = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\ns.connect(sys.argv[4])\n\
         s.sendall(b'hello')\nprint('written to', sys.argv[4])",
    ),
    (
        "send_through_a_socketpair",
        "import socket, sys\na, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)\n\
         a.sendto(b'hello', sys.argv[5])\nprint('written to', sys.argv[5])",
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
    CodeGrants { skills: vec!["attack".into()], allow_inline_code: inline, network, ..CodeGrants::default() }
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

/// Unix sockets standing for a local service's (a database's, D-Bus's): a stream listener and a
/// datagram socket, mode 0777 in a fresh world-writable (1777) directory, so file permissions let
/// anyone connect. Counts what reached them.
struct LocalService {
    _dir: tempfile::TempDir,
    stream_path: PathBuf,
    dgram_path: PathBuf,
    stream: UnixListener,
    dgram: UnixDatagram,
}

impl LocalService {
    fn new() -> LocalService {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::Builder::new().prefix("agw-unix-").tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        let (stream_path, dgram_path) = (dir.path().join("service.sock"), dir.path().join("log.sock"));
        let stream = UnixListener::bind(&stream_path).unwrap();
        let dgram = UnixDatagram::bind(&dgram_path).unwrap();
        for path in [&stream_path, &dgram_path] {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).unwrap();
        }
        stream.set_nonblocking(true).unwrap();
        dgram.set_nonblocking(true).unwrap();
        LocalService { _dir: dir, stream_path, dgram_path, stream, dgram }
    }

    /// Accepts and reads what is pending; `true` when anything connected or arrived.
    fn reached(&self) -> bool {
        let mut reached = false;
        while self.stream.accept().is_ok() {
            reached = true;
        }
        while self.dgram.recv(&mut [0; 64]).is_ok() {
            reached = true;
        }
        reached
    }
}

fn args(fixture: &Fixture, gateway: &Gateway, service: &LocalService) -> Value {
    json!([
        std::process::id().to_string(),
        fixture.outside.display().to_string(),
        gateway.port().to_string(),
        service.stream_path.display().to_string(),
        service.dgram_path.display().to_string(),
    ])
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
    let service = LocalService::new();
    let tool = SkillRunScript::new(config(&fixture.root));
    for (name, code) in ATTACKS {
        let args = args(&fixture, &gateway, &service);
        let call = if inline {
            json!({"skill": "attack", "pythonCode": code, "args": args})
        } else {
            json!({"skill": "attack", "script": format!("scripts/{name}.py"), "args": args})
        };
        let result = tool.run(&call, &agent(inline, false)).await;
        assert_denied(&result, name);
    }
    assert!(!fixture.outside.exists(), "a file was written outside the scratch directory");
    assert!(!gateway.reached(), "a script reached the gateway's port");
    assert!(!service.reached(), "a script reached a unix socket");
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
    let service = LocalService::new();
    let tool = SkillRunScript::new(config(&fixture.root));
    let call =
        json!({"skill": "attack", "script": "scripts/call_gateway.py", "args": args(&fixture, &gateway, &service)});
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

/// Issue 32: a script logged in to the local PostgreSQL through its unix socket (mode 0777,
/// `trust` for local connections) as the superuser, which runs programs (`COPY … FROM PROGRAM`);
/// the MariaDB socket answered too. Each database socket this machine has must be refused.
const DATABASE_SOCKETS: &[(&str, &str)] = &[
    ("/var/run/postgresql/.s.PGSQL.5432", "postgres_login.py"),
    ("/tmp/.s.PGSQL.5432", "postgres_login.py"),
    ("/var/run/mysqld/mysqld.sock", "mysql_greeting.py"),
    ("/var/lib/mysql/mysql.sock", "mysql_greeting.py"),
];

/// A PostgreSQL startup message (protocol 3.0, user and database `postgres`); `trust` answers
/// AuthenticationOk at once.
const POSTGRES_LOGIN: &str = "import socket, struct, sys\n\
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\ns.settimeout(5)\ns.connect(sys.argv[1])\n\
    params = b'user\\0postgres\\0database\\0postgres\\0\\0'\n\
    s.sendall(struct.pack('!ii', 8 + len(params), 196608) + params)\nanswer = s.recv(4096)\n\
    ok = answer[:1] == b'R' and struct.unpack('!i', answer[5:9])[0] == 0\n\
    print('logged in as postgres' if ok else 'answered %r' % answer[:40])\n";

/// MariaDB/MySQL greet every client first.
const MYSQL_GREETING: &str = "import socket, sys\n\
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\ns.settimeout(5)\ns.connect(sys.argv[1])\n\
    print('greeted by', s.recv(4096)[:40])\n";

#[tokio::test]
async fn the_local_database_sockets_are_refused() {
    if !confined() {
        return;
    }
    let present: Vec<&(&str, &str)> = DATABASE_SOCKETS.iter().filter(|(path, _)| Path::new(path).exists()).collect();
    if present.is_empty() {
        eprintln!("skipped: no PostgreSQL or MariaDB unix socket on this machine (looked at {DATABASE_SOCKETS:?})");
        return;
    }
    let fixture = fixture();
    write(fixture.root.join("attack/scripts/postgres_login.py"), POSTGRES_LOGIN);
    write(fixture.root.join("attack/scripts/mysql_greeting.py"), MYSQL_GREETING);
    let tool = SkillRunScript::new(config(&fixture.root));
    for (path, script) in present {
        let call = json!({"skill": "attack", "script": format!("scripts/{script}"), "args": [path]});
        let result = tool.run(&call, &agent(false, false)).await;
        assert_denied(&result, path);
        let stdout = result["stdout"].as_str().unwrap();
        assert!(!stdout.contains("logged in") && !stdout.contains("greeted"), "{path}: {result}");
    }
}

#[tokio::test]
async fn a_harmless_script_still_runs_without_unix_sockets() {
    if !confined() {
        return;
    }
    let fixture = fixture();
    let tool = SkillRunScript::new(config(&fixture.root));
    // What ordinary programs do with AF_UNIX without reaching anyone: a socketpair (asyncio's
    // self-pipe, multiprocessing's Pipe), and a user lookup, which glibc first tries through nscd's
    // socket and then answers from the files (unreadable here: "no such user", not a crash).
    let code = "import asyncio, multiprocessing, pwd, os, socket\n\
                a, b = socket.socketpair()\na.sendall(b'pair')\nprint(b.recv(4).decode())\n\
                print(asyncio.run(asyncio.sleep(0, 'asyncio')))\n\
                r, w = multiprocessing.Pipe()\nw.send('pipe')\nprint(r.recv())\n\
                try:\n    pwd.getpwuid(os.getuid())\n    print('user found')\n\
                except KeyError:\n    print('no such user')\n";
    let result = tool.run(&json!({"skill": "attack", "pythonCode": code}), &agent(true, false)).await;
    assert_eq!(result["ok"], true, "{result}");
    assert_eq!(result["stdout"], "pair\nasyncio\npipe\nno such user\n", "{result}");
}

#[tokio::test]
async fn unix_sockets_open_only_for_an_agent_that_grants_them() {
    if !confined() {
        return;
    }
    let fixture = fixture();
    let gateway = Gateway::new();
    let service = LocalService::new();
    let tool = SkillRunScript::new(config(&fixture.root));
    let grants = CodeGrants { unix_sockets: true, ..agent(false, false) };
    for script in ["connect_unix_socket", "send_through_a_socketpair"] {
        let call = json!({"skill": "attack", "script": format!("scripts/{script}.py"),
            "args": args(&fixture, &gateway, &service)});
        let result = tool.run(&call, &grants).await;
        assert_eq!(result["ok"], true, "{script}: {result}");
        assert!(service.reached(), "{script}: nothing arrived");
    }
    // The grant is for unix sockets only: IP stays closed.
    let call =
        json!({"skill": "attack", "script": "scripts/call_gateway.py", "args": args(&fixture, &gateway, &service)});
    assert_denied(&tool.run(&call, &grants).await, "call_gateway with the unix grant");
    assert!(!gateway.reached());
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
