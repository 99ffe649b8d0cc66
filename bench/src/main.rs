//! `agw-load` — end-to-end load benchmark of agw (see `docs/performance.md`).
//!
//! Starts the fake model in-process ([`fixture`]), the real `agw` binary as a child process
//! ([`agw`]), drives scenarios with a lean hyper client ([`client`]) and reports, per scenario:
//! time to first byte and to first token, added latency per delta (fixture send → client
//! receive), runs/s, CPU seconds per 1,000 runs of agw and of the generator itself, peak RSS of
//! agw, errors. Prints a table and writes the same figures as JSON.
//!
//! With `--replicas N` it starts N agw processes with the same environment (each its own port,
//! directory and `AGW_NODE_ID`) and spreads the runs round-robin over them; agw's figures are
//! then sums over the replicas. With `--watch-process NAME` it also accounts the CPU of other
//! processes agw works with on this machine (PostgreSQL, Redis).
//!
//! Loopback only; every loop is bounded (runs, per-run timeout, scenario deadline).

// The load generator reads /proc and sets rlimits through libc.
#![allow(unsafe_code)]
mod agw;
mod client;
mod fixture;
mod relay;
mod stats;
mod sys;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, ValueEnum};
use serde::Serialize;
use tokio::time::Instant;

use crate::agw::{Agw, AgwOptions};
use crate::client::{Outcome, Plan, Target};
use crate::fixture::{Fixture, Script};
use crate::stats::{Summary, summarize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
enum OnOff {
    On,
    Off,
}

/// End-to-end load benchmark: the real agw binary against an in-process fake model on loopback.
#[derive(Debug, Parser)]
#[command(name = "agw-load")]
struct Cli {
    /// Scenarios, comma-separated: overhead (1 stream at a time, 0 ms tokens), realistic (N
    /// concurrent streams, tokens 20 ms apart), hold (every --hold-streams size, held ~2 s).
    #[arg(long, value_delimiter = ',', default_value = "overhead,realistic,hold")]
    scenarios: Vec<String>,
    /// Content tokens of the answer turn (overhead and realistic).
    #[arg(long, default_value_t = 50)]
    tokens: usize,
    /// Runs of the overhead scenario.
    #[arg(long, default_value_t = 200)]
    overhead_runs: usize,
    #[arg(long, default_value_t = 64)]
    realistic_streams: usize,
    #[arg(long, default_value_t = 640)]
    realistic_runs: usize,
    #[arg(long, default_value_t = 20)]
    realistic_delay_ms: u64,
    /// Spread the realistic scenario's first runs over this long (stream i starts
    /// i/streams of it later), as arrivals of a steady load would be; 0: all at once.
    #[arg(long, default_value_t = 0)]
    realistic_stagger_ms: u64,
    /// Sizes of the hold scenario (concurrent streams).
    #[arg(long, value_delimiter = ',', default_value = "1000,10000")]
    hold_streams: Vec<usize>,
    /// Tokens per held stream, spread evenly over --hold-ms.
    #[arg(long, default_value_t = 10)]
    hold_tokens: usize,
    #[arg(long, default_value_t = 2000)]
    hold_ms: u64,
    /// Time to first token of the hold scenario's answers (after the gate and the stream's
    /// phase offset).
    #[arg(long, default_value_t = 0)]
    hold_first_token_ms: u64,
    /// Pin agw (every replica) to these CPUs, e.g. `0` (sched_setaffinity before exec).
    #[arg(long, value_delimiter = ',')]
    agw_cpus: Vec<usize>,
    /// Pin the generator (fake model + client) to these CPUs, e.g. `1`.
    #[arg(long, value_delimiter = ',')]
    gen_cpus: Vec<usize>,
    /// How long held streams wait for the others to open before streaming anyway.
    #[arg(long, default_value_t = 180)]
    gate_timeout_secs: u64,
    /// Unmeasured runs before each scenario.
    #[arg(long, default_value_t = 10)]
    warmup: usize,
    /// Chat memory (JSONL history + chat index) of agw.
    #[arg(long, value_enum, default_value = "on")]
    memory: OnOff,
    /// MEMORY_CHAT_FSYNC of agw: never | step | run (agw's default).
    #[arg(long, default_value = "run")]
    fsync: String,
    /// Chats already in the chat index when agw starts (a server that has been running a
    /// while); with --memory on each query upserts into an index of this size.
    #[arg(long, default_value_t = 0)]
    existing_chats: usize,
    /// AGW_LOG of agw (its log goes to a file in the scenario's temp directory).
    #[arg(long, default_value = "info")]
    agw_log: String,
    /// Extra environment of agw, `NAME=VALUE` (repeatable), e.g. MALLOC_ARENA_MAX=2.
    #[arg(long = "agw-env", value_name = "NAME=VALUE")]
    agw_env: Vec<String>,
    /// The agw binary (default: `agw` next to this executable).
    #[arg(long)]
    agw_bin: Option<PathBuf>,
    /// agw processes to start, each with the same environment plus its own port, directory
    /// (agents, data, chats) and `AGW_NODE_ID=agw-load-<i>`; runs go to them round-robin.
    /// Replicas share chats only through a database (`--agw-env AGW_DATABASE_URL=…`) and runs
    /// only through Redis (`AGW_REDIS_URL`). agw's CPU, RSS, fds and threads are summed over
    /// the replicas.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    replicas: u16,
    /// Also measure the CPU time of every process with this name (`comm`, e.g. `postgres`,
    /// `redis-server`; comma-separated or repeated): servers agw uses on this machine compete
    /// with it for the cores. Reported per name and per 1,000 runs, and left out of *other*.
    #[arg(long = "watch-process", value_name = "NAME", value_delimiter = ',')]
    watch_process: Vec<String>,
    /// Generator-alone check: the client talks to the fake model directly, no agw.
    #[arg(long)]
    direct: bool,
    /// The relay floor in agw's place: a minimal zero-buffering relay on agw's stack (hyper
    /// server, reqwest client) that makes the run's two model calls and forwards each upstream
    /// chunk as it arrives (`bench/src/relay.rs`); measured like agw (pinned by --agw-cpus).
    #[arg(long, conflicts_with = "direct")]
    relay: bool,
    /// Worker threads of the generator's runtime (fixture + client).
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Client → agw protocol: 1 = HTTP/1.1 (a connection per stream), 2 = HTTP/2 (h2c,
    /// streams multiplexed over --h2-connections), auto = HTTP/1.1 unless agw would need more
    /// file descriptors than RLIMIT_NOFILE allows (2 per stream: client + upstream socket).
    #[arg(long, default_value = "auto")]
    client_http: String,
    #[arg(long, default_value_t = 100)]
    h2_connections: usize,
    /// Streams between connect and response headers at once (ramp-up of large scenarios).
    #[arg(long, default_value_t = 256)]
    connect_parallelism: usize,
    /// No run starts later than this after a scenario began.
    #[arg(long, default_value_t = 600)]
    max_scenario_secs: u64,
    /// Where the JSON report goes.
    #[arg(long, default_value = "target/agw-load.json")]
    json: PathBuf,
    /// Keep each scenario's temp directory (agw log, chats).
    #[arg(long)]
    keep: bool,
    /// Profile agw during each measured phase with `perf record` (cpu-clock sampling, DWARF
    /// call graphs) into `<DIR>/<scenario>.perf.data` (needs `perf` on PATH).
    #[arg(long)]
    perf_dir: Option<PathBuf>,
}

struct Scenario {
    name: String,
    what: String,
    streams: usize,
    runs: usize,
    tokens: usize,
    delay: Duration,
    first_token: Duration,
    stagger: Duration,
    gate: bool,
}

fn scenarios(cli: &Cli) -> anyhow::Result<Vec<Scenario>> {
    let mut out = Vec::new();
    for name in &cli.scenarios {
        match name.trim() {
            "overhead" => out.push(Scenario {
                name: "overhead".into(),
                what: format!(
                    "1 stream at a time, {} REACT runs, {} tokens, 0 ms apart",
                    cli.overhead_runs, cli.tokens
                ),
                streams: 1,
                runs: cli.overhead_runs,
                tokens: cli.tokens,
                delay: Duration::ZERO,
                first_token: Duration::ZERO,
                stagger: Duration::ZERO,
                gate: false,
            }),
            "realistic" => out.push(Scenario {
                name: "realistic".into(),
                what: format!(
                    "{} concurrent streams, {} REACT runs, {} tokens {} ms apart",
                    cli.realistic_streams, cli.realistic_runs, cli.tokens, cli.realistic_delay_ms
                ),
                streams: cli.realistic_streams,
                runs: cli.realistic_runs,
                tokens: cli.tokens,
                delay: Duration::from_millis(cli.realistic_delay_ms),
                first_token: Duration::ZERO,
                stagger: Duration::from_millis(cli.realistic_stagger_ms),
                gate: false,
            }),
            "hold" => {
                for &n in &cli.hold_streams {
                    let tokens = cli.hold_tokens.max(1);
                    out.push(Scenario {
                        name: format!("hold-{n}"),
                        what: format!(
                            "{n} streams open at once, first token after {} ms, then {tokens} tokens over ~{} ms",
                            cli.hold_first_token_ms, cli.hold_ms
                        ),
                        streams: n,
                        runs: n,
                        tokens,
                        delay: Duration::from_millis(cli.hold_ms / tokens as u64),
                        first_token: Duration::from_millis(cli.hold_first_token_ms),
                        stagger: Duration::ZERO,
                        gate: true,
                    });
                }
            }
            other => anyhow::bail!("unknown scenario {other:?} (overhead, realistic, hold)"),
        }
    }
    Ok(out)
}

#[derive(Debug, Serialize)]
struct Machine {
    nproc: usize,
    cpu_model: String,
    mem_total_gib: f64,
    kernel: String,
    nofile_limit: u64,
}

fn machine(nofile: u64) -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, v)| v.trim().to_string()))
        .unwrap_or_default();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kib: f64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    Machine {
        nproc: std::thread::available_parallelism().map_or(0, |n| n.get()),
        cpu_model,
        mem_total_gib: mem_kib / 1024.0 / 1024.0,
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_string(),
        nofile_limit: nofile,
    }
}

