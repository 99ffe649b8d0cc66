//! `_bash_` in the OS sandbox: its allowed commands still work (ls, cat, head, pwd, free, df,
//! git), but even an allowed command whose arguments are not path-checked cannot read outside the
//! roots, read agw's environment, write anywhere, reach the network or a local service's unix
//! socket; and on a kernel that cannot confine, commands are refused unless the operator accepts
//! running them unconfined.

#![cfg(target_os = "linux")]

use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use agw_testkit::TempDir;
use agw_tools::sandbox::{SandboxConfig, SandboxSupport, probe};
use agw_tools::{BashConfig, BashTool, CodeGrants};

const SECRET: &str = "TOP-SECRET-2718";

struct Fixture {
    root: TempDir,
    work: PathBuf,
}

fn fixture() -> Fixture {
    let root = TempDir::new("bash-sandbox");
    let work = root.mkdir("work");
    root.write("work/notes.txt", "hello notes\nsecond line\n");
    root.write("outside/secret.txt", SECRET);
    Fixture { root, work }
}

impl Fixture {
    /// `commands` allowed, none of them path-checked: only the sandbox stands between them and
    /// the rest of the machine.
    fn unchecked(&self, commands: &[&str]) -> BashTool {
        BashTool::new(BashConfig::from_lists(self.work.to_str(), [""; 0], commands.iter().copied(), ["none"]))
    }
}

fn confined() -> bool {
    let support = probe();
    if !support.confines() {
        eprintln!("skipped: this kernel cannot confine ({} missing)", support.missing());
    }
    support.confines()
}

fn exit_code(out: &str) -> i32 {
    out.strip_prefix("exitCode: ").and_then(|rest| rest.split('\n').next()).and_then(|c| c.parse().ok()).unwrap()
}

#[tokio::test]
async fn allowed_commands_still_work_in_the_sandbox() {
    if !confined() {
        return;
    }
    let fixture = fixture();
    let tool = BashTool::new(BashConfig::from_lists(fixture.work.to_str(), [""; 0], [""; 0], [""; 0]));
    for command in ["ls -la", "cat notes.txt", "head -n 1 notes.txt", "tail -n 1 notes.txt", "pwd", "free", "df"] {
        let out = tool.run_command(command).await;
        assert_eq!(exit_code(&out), 0, "{command}: {out}");
    }
    assert!(tool.run_command("cat notes.txt").await.contains("hello notes"));
    assert!(tool.run_command("pwd").await.contains(&format!("stdout:\n{}\n", fixture.work.display())));
}

#[tokio::test]
async fn git_reads_a_repository_it_does_not_own() {
    if !confined() || which("git").is_none() {
        return;
    }
    let fixture = fixture();
    let git = |args: &[&str]| {
        let status = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "init.defaultBranch=main"])
            .args(args)
            .current_dir(&fixture.work)
            .output()
            .unwrap();
        assert!(status.status.success(), "{status:?}");
    };
    git(&["init", "-q"]);
    git(&["add", "notes.txt"]);
    git(&["commit", "-q", "-m", "first commit"]);
    let tool = BashTool::new(BashConfig::from_lists(fixture.work.to_str(), [""; 0], [""; 0], [""; 0]));
    let out = tool.run_command("git log --oneline").await;
    assert!(out.starts_with("exitCode: 0") && out.contains("first commit"), "{out}");
    let out = tool.run_command("git status --short").await;
    assert_eq!(exit_code(&out), 0, "{out}");
}

fn which(program: &str) -> Option<PathBuf> {
    agw_tools::sandbox::find_program(program)
}

#[tokio::test]
async fn an_allowed_command_cannot_read_outside_the_roots() {
    if !confined() {
        return;
    }
    let fixture = fixture();
    let tool = fixture.unchecked(&["cat", "ls", "head"]);
    let outside = fixture.root.path().join("outside/secret.txt");
    for command in [
        format!("cat {}", outside.display()),
        "cat ../outside/secret.txt".to_owned(),
        "head /etc/passwd".to_owned(),
        "cat /etc/shadow".to_owned(),
        format!("ls {}", fixture.root.path().join("outside").display()),
        "ls /root".to_owned(),
    ] {
        let out = tool.run_command(&command).await;
        assert_ne!(exit_code(&out), 0, "{command}: {out}");
        assert!(out.contains("Permission denied"), "{command}: {out}");
        assert!(!out.contains(SECRET) && !out.contains("root:x:0:0"), "{command}: {out}");
    }
}

#[tokio::test]
async fn the_gateway_environment_cannot_be_read_through_proc() {
    if !confined() {
        return;
    }
    let fixture = fixture();
    let tool = fixture.unchecked(&["cat", "ls"]);
    let out = tool.run_command(&format!("cat /proc/{}/environ", std::process::id())).await;
    assert_ne!(exit_code(&out), 0, "{out}");
    assert!(out.contains("Permission denied"), "{out}");
    assert!(!out.contains("PATH="), "{out}");
    let out = tool.run_command("cat /proc/1/cmdline").await;
    assert!(out.contains("Permission denied"), "{out}");
    // Its own /proc entry stays readable (df and ps-like tools need it).
    let out = tool.run_command("cat /proc/self/status").await;
    assert!(out.starts_with("exitCode: 0") && out.contains("NoNewPrivs:\t1"), "{out}");
    assert!(out.contains("Seccomp:\t2"), "seccomp filter mode: {out}");
}

