//! `agw` — the gateway binary. Wiring only: parse the command line, load settings, start the
//! server from agw-http, stop on SIGINT/SIGTERM.

#![forbid(unsafe_code)]

mod eval;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use tracing_subscriber::filter::{FilterExt, filter_fn};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use agw_http::config::table::{OTHER_ENV, PROVIDER_FIELDS, SETTINGS};

#[derive(Parser)]
#[command(
    name = "agw",
    version,
    about = "LLM agent gateway: runs agent definitions against OpenAI-compatible providers and streams every step as SSE"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start the HTTP server.
    #[command(after_help = settings_help())]
    Serve {
        /// Port to listen on (overrides SERVER_PORT and the config file).
        #[arg(long)]
        port: Option<u16>,
        /// The TOML config file (see `--help` for its layout).
        // The help text is given explicitly: as a doc comment, `[server]` would be a broken link.
        #[arg(
            long,
            env = "AGW_CONFIG",
            help = "TOML config file; tables mirror the property names below, e.g. [server] port = 8080."
        )]
        config: Option<PathBuf>,
    },
    /// Validate a configuration and the agent, tool, skill and viewport directories; print every
    /// problem with its file; exit non-zero on errors.
    #[command(after_help = settings_help())]
    Check {
        /// TOML config file (as for `serve`).
        #[arg(long, env = "AGW_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Serve the agents as MCP tools over stdin/stdout (for Claude Desktop, Cursor and other MCP
    /// hosts that start their servers): the configuration `serve` uses, no port. Logs go to
    /// stderr; stdout carries only the protocol.
    #[command(name = "mcp-stdio", after_help = settings_help())]
    McpStdio {
        /// TOML config file (as for `serve`).
        #[arg(long, env = "AGW_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Copy a chat directory of JSON Lines files into the PostgreSQL chat store of
    /// `agw.database.url`: idempotent (chats copied before and unchanged are skipped), resumable
    /// (one transaction per chat), each copied chat verified by replaying it from both stores.
    /// Prints the report as JSON; exits non-zero when a replay differs.
    #[command(name = "migrate-chats", after_help = settings_help())]
    MigrateChats {
        /// The chat directory to copy [default: memory.chat.dir].
        #[arg(long)]
        from: Option<PathBuf>,
        /// Stop after copying this many chats (run again to continue).
        #[arg(long)]
        limit: Option<usize>,
        /// TOML config file (as for `serve`).
        #[arg(long, env = "AGW_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Evaluate agents with evalsets (docs/evals.md).
    Eval {
        #[command(subcommand)]
        command: EvalCommand,
    },
    /// Probe a running server: exit 0 when the URL answers 200 within the timeout, else 1 (a
    /// container HEALTHCHECK that needs no curl in the image).
    Health {
        /// URL to probe [default: http://127.0.0.1:<SERVER_PORT or 8080>/healthz].
        #[arg(long)]
        url: Option<String>,
        /// How long to wait for the answer, e.g. 3s or 500ms.
        #[arg(long, default_value = "3s", value_parser = agw_http::config::parse_duration)]
        timeout: Duration,
    },
}

#[derive(Subcommand)]
enum EvalCommand {
    /// Play evalsets against agw (in-process on a loopback port, or --server), print a table per
    /// set, write JSON / JUnit XML when asked; exit 1 when a set misses its pass-rate threshold.
    Run {
        /// Evalset files (JSON, version 1).
        #[arg(required = true)]
        sets: Vec<PathBuf>,
        /// A running agw to evaluate instead of an in-process one, e.g. http://127.0.0.1:8080.
        #[arg(long)]
        server: Option<String>,
        /// Bearer token for agw's API (when auth is on).
        #[arg(long, env = "AGW_EVAL_TOKEN")]
        token: Option<String>,
        /// Runs played at the same time.
        #[arg(long, default_value_t = 4)]
        concurrency: usize,
        /// Runs per case (a pass rate per case for models that vary).
        #[arg(long, default_value_t = 1)]
        repeat: usize,
        /// Write the results as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Write the results as JUnit XML here.
        #[arg(long)]
        junit: Option<PathBuf>,
        /// TOML config file of the in-process agw (as for `serve`).
        #[arg(long, env = "AGW_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Print a one-case evalset made from a recorded chat (its user turns, the answers its
    /// frontend tools received, its last run's calls as the expected trajectory and its answer as
    /// the reference), read through agw's API in-process or from --server.
    Record {
        /// The chat's id.
        #[arg(long)]
        chat: String,
        /// The case's id [default: chat- and the chat id].
        #[arg(long)]
        id: Option<String>,
        /// A running agw to read the chat from instead of an in-process one.
        #[arg(long)]
        server: Option<String>,
        /// Bearer token for agw's API (when auth is on).
        #[arg(long, env = "AGW_EVAL_TOKEN")]
        token: Option<String>,
        /// TOML config file of the in-process agw (as for `serve`).
        #[arg(long, env = "AGW_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Compare two result files of `agw eval run --json` (before, after): per case the change of
    /// pass rate and scores, regressions first; exit 1 when a case regressed.
    Compare {
        /// The earlier results.
        before: PathBuf,
        /// The later results.
        after: PathBuf,
    },
}

fn settings_help() -> String {
    let mut s = String::from("Settings (environment variable overrides the config file property):\n");
    for spec in SETTINGS.iter().filter(|s| !s.ignored) {
        let default = spec.default.map(|d| format!(" [default: {d}]")).unwrap_or_default();
        s.push_str(&format!("  {:<34} {:<36} {}{}\n", spec.env, spec.property, spec.help, default));
    }
    let envs: Vec<&str> = PROVIDER_FIELDS.iter().map(|f| f.env_suffix).collect();
    let keys: Vec<&str> = PROVIDER_FIELDS.iter().map(|f| f.key).collect();
    s.push_str(&format!(
        "  AGENT_PROVIDERS_<KEY>{}   provider <key> ([agent.providers.<key>] {})\n",
        envs.join(" | "),
        keys.join(", ")
    ));
    s.push_str("Accepted for compatibility, no effect:\n");
    for spec in SETTINGS.iter().filter(|s| s.ignored) {
        s.push_str(&format!("  {:<34} {:<36} {}\n", spec.env, spec.property, spec.help));
    }
    s.push_str(
        "Unknown keys in the config file are errors; unknown AGENT_* / AGW_* / MEMORY_* variables are warnings.\n",
    );
    s.push_str("Other variables:\n");
    for (name, what) in OTHER_ENV {
        s.push_str(&format!("  {name:<34} {what}\n"));
    }
    s.push_str(&format!(
        "JWT: {} only; exp required, nbf honoured, {} s clock leeway; sub non-blank; iss checked when agent.auth.issuer is set\n",
        agw_http::auth::RSA_ALGORITHMS.map(|a| format!("{a:?}")).join("/"),
        agw_http::auth::LEEWAY_SECS
    ));
    s
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let filter = EnvFilter::try_from_env("AGW_LOG")
        .or_else(|_| EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| EnvFilter::new("info"));
    // Logs go to stderr; stdout carries only the "listening" line scripts wait for. The run
    // spans (target `gen_ai`) are for trace export only, never part of a log line.
    let logs = tracing_subscriber::fmt::layer()
        .with_target(false)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_filter(filter.and(filter_fn(|meta| meta.target() != agw_http::telemetry::TRACE_TARGET)));
    let cli = Cli::parse();
    // Traces only for the server, and only when OTEL_EXPORTER_OTLP_* asks for them.
    let telemetry = match &cli.command {
        Command::Serve { .. } => agw_http::telemetry::Telemetry::from_env().context("OpenTelemetry")?,
        _ => None,
    };
    // Not `.with(Option<Layer>)`: a `None` layer is interested in every callsite, which would
    // enable the (otherwise disabled) run spans and every filtered-out log callsite.
    let registry = tracing_subscriber::registry().with(logs);
    match &telemetry {
        Some(t) => registry.with(t.layer()).init(),
        None => registry.init(),
    }
    if let Some(t) = &telemetry {
        tracing::info!(protocol = ?t.protocol(), "OpenTelemetry: exporting traces over OTLP");
    }

    let result = match cli.command {
        Command::Serve { port, config } => serve(port, config).await,
        Command::Check { config } => check(config),
        Command::Health { url, timeout } => health(url, timeout).await,
        Command::McpStdio { config } => mcp_stdio(config).await,
        Command::MigrateChats { from, limit, config } => migrate_chats(from, limit, config).await,
        Command::Eval {
            command: EvalCommand::Run { sets, server, token, concurrency, repeat, json, junit, config },
        } => eval::run(eval::RunArgs { sets, server, token, concurrency, repeat, json, junit, config }).await,
        Command::Eval { command: EvalCommand::Compare { before, after } } => eval::compare(&before, &after),
        Command::Eval { command: EvalCommand::Record { chat, id, server, token, config } } => {
            eval::record(&chat, id, server.as_deref(), token.as_deref(), config.as_deref()).await
        }
    };
    if let Some(telemetry) = telemetry {
        // Flushing blocks on the exporter thread.
        let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
    }
    result
}

async fn health(url: Option<String>, timeout: Duration) -> anyhow::Result<()> {
    let url = url.unwrap_or_else(|| {
        let port = std::env::var("SERVER_PORT").ok().filter(|p| !p.trim().is_empty());
        format!("http://127.0.0.1:{}/healthz", port.as_deref().map_or("8080", str::trim))
    });
    // No proxy: HTTP_PROXY in a container's environment must not reroute a loopback probe.
    let client = reqwest::Client::builder().timeout(timeout).no_proxy().build()?;
    match client.get(&url).send().await {
        Ok(resp) if resp.status() == reqwest::StatusCode::OK => {
            println!("healthy: {url} answered 200");
            Ok(())
        }
        Ok(resp) => {
            eprintln!("unhealthy: {url} answered {}", resp.status());
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("unhealthy: {url}: {e}");
            std::process::exit(1);
        }
    }
}

async fn migrate_chats(from: Option<PathBuf>, limit: Option<usize>, config: Option<PathBuf>) -> anyhow::Result<()> {
    let settings = agw_http::Settings::load(config.as_deref(), std::env::vars()).context("invalid configuration")?;
    let report = tokio::task::spawn_blocking(move || agw_http::migrate_chats(&settings, from, limit))
        .await
        .context("migration task")??;
    println!("{}", serde_json::to_string_pretty(&report)?);
    anyhow::ensure!(
        report.mismatches.is_empty(),
        "{} chat(s) replay differently after the copy",
        report.mismatches.len()
    );
    Ok(())
}

fn check(config: Option<PathBuf>) -> anyhow::Result<()> {
    let settings = match agw_http::Settings::load(config.as_deref(), std::env::vars()) {
        Ok(s) => s,
        Err(e) => {
            println!("error: configuration: {e}");
            std::process::exit(1);
        }
    };
    println!("sandbox: {}", settings.sandbox.report());
    let findings = agw_http::check::check(&settings);
    for finding in &findings {
        println!("{finding}");
    }
    let errors = findings.iter().filter(|f| f.severity == agw_http::check::Severity::Error).count();
    println!("{} error(s), {} warning(s)", errors, findings.len() - errors);
    if errors > 0 {
        std::process::exit(1);
    }
    Ok(())
}

async fn serve(port: Option<u16>, config: Option<PathBuf>) -> anyhow::Result<()> {
    let mut settings =
        agw_http::Settings::load(config.as_deref(), std::env::vars()).context("invalid configuration")?;
    if let Some(port) = port {
        settings.server.port = port;
    }
    for warning in &settings.warnings {
        tracing::warn!("{warning}");
    }
    agw_llm::interaction::configure(settings.logging.interaction_log, settings.logging.mask_sensitive);
    agw_http::metrics::install();
    let gateway = agw_http::Gateway::start(settings).await?;
    let state = gateway.state().clone();
    let server = gateway.bind().await.with_context(|| {
        format!("cannot listen on {}:{}", state.settings.server.address, state.settings.server.port)
    })?;
    let addr = server.local_addr()?;
    // The integration tests read this line to find the port when started with --port 0.
    println!("agw listening on http://{addr}");
    if state.settings.console_enabled {
        // Logged, not printed: whoever reads stdout for the line above may close it after.
        tracing::info!("the console: open http://{addr}/");
    }
    tracing::info!(%addr, "agw listening");
    server.run(shutdown_signal()).await;
    // Stopped accepting: runs get the grace period, then the cluster and MCP servers are left.
    gateway.shutdown().await;
    // Give the last frames a moment to leave the sockets.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    Ok(())
}

/// `agw mcp-stdio`: the state `serve` builds (agents, tools, providers, memory, MCP servers,
/// reloads), served to one MCP host over stdio until it closes stdin or a signal arrives. Never
/// prints to stdout: that is the protocol.
async fn mcp_stdio(config: Option<PathBuf>) -> anyhow::Result<()> {
    let settings = agw_http::Settings::load(config.as_deref(), std::env::vars()).context("invalid configuration")?;
    for warning in &settings.warnings {
        tracing::warn!("{warning}");
    }
    agw_llm::interaction::configure(settings.logging.interaction_log, settings.logging.mask_sensitive);
    let gateway = agw_http::Gateway::start(settings).await?;
    tracing::info!("agw serving its agents as MCP tools over stdio");
    let served = gateway.serve_stdio(shutdown_signal()).await;
    // The host is gone: its calls were cancelled; let what still runs end within the grace.
    gateway.shutdown().await;
    served.context("MCP over stdio")?;
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { () = ctrl_c => {}, () = term => {} }
    tracing::info!("shutdown signal received");
}