fn is_one(n: &usize) -> bool {
    *n == 1
}

#[derive(Debug, Default, Serialize)]
struct ScenarioReport {
    name: String,
    what: String,
    target: String,
    /// agw processes the runs were spread over (every `agw_*` figure is their sum); omitted
    /// when 1.
    #[serde(skip_serializing_if = "is_one")]
    replicas: usize,
    client_http: String,
    memory: bool,
    streams: usize,
    runs_planned: usize,
    tokens: usize,
    token_delay_ms: f64,
    runs_ok: usize,
    errors: BTreeMap<String, usize>,
    wall_s: f64,
    runs_per_s: f64,
    ramp_s: f64,
    peak_open_streams_client: usize,
    peak_open_streams_fixture: usize,
    ttfb: Summary,
    ttft: Summary,
    run: Summary,
    /// Run duration minus the model's own time (every call: request received → last frame).
    run_added: Summary,
    /// From the model's last frame to the client's terminal event (the end of a run).
    end_added: Summary,
    delta_added: Summary,
    heartbeats: usize,
    agw_cpu_s: f64,
    /// Of `agw_cpu_s`, time in the kernel (syscalls, loopback TCP).
    agw_sys_cpu_s: f64,
    agw_cpu_s_per_1000_runs: f64,
    generator_cpu_s: f64,
    generator_cpu_s_per_1000_runs: f64,
    /// CPU seconds of the `--watch-process` processes, by name (omitted when none).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    watched_cpu_s: BTreeMap<String, f64>,
    /// The same per 1,000 runs (omitted when none).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    watched_cpu_s_per_1000_runs: BTreeMap<String, f64>,
    machine_busy_s: f64,
    /// Machine busy time not accounted to agw, the generator or the watched processes (other
    /// processes, kernel threads): should be near zero for a clean measurement.
    other_cpu_s: f64,
    machine_capacity_s: f64,
    agw_rss_baseline_mib: f64,
    agw_rss_peak_sampled_mib: f64,
    agw_vmhwm_mib: f64,
    agw_kib_per_stream: f64,
    agw_peak_fds: usize,
    agw_peak_threads: u64,
    fixture_requests: usize,
    chat_files: usize,
}