#[tokio::test]
async fn a_command_writes_only_to_its_scratch_directory() {
    if !confined() {
        return;
    }
    let fixture = fixture();
    let tool = fixture.unchecked(&["touch", "mkdir"]);
    let outside = fixture.root.path().join("outside/created.txt");
    for command in
        [format!("touch {}", outside.display()), "touch created.txt".to_owned(), "mkdir /tmp/agw-pwned".to_owned()]
    {
        let out = tool.run_command(&command).await;
        assert_ne!(exit_code(&out), 0, "{command}: {out}");
        assert!(out.contains("Permission denied"), "{command}: {out}");
    }
    assert!(!outside.exists() && !fixture.work.join("created.txt").exists());
    assert!(!std::path::Path::new("/tmp/agw-pwned").exists());
}

#[tokio::test]
async fn the_network_is_closed_unless_the_agent_opens_it() {
    if !confined() || which("python3").is_none() {
        return;
    }
    let fixture = fixture();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    fixture.root.write(
        "work/connect.py",
        "import socket, sys\nsocket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=3).close()\nprint('connected')\n",
    );
    let tool = fixture.unchecked(&["python3"]);
    let command = format!("python3 connect.py {port}");
    let out = tool.run_command(&command).await;
    assert_ne!(exit_code(&out), 0, "{out}");
    assert!(out.contains("PermissionError"), "{out}");
    let open = CodeGrants { network: true, ..CodeGrants::default() };
    let out = tool.run(&command, &open).await;
    assert!(out.starts_with("exitCode: 0") && out.contains("connected"), "{out}");
}

/// Issue 32: an interpreter the operator allowed connects to a unix socket that file permissions
/// leave open to everyone — one the test listens on in a world-writable directory, and the local
/// PostgreSQL's (mode 0777, `trust`: a superuser login runs programs) where there is one.
#[tokio::test]
async fn a_unix_socket_is_closed_unless_the_agent_opens_it() {
    use std::os::unix::fs::PermissionsExt;
    if !confined() || which("python3").is_none() {
        return;
    }
    let fixture = fixture();
    let public = tempfile::Builder::new().prefix("agw-unix-").tempdir().unwrap();
    std::fs::set_permissions(public.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    let socket = public.path().join("service.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o777)).unwrap();
    listener.set_nonblocking(true).unwrap();
    let reached = || std::iter::from_fn(|| listener.accept().ok()).count() > 0;
    fixture.root.write(
        "work/unix.py",
        "import socket, sys\ns = socket.socket(socket.AF_UNIX)\ns.settimeout(5)\ns.connect(sys.argv[1])\n\
         print('connected to', sys.argv[1])\n",
    );
    let tool = fixture.unchecked(&["python3"]);
    let mut targets = vec![socket.display().to_string()];
    const POSTGRES: &str = "/var/run/postgresql/.s.PGSQL.5432";
    if Path::new(POSTGRES).exists() {
        targets.push(POSTGRES.to_owned());
    } else {
        eprintln!("no PostgreSQL socket at {POSTGRES}: only the test's own socket is tried");
    }
    for target in &targets {
        let out = tool.run_command(&format!("python3 unix.py {target}")).await;
        assert_ne!(exit_code(&out), 0, "{target}: {out}");
        assert!(out.contains("PermissionError") && !out.contains("connected to"), "{target}: {out}");
    }
    assert!(!reached(), "a command reached the test's unix socket");
    // The agent's grant opens it (and only it: IP stays closed).
    let open = CodeGrants { unix_sockets: true, ..CodeGrants::default() };
    let out = tool.run(&format!("python3 unix.py {}", socket.display()), &open).await;
    assert!(out.starts_with("exitCode: 0") && out.contains("connected to"), "{out}");
    assert!(reached(), "the granted connection did not arrive");
}

#[tokio::test]
async fn commands_are_refused_when_the_kernel_cannot_confine_them() {
    let fixture = fixture();
    let old_kernel = SandboxConfig {
        support: SandboxSupport { root: probe().root, ..SandboxSupport::none() },
        ..SandboxConfig::default()
    };
    let mut config = BashConfig::from_lists(fixture.work.to_str(), [""; 0], [""; 0], [""; 0]);
    config.sandbox = old_kernel.clone();
    let out = BashTool::new(config.clone()).run_command("cat notes.txt").await;
    assert!(out.starts_with("exitCode: -1\n"), "{out}");
    assert!(out.contains("stderr:\nCode execution is disabled: this system cannot confine"), "{out}");
    assert!(!out.contains("hello notes"), "{out}");

    config.sandbox = SandboxConfig { allow_unconfined: true, ..old_kernel };
    let out = BashTool::new(config).run_command("cat notes.txt").await;
    assert!(out.starts_with("exitCode: 0") && out.contains("hello notes"), "{out}");
}
