//! `agw eval run`: plays evalsets (docs/evals.md) against agw — started in-process on a loopback
//! port from the usual configuration, or a server given by `--server` — prints a table per set,
//! writes JSON and JUnit XML when asked, and exits non-zero when a set misses its threshold.
//! `agw eval compare`: two such JSON files side by side, regressions first.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;

/// What `agw eval run` was asked.
pub struct RunArgs {
    pub sets: Vec<PathBuf>,
    pub server: Option<String>,
    pub token: Option<String>,
    pub concurrency: usize,
    pub repeat: usize,
    pub json: Option<PathBuf>,
    pub junit: Option<PathBuf>,
    pub config: Option<PathBuf>,
}

pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    let mut sets = Vec::new();
    for path in &args.sets {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        sets.push(agw_eval::EvalSet::from_json(&text).with_context(|| format!("evalset {}", path.display()))?);
    }
    let (base, local) = agw_for(args.server.as_deref(), args.config.as_deref()).await?;
    let target = agw_eval::Target { base, token: args.token.clone(), idle_timeout: Duration::from_secs(120) };
    let client = reqwest::Client::new();
    let mut reports = Vec::new();
    for set in &sets {
        let total = set.cases.len() * args.repeat.max(1);
        eprintln!("{}: {} case(s) × {}", set.name, set.cases.len(), args.repeat.max(1));
        let done = std::sync::atomic::AtomicUsize::new(0);
        let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
        let report = agw_eval::run_set(&client, &target, set, args.concurrency, args.repeat, |case, result| {
            let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            if terminal {
                // A bar that redraws in place; a failure keeps its own line above it.
                if !result.pass {
                    eprintln!("\r\x1b[KFAIL {} ({} ms)", case.id, result.elapsed_ms);
                }
                let filled = n * 30 / total.max(1);
                eprint!("\r\x1b[K[{}{}] {n}/{total} {}", "#".repeat(filled), ".".repeat(30 - filled), case.id);
                if n == total {
                    eprintln!();
                }
            } else {
                let verdict = if result.pass { "ok  " } else { "FAIL" };
                eprintln!("{verdict} {} ({} ms)", case.id, result.elapsed_ms);
            }
        })
        .await;
        print!("{}", report.table());
        reports.push(report);
    }
    if let Some(local) = local {
        local.stop().await;
    }
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&serde_json::json!({"sets": reports}))?;
        std::fs::write(path, json).with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.junit {
        let xml: String = reports.iter().map(agw_eval::SetReport::junit).collect::<Vec<_>>().join("");
        std::fs::write(path, xml).with_context(|| format!("writing {}", path.display()))?;
    }
    if reports.iter().any(|r| !r.passed()) {
        std::process::exit(1);
    }
    Ok(())
}

pub fn compare(before: &std::path::Path, after: &std::path::Path) -> anyhow::Result<()> {
    let read = |path: &std::path::Path| -> anyhow::Result<agw_eval::compare::Results> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        serde_json::from_str(&text)
            .with_context(|| format!("{} is not a results file of agw eval run --json", path.display()))
    };
    let (a, b) = (read(before)?, read(after)?);
    let deltas = agw_eval::compare::compare(&a, &b);
    print!("{}", agw_eval::compare::table(&deltas, &a, &b));
    if deltas.iter().any(agw_eval::compare::CaseDelta::regressed) {
        std::process::exit(1);
    }
    Ok(())
}

/// An agw started in-process for `agw eval`, stopped with [`LocalAgw::stop`].
pub struct LocalAgw {
    gateway: agw_http::Gateway,
    stop: tokio::sync::oneshot::Sender<()>,
    serving: tokio::task::JoinHandle<()>,
}

impl LocalAgw {
    async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.serving.await;
        self.gateway.shutdown().await;
    }
}

/// The agw to talk to: `server`, or one started in-process on a loopback port with the
/// configuration `serve` would use.
async fn agw_for(server: Option<&str>, config: Option<&std::path::Path>) -> anyhow::Result<(String, Option<LocalAgw>)> {
    if let Some(url) = server {
        return Ok((url.trim_end_matches('/').to_owned(), None));
    }
    let mut settings = agw_http::Settings::load(config, std::env::vars()).context("invalid configuration")?;
    settings.server.address = std::net::IpAddr::from([127, 0, 0, 1]);
    settings.server.port = 0;
    let gateway = agw_http::Gateway::start(settings).await?;
    let server = gateway.bind().await.context("cannot listen on a loopback port")?;
    let addr = server.local_addr()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server.run(async move {
        let _ = stopped.await;
    }));
    Ok((format!("http://{addr}"), Some(LocalAgw { gateway, stop, serving })))
}

/// `agw eval record`: a one-case evalset from a recorded chat, printed as JSON.
pub async fn record(
    chat: &str,
    id: Option<String>,
    server: Option<&str>,
    token: Option<&str>,
    config: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    let (base, local) = agw_for(server, config).await?;
    let read = read_chat(&base, chat, token).await;
    if let Some(local) = local {
        local.stop().await;
    }
    let (events, frontend_tools) = read?;
    let id = id.unwrap_or_else(|| format!("chat-{chat}"));
    let case = agw_eval::record::case_from_chat(&id, &events, &frontend_tools).context("the chat has no run")?;
    let set = serde_json::json!({"version": agw_eval::EVALSET_VERSION, "name": format!("recorded from chat {chat}"), "cases": [case]});
    println!("{}", serde_json::to_string_pretty(&set)?);
    Ok(())
}

/// The chat's replayed events, and the frontend tools of the agent it began with.
async fn read_chat(
    base: &str,
    chat: &str,
    token: Option<&str>,
) -> anyhow::Result<(Vec<agw_protocol::event::Event>, Vec<String>)> {
    let client = reqwest::Client::new();
    let get = |path: &str, param: (&str, &str)| {
        let request = client.get(format!("{base}{path}")).query(&[param]);
        match token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    };
    let body: serde_json::Value =
        get("/api/ap/chat", ("chatId", chat)).send().await?.error_for_status()?.json().await?;
    let events: Vec<agw_protocol::event::Event> = serde_json::from_value(body["data"]["events"].clone())
        .context("the chat's replay does not parse as agw events")?;
    let agent = events.iter().find_map(|e| match &e.payload {
        agw_protocol::event::EventPayload::RequestQuery(q) => q.agent_key.clone(),
        _ => None,
    });
    let frontend_tools = match agent {
        Some(agent) => {
            let detail: serde_json::Value =
                get("/api/ap/agent", ("agentKey", &agent)).send().await?.error_for_status()?.json().await?;
            serde_json::from_value(detail["data"]["frontendTools"].clone()).unwrap_or_default()
        }
        None => Vec::new(),
    };
    Ok((events, frontend_tools))
}