#[derive(Debug, Serialize)]
struct Report {
    tool: &'static str,
    unix_time: u64,
    machine: Machine,
    options: BTreeMap<&'static str, String>,
    scenarios: Vec<ScenarioReport>,
}

/// Peak RSS / fds / threads of agw (of all its replicas together), sampled while a scenario
/// runs.
#[derive(Default, Clone, Copy)]
struct Peaks {
    rss: u64,
    fds: usize,
    threads: u64,
}

fn spawn_sampler(pids: Vec<u32>, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<Peaks> {
    tokio::spawn(async move {
        let mut peaks = Peaks::default();
        let mut tick = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let sum = |name| pids.iter().map(|&pid| sys::status_field(pid, name).unwrap_or(0)).sum::<u64>();
            peaks.rss = peaks.rss.max(sum("VmRSS"));
            peaks.threads = peaks.threads.max(sum("Threads"));
            // Listing 20,000 fds costs a few ms: every 500 ms only.
            if tick.is_multiple_of(5) {
                peaks.fds = peaks.fds.max(pids.iter().map(|&pid| sys::open_fds(pid).unwrap_or(0)).sum());
            }
            tick += 1;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        peaks
    })
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / 1024.0 / 1024.0
}

fn count_files(dir: &Path) -> usize {
    std::fs::read_dir(dir).map(|d| d.filter_map(Result::ok).filter(|e| e.path().is_file()).count()).unwrap_or(0)
}

/// HTTP/2 connections to use for `scenario` (0 = HTTP/1.1), see `--client-http`.
fn http2_connections(cli: &Cli, scenario: &Scenario, nofile: u64) -> anyhow::Result<usize> {
    Ok(match cli.client_http.as_str() {
        "1" => 0,
        "2" => cli.h2_connections.max(1),
        "auto" if scenario.streams as u64 * 2 + 256 > nofile => cli.h2_connections.max(1),
        "auto" => 0,
        other => anyhow::bail!("--client-http {other:?}: expected 1, 2 or auto"),
    })
}

async fn run_scenario(cli: &Cli, scenario: &Scenario, bin: &Path, nofile: u64) -> anyhow::Result<ScenarioReport> {
    let h2 = http2_connections(cli, scenario, nofile)?;
    let dir = std::env::temp_dir().join(format!("agw-load-{}-{}", std::process::id(), scenario.name));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let fixture =
        Fixture::start(Script { tokens: scenario.tokens, delay: scenario.delay, first_token: scenario.first_token })
            .await?;
    let memory = cli.memory == OnOff::On;
    let replica_dirs = replica_dirs(&dir, if cli.direct { 1 } else { usize::from(cli.replicas) });
    if memory && cli.existing_chats > 0 {
        for replica_dir in &replica_dirs {
            agw::seed_chat_index(replica_dir, cli.existing_chats)?;
        }
    }
    let mut agws = Vec::new();
    if !cli.direct {
        for (i, replica_dir) in replica_dirs.iter().enumerate() {
            let mut extra_env = cli.agw_env.clone();
            if cli.replicas > 1 {
                extra_env.push(format!("AGW_NODE_ID=agw-load-{i}"));
            }
            let options = AgwOptions {
                bin,
                dir: replica_dir,
                provider_url: &fixture.base_url(),
                memory,
                fsync: &cli.fsync,
                log: &cli.agw_log,
                extra_env: &extra_env,
                cpus: &cli.agw_cpus,
                relay: cli.relay,
            };
            agws.push(Agw::start(&options).await?);
        }
    }
    let mark = std::str::from_utf8(fixture::RUN_MARK).expect("ASCII");
    let body = serde_json::json!({"agentKey": "bench", "message": format!("What is the weather in Tokyo? {mark}")})
        .to_string();
    let target = Arc::new(Target {
        addrs: if cli.direct { vec![fixture.addr()] } else { agws.iter().map(Agw::addr).collect() },
        path: if cli.direct { "/v1/chat/completions" } else { "/api/ap/query" },
        body,
        model_times: fixture.model_times(),
        direct: cli.direct,
        expected_tokens: scenario.tokens,
    });
    let gate_timeout = Duration::from_secs(cli.gate_timeout_secs);
    let run_timeout = gate_timeout + scenario.delay * scenario.tokens as u32 + Duration::from_secs(60);

    if cli.warmup > 0 {
        let warm = client::drive(
            target.clone(),
            Plan {
                runs: cli.warmup,
                concurrency: cli.warmup.min(scenario.streams),
                run_timeout: Duration::from_secs(60),
                deadline: Instant::now() + Duration::from_secs(120),
                connect_parallelism: cli.connect_parallelism,
                http2_connections: h2,
                stagger: Duration::ZERO,
            },
        )
        .await;
        if warm.ok != cli.warmup {
            anyhow::bail!("{}: warm-up failed: {:?} (agw log: {})", scenario.name, warm.errors, dir.display());
        }
    }
    if scenario.gate {
        fixture.set_gate(scenario.runs, gate_timeout);
    }
    fixture.reset_peak();
    let requests_before = fixture.counters().requests.load(Ordering::Relaxed);
    let pids: Vec<u32> = agws.iter().map(Agw::pid).collect();
    let rss_baseline = pids.iter().map(|&p| sys::status_field(p, "VmRSS").unwrap_or(0)).sum();
    let stop_sampler = Arc::new(AtomicBool::new(false));
    let sampler = (!pids.is_empty()).then(|| spawn_sampler(pids.clone(), stop_sampler.clone()));

    let perf = match &cli.perf_dir {
        Some(perf_dir) if !pids.is_empty() => Some(start_perf(perf_dir, &scenario.name, &pids).await?),
        _ => None,
    };
    let agw_sys_now = || pids.iter().filter_map(|&p| sys::process_cpu_split(p)).map(|(_, s)| s).sum::<Duration>();
    let watched_now = || cli.watch_process.iter().map(|name| sys::processes_cpu_by_name(name)).collect::<Vec<_>>();
    let agw_cpu_0 = agws.iter().map(Agw::cpu).sum::<Duration>();
    let agw_sys_0 = agw_sys_now();
    let watched_0 = watched_now();
    let gen_cpu_0 = sys::self_cpu();
    let machine_0 = sys::machine_cpu();
    let outcome = client::drive(
        target.clone(),
        Plan {
            runs: scenario.runs,
            concurrency: scenario.streams,
            run_timeout,
            deadline: Instant::now() + Duration::from_secs(cli.max_scenario_secs),
            connect_parallelism: cli.connect_parallelism,
            http2_connections: h2,
            stagger: scenario.stagger,
        },
    )
    .await;
    let agw_cpu = agws.iter().map(Agw::cpu).sum::<Duration>().saturating_sub(agw_cpu_0);
    let agw_sys = agw_sys_now().saturating_sub(agw_sys_0);
    let watched_cpu: Vec<(String, Duration)> = cli
        .watch_process
        .iter()
        .cloned()
        .zip(watched_now().into_iter().zip(watched_0).map(|(after, before)| after.saturating_sub(before)))
        .collect();
    let gen_cpu = sys::self_cpu().saturating_sub(gen_cpu_0);
    let machine_1 = sys::machine_cpu();
    if let Some(perf) = perf {
        stop_perf(perf).await;
    }
    stop_sampler.store(true, Ordering::Relaxed);
    let peaks = match sampler {
        Some(handle) => handle.await.unwrap_or_default(),
        None => Peaks::default(),
    };
    let vmhwm = pids.iter().map(|&p| sys::status_field(p, "VmHWM").unwrap_or(0)).sum();
    let fixture_requests = fixture.counters().requests.load(Ordering::Relaxed) - requests_before;
    let fixture_peak = fixture.counters().text_streams_peak.load(Ordering::Relaxed);
    for agw in agws {
        agw.stop().await;
    }
    let chat_files = replica_dirs.iter().map(|d| count_files(&agw::chats_dir(d))).sum();
    drop(fixture);
    if !cli.keep {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let mut report = report(
        scenario,
        cli,
        outcome,
        Measured {
            agw_cpu,
            agw_sys,
            watched_cpu,
            gen_cpu,
            machine: machine_0
                .zip(machine_1)
                .map(|((b0, t0), (b1, t1))| (b1.saturating_sub(b0), t1.saturating_sub(t0))),
            rss_baseline,
            peaks,
            vmhwm,
            fixture_requests,
            fixture_peak,
            chat_files,
        },
    );
    report.client_http = if h2 == 0 { "HTTP/1.1".into() } else { format!("HTTP/2 h2c over {h2} connections") };
    Ok(report)
}

/// The directory of each replica: the scenario's own for one, a subdirectory each for several.
fn replica_dirs(dir: &Path, replicas: usize) -> Vec<PathBuf> {
    if replicas <= 1 {
        return vec![dir.to_path_buf()];
    }
    (0..replicas).map(|i| dir.join(format!("replica-{i}"))).collect()
}

/// `perf record` attached to agw (every replica); the 300 ms pause lets it set up before the
/// load starts.
async fn start_perf(dir: &Path, name: &str, pids: &[u32]) -> anyhow::Result<tokio::process::Child> {
    let pids = pids.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    std::fs::create_dir_all(dir)?;
    let child = tokio::process::Command::new("perf")
        .args(["record", "-q", "-e", "cpu-clock", "-F", "1999", "--call-graph", "dwarf,16384", "-p"])
        .arg(pids)
        .arg("-o")
        .arg(dir.join(format!("{name}.perf.data")))
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("cannot start perf")?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    Ok(child)
}

/// SIGINT makes perf write its data and exit (bounded: killed after 120 s).
async fn stop_perf(mut perf: tokio::process::Child) {
    if let Some(pid) = perf.id() {
        // SAFETY: signalling our own child by its pid.
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGINT);
        }
    }
    if tokio::time::timeout(Duration::from_secs(120), perf.wait()).await.is_err() {
        let _ = perf.kill().await;
    }
}

