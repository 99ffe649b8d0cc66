//! The gateway under test: the real `agw` binary as a child process, configured only through
//! its environment, so its CPU time and memory are its own (read from `/proc/<pid>`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::sys;

/// The REACT agent every scenario runs: turn 1 calls `mock_city_weather` (a cheap built-in
/// backend tool), turn 2 streams the answer. Budgets are generous: the 10,000-stream ramp-up
/// holds streams open for a while.
const AGENT: &str = r#"{
  "key": "bench",
  "name": "Load benchmark",
  "mode": "REACT",
  "modelConfig": { "providerKey": "bench", "model": "fixture-model" },
  "toolConfig": { "backends": ["mock_city_weather"] },
  "budget": {
    "runTimeoutMs": 900000,
    "model": { "maxCalls": 4, "timeoutMs": 900000 },
    "tool": { "maxCalls": 2, "timeoutMs": 10000 }
  },
  "react": {
    "maxSteps": 2,
    "systemPrompt": "You are a benchmark agent. Call mock_city_weather once, then answer."
  }
}
"#;

/// How the child is configured.
pub struct AgwOptions<'a> {
    pub bin: &'a Path,
    pub dir: &'a Path,
    pub provider_url: &'a str,
    pub memory: bool,
    pub fsync: &'a str,
    pub log: &'a str,
    /// `NAME=VALUE` pairs added last (they win).
    pub extra_env: &'a [String],
    /// CPUs agw may run on (empty: all).
    pub cpus: &'a [usize],
    /// Start the relay floor (`agw-load relay`, [`crate::relay`]) in agw's place.
    pub relay: bool,
}

pub struct Agw {
    child: Child,
    pid: u32,
    addr: SocketAddr,
}

impl Agw {
    /// Writes the agent file, starts `agw serve` on a free loopback port and waits for its
    /// "listening" line (at most 30 s).
    pub async fn start(options: &AgwOptions<'_>) -> anyhow::Result<Self> {
        let agents = options.dir.join("agents");
        std::fs::create_dir_all(&agents)?;
        std::fs::write(agents.join("bench.json"), AGENT)?;
        let log = std::fs::File::create(options.dir.join("agw.log"))?;
        let mut command = if options.relay {
            let mut relay = Command::new(std::env::current_exe()?);
            relay.arg("relay");
            relay
        } else {
            let mut agw = Command::new(options.bin);
            agw.arg("serve");
            agw
        };
        command
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("SERVER_PORT", "0")
            .env("SERVER_ADDRESS", "127.0.0.1")
            .env("SERVER_SHUTDOWN_GRACE_MS", "1000")
            .env("AGENT_EXTERNAL_DIR", &agents)
            .env("AGW_RESOURCES_SYNC_BUNDLED", "false")
            .env("AGENT_DATA_EXTERNAL_DIR", options.dir.join("data"))
            .env("MEMORY_CHAT_DIR", chats_dir(options.dir))
            .env("MEMORY_CHAT_FSYNC", options.fsync)
            .env("AGW_MEMORY_ENABLED", if options.memory { "true" } else { "false" })
            .env("AGENT_PROVIDERS_BENCH_BASE_URL", options.provider_url)
            .env("AGENT_PROVIDERS_BENCH_API_KEY", "sk-bench")
            .env("AGENT_PROVIDERS_BENCH_MODEL", "fixture-model")
            // Nothing listens for the webhook on loopback; a real deployment configures or
            // disables it.
            .env("AGENT_CHAT_EVENT_CALLBACK_ENABLED", "false")
            .env("AGW_DEMO_ENABLED", "false")
            .env("AGW_LOG", options.log)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .kill_on_drop(true);
        for pair in options.extra_env {
            let (name, value) =
                pair.split_once('=').with_context(|| format!("--agw-env {pair:?}: expected NAME=VALUE"))?;
            command.env(name, value);
        }
        if !options.cpus.is_empty() {
            let cpus = options.cpus.to_vec();
            // SAFETY: only sched_setaffinity (async-signal-safe) between fork and exec.
            unsafe {
                command.pre_exec(move || crate::sys::pin_to(0, &cpus));
            }
        }
        let mut child = command.spawn().with_context(|| format!("cannot start {}", options.bin.display()))?;
        let pid = child.id().context("agw exited at once")?;
        let stdout = child.stdout.take().context("agw stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let addr = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(line) = lines.next_line().await? {
                if let Some(url) = line.trim().strip_prefix("agw listening on http://") {
                    return Ok(url.parse::<SocketAddr>()?);
                }
            }
            bail!("agw exited before listening (see {})", options.dir.join("agw.log").display())
        })
        .await
        .context("agw did not start listening within 30 s")??;
        // Keep draining stdout so the child never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(Self { child, pid, addr })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn cpu(&self) -> Duration {
        sys::process_cpu(self.pid).unwrap_or_default()
    }

    /// SIGTERM, then SIGKILL after 5 s.
    pub async fn stop(mut self) {
        // SAFETY: signalling our own child by its pid.
        unsafe {
            libc::kill(self.pid as libc::pid_t, libc::SIGTERM);
        }
        if tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await.is_err() {
            let _ = self.child.kill().await;
        }
    }
}

pub fn chats_dir(dir: &Path) -> PathBuf {
    dir.join("chats")
}

/// Writes a chat index of `count` earlier chats (records as agw writes them) for agw to start
/// with.
pub fn seed_chat_index(dir: &Path, count: usize) -> anyhow::Result<()> {
    use std::fmt::Write as _;
    let chats = chats_dir(dir);
    std::fs::create_dir_all(&chats)?;
    let mut index = String::with_capacity(count * 200);
    for i in 0..count {
        let at = 1_700_000_000_000u64 + i as u64;
        writeln!(
            index,
            r#"{{"chatId":"00000000-0000-4000-8000-{i:012x}","chatName":"earlier chat {i}","firstAgentKey":"bench","firstAgentName":"bench","createdAt":{at},"updatedAt":{at}}}"#
        )?;
    }
    std::fs::write(chats.join("_chats.jsonl"), index)?;
    Ok(())
}

/// The `agw` binary next to this one (`target/release/agw` for `target/release/agw-load`).
pub fn default_bin() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("agw")))
        .unwrap_or_else(|| PathBuf::from("agw"))
}
