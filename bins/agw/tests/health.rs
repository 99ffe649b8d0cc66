//! `agw health`, the container HEALTHCHECK probe, against the real server.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

struct Server {
    child: Child,
    base: String,
    dir: std::path::PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn serve(tag: &str) -> Server {
    let dir = std::env::temp_dir().join(format!("agw-health-test-{tag}-{}", std::process::id()));
    let mut child = Command::new(env!("CARGO_BIN_EXE_agw"))
        .args(["serve", "--port", "0"])
        .env_remove("AGW_CONFIG")
        .env_remove("SERVER_ADDRESS")
        .env_remove("AGENT_EXTERNAL_DIR")
        .env("MEMORY_CHAT_DIR", dir.join("chats"))
        .env("AGENT_CHAT_EVENT_CALLBACK_ENABLED", "false")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let base = line.trim().strip_prefix("agw listening on ").unwrap().to_string();
    Server { child, base, dir }
}

fn health(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agw"));
    cmd.arg("health").args(args).env_remove("SERVER_PORT");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

#[test]
fn healthy_server_exits_zero_by_url_and_by_server_port() {
    let server = serve("healthy");
    let out = health(&["--url", &format!("{}/healthz", server.base)], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // The default URL is 127.0.0.1 on SERVER_PORT, as the container sets it.
    let port = server.base.rsplit(':').next().unwrap();
    let out = health(&[], &[("SERVER_PORT", port), ("HTTP_PROXY", "http://127.0.0.1:9")]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn anything_but_200_in_time_exits_one() {
    let server = serve("unhealthy");
    let out = health(&["--url", &format!("{}/nowhere", server.base)], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("404"));

    // Nothing listening.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let out = health(&["--url", &format!("http://127.0.0.1:{port}/healthz")], &[]);
    assert_eq!(out.status.code(), Some(1));

    // Accepts, never answers: the timeout decides.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/healthz", silent.local_addr().unwrap());
    let started = Instant::now();
    let out = health(&["--url", &url, "--timeout", "300ms"], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    drop(silent);
}