struct Measured {
    agw_cpu: Duration,
    agw_sys: Duration,
    /// CPU of each `--watch-process` name during the phase.
    watched_cpu: Vec<(String, Duration)>,
    gen_cpu: Duration,
    machine: Option<(Duration, Duration)>,
    rss_baseline: u64,
    peaks: Peaks,
    vmhwm: u64,
    fixture_requests: usize,
    fixture_peak: usize,
    chat_files: usize,
}

fn report(scenario: &Scenario, cli: &Cli, mut outcome: Outcome, m: Measured) -> ScenarioReport {
    let runs = (outcome.ok + outcome.error_count()).max(1) as f64;
    let wall = outcome.wall.as_secs_f64();
    let (busy, total) = m.machine.unwrap_or_default();
    let peak_rss = m.peaks.rss.max(m.vmhwm);
    let watched_total: Duration = m.watched_cpu.iter().map(|(_, d)| *d).sum();
    ScenarioReport {
        name: scenario.name.clone(),
        what: scenario.what.clone(),
        target: if cli.direct {
            "fixture (generator alone)".into()
        } else if cli.relay {
            "relay floor".into()
        } else {
            "agw".into()
        },
        replicas: if cli.direct { 1 } else { usize::from(cli.replicas) },
        client_http: String::new(),
        memory: cli.memory == OnOff::On && !cli.direct && !cli.relay,
        streams: scenario.streams,
        runs_planned: scenario.runs,
        tokens: scenario.tokens,
        token_delay_ms: scenario.delay.as_secs_f64() * 1e3,
        runs_ok: outcome.ok,
        errors: outcome.errors.clone(),
        wall_s: wall,
        runs_per_s: outcome.ok as f64 / wall.max(1e-9),
        ramp_s: outcome.ramp.as_secs_f64(),
        peak_open_streams_client: outcome.peak_open_streams,
        peak_open_streams_fixture: m.fixture_peak,
        ttfb: summarize(&mut outcome.ttfb_ns),
        ttft: summarize(&mut outcome.ttft_ns),
        run: summarize(&mut outcome.run_ns),
        run_added: summarize(&mut outcome.run_added_ns),
        end_added: summarize(&mut outcome.end_added_ns),
        delta_added: summarize(&mut outcome.delta_ns),
        heartbeats: outcome.heartbeats,
        agw_cpu_s: m.agw_cpu.as_secs_f64(),
        agw_sys_cpu_s: m.agw_sys.as_secs_f64(),
        agw_cpu_s_per_1000_runs: m.agw_cpu.as_secs_f64() / runs * 1000.0,
        generator_cpu_s: m.gen_cpu.as_secs_f64(),
        generator_cpu_s_per_1000_runs: m.gen_cpu.as_secs_f64() / runs * 1000.0,
        watched_cpu_s: m.watched_cpu.iter().map(|(name, d)| (name.clone(), d.as_secs_f64())).collect(),
        watched_cpu_s_per_1000_runs: m
            .watched_cpu
            .iter()
            .map(|(name, d)| (name.clone(), d.as_secs_f64() / runs * 1000.0))
            .collect(),
        machine_busy_s: busy.as_secs_f64(),
        other_cpu_s: busy.as_secs_f64()
            - m.agw_cpu.as_secs_f64()
            - m.gen_cpu.as_secs_f64()
            - watched_total.as_secs_f64(),
        machine_capacity_s: total.as_secs_f64(),
        agw_rss_baseline_mib: mib(m.rss_baseline),
        agw_rss_peak_sampled_mib: mib(m.peaks.rss),
        agw_vmhwm_mib: mib(m.vmhwm),
        agw_kib_per_stream: if m.rss_baseline > 0 {
            peak_rss.saturating_sub(m.rss_baseline) as f64 / 1024.0 / outcome.peak_open_streams.max(1) as f64
        } else {
            0.0
        },
        agw_peak_fds: m.peaks.fds,
        agw_peak_threads: m.peaks.threads,
        fixture_requests: m.fixture_requests,
        chat_files: m.chat_files,
    }
}

fn print_table(reports: &[ScenarioReport]) {
    println!();
    println!(
        "{:<12} {:>9} {:>8} {:>15} {:>15} {:>17} {:>15} {:>17} {:>17} {:>13} {:>13} {:>9} {:>9}",
        "scenario",
        "ok/err",
        "runs/s",
        "TTFB p50/p99",
        "TTFT p50/p99",
        "delta+ p50/p99",
        "run p50/p99",
        "run+ p50/p99",
        "end+ p50/p99",
        "agw CPU s/1k",
        "gen CPU s/1k",
        "RSS MiB",
        "KiB/strm"
    );
    for r in reports {
        println!(
            "{:<12} {:>9} {:>8.1} {:>15} {:>15} {:>17} {:>15} {:>17} {:>17} {:>13.3} {:>13.3} {:>9.1} {:>9.1}",
            r.name,
            format!("{}/{}", r.runs_ok, r.errors.values().sum::<usize>()),
            r.runs_per_s,
            format!("{:.2}/{:.2}ms", r.ttfb.p50_ms, r.ttfb.p99_ms),
            format!("{:.1}/{:.1}ms", r.ttft.p50_ms, r.ttft.p99_ms),
            format!("{:.3}/{:.3}ms", r.delta_added.p50_ms, r.delta_added.p99_ms),
            format!("{:.0}/{:.0}ms", r.run.p50_ms, r.run.p99_ms),
            format!("{:.2}/{:.2}ms", r.run_added.p50_ms, r.run_added.p99_ms),
            format!("{:.2}/{:.2}ms", r.end_added.p50_ms, r.end_added.p99_ms),
            r.agw_cpu_s_per_1000_runs,
            r.generator_cpu_s_per_1000_runs,
            r.agw_rss_peak_sampled_mib.max(r.agw_vmhwm_mib),
            r.agw_kib_per_stream,
        );
    }
    for r in reports {
        println!(
            "  {}: {} → {} ({}); wall {:.2}s, ramp {:.2}s, peak open streams {} (fixture {}), agw CPU {:.2}s ({:.2}s system), generator CPU {:.2}s, \
             other CPU {:.2}s of {:.2}s machine busy; agw RSS baseline {:.1} MiB, peak {:.1} MiB (VmHWM {:.1}), fds {}, threads {}; \
             upstream requests {}, chat files {}{}",
            r.name,
            r.what,
            r.target,
            r.client_http,
            r.wall_s,
            r.ramp_s,
            r.peak_open_streams_client,
            r.peak_open_streams_fixture,
            r.agw_cpu_s,
            r.agw_sys_cpu_s,
            r.generator_cpu_s,
            r.other_cpu_s,
            r.machine_busy_s,
            r.agw_rss_baseline_mib,
            r.agw_rss_peak_sampled_mib,
            r.agw_vmhwm_mib,
            r.agw_peak_fds,
            r.agw_peak_threads,
            r.fixture_requests,
            r.chat_files,
            if r.errors.is_empty() { String::new() } else { format!("; errors {:?}", r.errors) },
        );
        if r.replicas > 1 || !r.watched_cpu_s.is_empty() {
            let watched: f64 = r.watched_cpu_s_per_1000_runs.values().sum();
            let names: Vec<String> = r
                .watched_cpu_s
                .iter()
                .map(|(name, s)| format!("{name} {s:.2}s ({:.3} s/1k runs)", r.watched_cpu_s_per_1000_runs[name]))
                .collect();
            println!(
                "  {}: {} agw replica(s), summed: {:.3} CPU s/1k runs; watched: {}; agw + watched {:.3} CPU s/1k runs",
                r.name,
                r.replicas,
                r.agw_cpu_s_per_1000_runs,
                if names.is_empty() { "—".to_string() } else { names.join(", ") },
                r.agw_cpu_s_per_1000_runs + watched,
            );
        }
    }
}

fn main() -> anyhow::Result<()> {
    // The child of `--relay` (not a user-facing command).
    if std::env::args().nth(1).as_deref() == Some("relay") {
        return relay::main();
    }
    let cli = Cli::parse();
    let scenarios = scenarios(&cli)?;
    // 10,000 streams: client + fixture sockets here, client + upstream sockets in agw, which
    // inherits the limit.
    let nofile = sys::raise_nofile(262_144);
    fixture::epoch();
    let bin = cli.agw_bin.clone().unwrap_or_else(agw::default_bin);
    if cli.replicas > 1 && cli.agw_env.iter().any(|pair| pair.starts_with("AGW_NODE_ID=")) {
        anyhow::bail!("--replicas gives each replica its own AGW_NODE_ID; do not set it with --agw-env");
    }
    if !cli.direct && !cli.relay && !bin.is_file() {
        anyhow::bail!("agw binary not found at {} (cargo build --release -p agw, or --agw-bin)", bin.display());
    }
    if !cli.gen_cpus.is_empty() {
        // Before the runtime exists: its threads inherit the mask.
        sys::pin_to(0, &cli.gen_cpus).context("--gen-cpus")?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cli.threads.max(1))
        .enable_all()
        .build()
        .context("tokio runtime")?;
    let machine = machine(nofile);
    eprintln!(
        "agw-load: {} ({} cores, {:.1} GiB), nofile {}, agw {}, memory {:?}, fsync {}, existing chats {}",
        machine.cpu_model,
        machine.nproc,
        machine.mem_total_gib,
        nofile,
        if cli.direct { "— (generator alone)".to_string() } else { bin.display().to_string() },
        cli.memory,
        cli.fsync,
        cli.existing_chats
    );
    let mut reports = Vec::new();
    for scenario in &scenarios {
        eprintln!("agw-load: {} — {}", scenario.name, scenario.what);
        let report = runtime.block_on(run_scenario(&cli, scenario, &bin, nofile))?;
        eprintln!(
            "agw-load: {} done: {} ok, {} errors, {:.1} runs/s",
            report.name,
            report.runs_ok,
            report.errors.values().sum::<usize>(),
            report.runs_per_s
        );
        reports.push(report);
    }
    print_table(&reports);
    let mut options = BTreeMap::from([
        ("memory", format!("{:?}", cli.memory).to_lowercase()),
        ("fsync", cli.fsync.clone()),
        ("existing_chats", cli.existing_chats.to_string()),
        ("agw_log", cli.agw_log.clone()),
        ("direct", cli.direct.to_string()),
        ("generator_threads", cli.threads.to_string()),
        ("connect_parallelism", cli.connect_parallelism.to_string()),
        ("warmup", cli.warmup.to_string()),
        ("agw_env", cli.agw_env.join(" ")),
        ("client_http", cli.client_http.clone()),
        ("hold_first_token_ms", cli.hold_first_token_ms.to_string()),
        ("realistic_stagger_ms", cli.realistic_stagger_ms.to_string()),
        ("agw_cpus", format!("{:?}", cli.agw_cpus)),
        ("gen_cpus", format!("{:?}", cli.gen_cpus)),
    ]);
    if cli.replicas > 1 {
        options.insert("replicas", cli.replicas.to_string());
    }
    if !cli.watch_process.is_empty() {
        options.insert("watch_process", cli.watch_process.join(","));
    }
    let report = Report {
        tool: "agw-load",
        unix_time: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        machine,
        options,
        scenarios: reports,
    };
    if let Some(parent) = cli.json.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&cli.json, serde_json::to_string_pretty(&report)?)?;
    println!("\nJSON report: {}", cli.json.display());
    Ok(())
}
