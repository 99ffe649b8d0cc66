//! Several replicas of the real binary on one PostgreSQL database and one Redis
//! (`docs/deployment.md`): a run started on one replica is attached, steered, answered and
//! interrupted through the others; a replica killed mid-run leaves its observers a
//! `run.error` `node_lost`; a run that waited for a person on it is adopted by the replica its
//! answer reaches; the chat lists agree.
//!
//! Needs `AGW_TEST_DATABASE_URL` and `AGW_TEST_REDIS_URL` (`.ci/run` sets both to the local
//! servers); without them every test says it was skipped and passes.

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agw_testkit::{FixtureServer, Transcript};
use common::{Agw, Events, types};
use serde_json::{Value, json};

/// The lease of the test replicas: short, so a killed one is noticed quickly.
const LEASE_MS: u64 = 1500;

fn urls(test: &str) -> Option<(String, String)> {
    match (std::env::var("AGW_TEST_DATABASE_URL"), std::env::var("AGW_TEST_REDIS_URL")) {
        (Ok(db), Ok(redis)) if !db.trim().is_empty() && !redis.trim().is_empty() => Some((db, redis)),
        _ => {
            eprintln!("skipped {test}: AGW_TEST_DATABASE_URL and AGW_TEST_REDIS_URL are not set (cluster tests)");
            None
        }
    }
}

/// One cluster: a schema, a key prefix, a scripted provider and agent files shared by replicas.
struct Cluster {
    db: String,
    redis: String,
    schema: String,
    prefix: String,
    dir: PathBuf,
    fixture: FixtureServer,
    client: reqwest::Client,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = Command::new("psql")
            .args([self.db.as_str(), "-q", "-c", &format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema)])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = Command::new("redis-cli")
            .args(["-u", self.redis.as_str(), "--scan", "--pattern", &format!("{}:*", self.prefix)])
            .output()
            .map(|out| {
                let keys: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect();
                for chunk in keys.chunks(500) {
                    let _ = Command::new("redis-cli")
                        .args(["-u", self.redis.as_str(), "DEL"])
                        .args(chunk)
                        .stdout(Stdio::null())
                        .status();
                }
            });
    }
}

/// A REACT agent on the fixture provider that may call the `confirm_dialog` frontend tool.
const AGENT: &str = r#"{"key":"c","mode":"REACT","modelConfig":{"providerKey":"fixture","model":"m","reasoning":{"enabled":false}},
  "toolConfig":{"backends":["mock_city_weather"],"frontends":["confirm_dialog"]},
  "react":{"systemPrompt":"You are a test agent.","maxSteps":4}}"#;

impl Cluster {
    async fn new(test: &str) -> Option<Cluster> {
        let (db, redis) = urls(test)?;
        let tag = format!("{}_{}", std::process::id(), Instant::now().elapsed().as_nanos() % 1_000_000);
        let dir = std::env::temp_dir().join(format!("agw-cluster-{test}-{tag}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("agents")).unwrap();
        std::fs::write(dir.join("agents/c.json"), AGENT).unwrap();
        let fixture = FixtureServer::start().await.expect("fixture");
        Some(Cluster {
            db,
            redis,
            schema: format!("agw_cluster_{}_{tag}", test.replace('-', "_")),
            prefix: format!("agwtest:{test}:{tag}"),
            dir,
            fixture,
            client: reqwest::Client::new(),
        })
    }

    fn replica(&self, name: &str) -> Agw {
        self.replica_with(name, &[])
    }

    /// A replica with extra environment (overriding the cluster's).
    fn replica_with(&self, name: &str, extra: &[(&str, String)]) -> Agw {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_agw"));
        for var in [
            "AGW_CONFIG",
            "SERVER_ADDRESS",
            "SERVER_PORT",
            "AGENT_AUTH_ENABLED",
            "AGW_TEST_DATABASE_URL",
            "AGW_TEST_REDIS_URL",
        ] {
            cmd.env_remove(var);
        }
        cmd.args(["serve", "--port", "0"])
            .env("AGENT_EXTERNAL_DIR", self.dir.join("agents"))
            .env("AGW_RESOURCES_SYNC_BUNDLED", "false")
            .env("AGENT_DATA_EXTERNAL_DIR", self.dir.join(format!("data-{name}")))
            .env("MEMORY_CHAT_DIR", self.dir.join(format!("unused-chats-{name}")))
            .env("AGENT_CHAT_EVENT_CALLBACK_ENABLED", "false")
            .env("AGENT_PROVIDERS_FIXTURE_BASE_URL", self.fixture.base_url())
            .env("AGENT_PROVIDERS_FIXTURE_API_KEY", "fixture-key")
            .env("AGENT_PROVIDERS_FIXTURE_MODEL", "m")
            .env("AGENT_TOOLS_FRONTEND_SUBMIT_TIMEOUT_MS", "60000")
            .env("AGW_DATABASE_URL", &self.db)
            .env("AGW_DATABASE_SCHEMA", &self.schema)
            .env("AGW_REDIS_URL", &self.redis)
            .env("AGW_REDIS_PREFIX", &self.prefix)
            .env("AGW_NODE_ID", format!("replica-{name}"))
            .env("AGW_CLUSTER_LEASE", format!("{LEASE_MS}ms"))
            .env("RUST_LOG", "info")
            .envs(extra.iter().map(|(k, v)| (*k, v.as_str())))
            .stderr(Stdio::inherit());
        Agw::spawn(&mut cmd)
    }

    /// Three replicas started together (they apply the schema's migrations at the same time).
    fn replicas(&self) -> [Agw; 3] {
        std::thread::scope(|s| {
            let a = s.spawn(|| self.replica("a"));
            let b = s.spawn(|| self.replica("b"));
            let c = s.spawn(|| self.replica("c"));
            [a.join().unwrap(), b.join().unwrap(), c.join().unwrap()]
        })
    }

    async fn query(&self, on: &Agw, body: Value) -> Events {
        let resp = self.client.post(format!("{}/api/ap/query", on.base)).json(&body).send().await.expect("query");
        assert_eq!(resp.status(), 200, "query must stream");
        Events::new(resp)
    }

    async fn attach(&self, on: &Agw, run_id: &str, last_seq: u64) -> Events {
        let url = format!("{}/api/ap/attach?runId={run_id}&lastSeq={last_seq}", on.base);
        let resp = self.client.get(url).send().await.expect("attach");
        assert_eq!(resp.status(), 200, "attach must stream: {}", resp.text().await.unwrap_or_default());
        Events::new(resp)
    }

    async fn post(&self, on: &Agw, path: &str, body: Value) -> (u16, Value) {
        let resp = self.client.post(format!("{}{path}", on.base)).json(&body).send().await.expect("post");
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    async fn get(&self, on: &Agw, path: &str) -> (u16, Value) {
        let resp = self.client.get(format!("{}{path}", on.base)).send().await.expect("get");
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }
}

fn of<'a>(events: &'a [Value], ty: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == ty).collect()
}

fn text(events: &[Value]) -> String {
    of(events, "content.delta").iter().map(|e| e["delta"].as_str().unwrap_or_default()).collect()
}

/// Scripts the provider by the request's last user message and stage: each rule is
/// `(text in the last user message, stage, transcript)`, the first match answers.
fn script(fixture: &FixtureServer, rules: Vec<(&'static str, &'static str, Transcript)>) {
    fixture.set_responder(move |stage, body| {
        let user =
            body["messages"].as_array()?.iter().rev().find(|m| m["role"] == "user")?["content"].as_str()?.to_owned();
        rules.iter().find(|(needle, s, _)| user.contains(needle) && stage == Some(*s)).map(|(_, _, t)| t.clone())
    });
}

fn pieces(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("p{i} ")).collect()
}

fn slow_text(n: usize, delay_ms: u64) -> Transcript {
    let pieces = pieces(n);
    let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
    Transcript::openai_text(&refs).with_chunk_delay_ms(delay_ms)
}

/// Query on A, attach on B (from the start: the same events, the same seqs, live), steer via C
/// (the owner's next model turn takes it), then a second run interrupted via C; the chat lists
/// of all three replicas agree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_on_one_replica_is_attached_steered_and_interrupted_through_the_others() {
    let Some(cluster) = Cluster::new("lifecycle").await else { return };
    let [a, b, c] = cluster.replicas();
    // Run 1: a slow answer the steer lands in; the steer makes the run take a second turn.
    // Run 2: long, interrupted. Run 3: the chat is busy while it streams.
    script(
        &cluster.fixture,
        vec![
            ("hello cluster", "agent-react-step-1", slow_text(12, 150)),
            ("also say steered", "agent-react-step-2", Transcript::openai_text(&["steered ", "answer"])),
            ("long", "agent-react-step-1", slow_text(200, 100)),
            ("again", "agent-react-step-1", slow_text(20, 100)),
        ],
    );
    let mut on_a = cluster.query(&a, json!({"agentKey": "c", "message": "hello cluster"})).await;
    let start = on_a.until("run.start").await;
    let run_id = start["runId"].as_str().unwrap().to_owned();
    let chat_id = start["chatId"].as_str().unwrap().to_owned();
    on_a.until("content.delta").await;

    let mut on_b = cluster.attach(&b, &run_id, 0).await;
    let first_on_b = on_b.next().await.expect("B streams");
    assert_eq!(first_on_b["seq"], 1, "attach from 0 replays from the first event: {first_on_b}");

    let (status, steered) =
        cluster.post(&c, "/api/ap/steer", json!({"runId": run_id, "message": "also say steered"})).await;
    assert_eq!(status, 200, "{steered}");
    assert_eq!(steered["data"]["status"], "queued", "{steered}");

    let seen_a = on_a.all().await;
    let seen_b = on_b.all().await;
    assert_eq!(seen_a.last().unwrap()["type"], "run.complete", "{:?}", types(&seen_a));
    assert_eq!(seen_b.last().unwrap()["type"], "run.complete", "{:?}", types(&seen_b));
    let seqs = |events: &[Value]| events.iter().map(|e| e["seq"].as_u64().unwrap()).collect::<Vec<_>>();
    assert_eq!(seqs(&seen_b), seqs(&seen_a), "B saw every event A saw, in order");
    assert_eq!(text(&seen_b), text(&seen_a));
    let requests = cluster.fixture.requests();
    let steer_sent = requests.iter().any(|r| r.body.to_string().contains("also say steered"));
    assert!(steer_sent, "the steer sent via C reached the model call on A");

    // Interrupt via C: the run on A is cancelled, A's and B's streams end with run.cancel.
    let mut second = cluster.query(&a, json!({"agentKey": "c", "message": "long", "chatId": chat_id})).await;
    let run2 = second.until("run.start").await["runId"].as_str().unwrap().to_owned();
    second.until("content.delta").await;
    let watcher = cluster.attach(&b, &run2, 0).await;
    let (status, interrupted) = cluster.post(&c, "/api/ap/interrupt", json!({"runId": run2})).await;
    assert_eq!(status, 200, "{interrupted}");
    assert_eq!(interrupted["data"]["accepted"], true, "{interrupted}");
    assert_eq!(interrupted["data"]["status"], "cancelled", "{interrupted}");
    assert_eq!(second.all().await.last().unwrap()["type"], "run.cancel");
    assert_eq!(watcher.all().await.last().unwrap()["type"], "run.cancel");

    // A second query into the chat while a run is going, on another replica: 409 naming it.
    let mut third = cluster.query(&b, json!({"agentKey": "c", "message": "again", "chatId": chat_id})).await;
    let run3 = third.until("run.start").await["runId"].as_str().unwrap().to_owned();
    let (status, busy) =
        cluster.post(&c, "/api/ap/query", json!({"agentKey": "c", "message": "x", "chatId": chat_id})).await;
    assert_eq!(status, 409, "{busy}");
    assert_eq!((busy["code"].as_str(), busy["runId"].as_str()), (Some("chat_busy"), Some(run3.as_str())));
    assert_eq!(third.all().await.last().unwrap()["type"], "run.complete");

    // One database: every replica lists the same chats and replays the same history.
    let mut listed = Vec::new();
    for replica in [&a, &b, &c] {
        let (status, chats) = cluster.get(replica, "/api/ap/chats").await;
        assert_eq!(status, 200);
        listed.push(chats["data"].clone());
    }
    assert_eq!(listed[0], listed[1]);
    assert_eq!(listed[1], listed[2]);
    assert!(listed[0].as_array().unwrap().iter().any(|chat| chat["chatId"] == chat_id.as_str()));
    let (_, on_c) = cluster.get(&c, &format!("/api/ap/chat?chatId={chat_id}")).await;
    let replayed = on_c["data"]["events"].as_array().cloned().unwrap_or_default();
    assert!(of(&replayed, "run.start").len() >= 3, "three runs of the chat replay on C");
}

/// A run waits for a frontend submit on A; the submit arrives at B and is forwarded: the run
/// goes on on A, and its observers see it complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submit_received_by_another_replica_reaches_the_waiting_run() {
    let Some(cluster) = Cluster::new("submit").await else { return };
    let [a, b, _c] = cluster.replicas();
    cluster.fixture.on_stage("agent-react-step-1", Transcript::openai_tool_call("call_fe", "confirm_dialog", &["{}"]));
    cluster.fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["confirmed"]));
    let mut on_a = cluster.query(&a, json!({"agentKey": "c", "message": "ask me"})).await;
    let run_id = on_a.until("run.start").await["runId"].as_str().unwrap().to_owned();
    on_a.until("tool.end").await;
    let (status, answer) = cluster
        .post(&b, "/api/ap/submit", json!({"runId": run_id, "toolId": "call_fe", "params": {"confirmed": true}}))
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["data"]["accepted"], true, "{answer}");
    let events = on_a.all().await;
    assert_eq!(events.last().unwrap()["type"], "run.complete", "{:?}", types(&events));
    assert!(text(&events).contains("confirmed"));
}

/// SIGKILL of the replica running a run: observers on another replica get `run.error`
/// `node_lost` within the lease; the history holds what was flushed; a new query continues the
/// chat on a surviving replica.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observers_of_a_killed_replica_see_node_lost() {
    let Some(cluster) = Cluster::new("killed").await else { return };
    let [mut a, b, c] = cluster.replicas();
    // Step 1 (a tool call and its result) is flushed; step 2 streams when the replica dies.
    let weather = r#"{"city":"Paris","date":"2026-11-26"}"#;
    script(
        &cluster.fixture,
        vec![
            ("doomed", "agent-react-step-1", Transcript::openai_tool_call("call_w", "mock_city_weather", &[weather])),
            ("doomed", "agent-react-step-2", slow_text(300, 100)),
            ("again", "agent-react-step-1", Transcript::openai_text(&["alive"])),
        ],
    );
    let mut on_a = cluster.query(&a, json!({"agentKey": "c", "message": "doomed"})).await;
    let start = on_a.until("run.start").await;
    let (run_id, chat_id) = (start["runId"].as_str().unwrap().to_owned(), start["chatId"].as_str().unwrap().to_owned());
    on_a.until("tool.result").await;
    on_a.until("content.delta").await;
    let mut on_b = cluster.attach(&b, &run_id, 0).await;
    on_b.until("content.delta").await;

    a.kill();
    let killed = Instant::now();
    let error = on_b.until("run.error").await;
    let noticed = killed.elapsed();
    assert_eq!(error["error"]["code"], "node_lost", "{error}");
    assert!(noticed < Duration::from_millis(LEASE_MS + 3000), "noticed within the lease (+ a poll): {noticed:?}");
    assert!(on_b.next().await.is_none(), "the stream ends after run.error");
    // Another observer attaching later sees the same end.
    let late = cluster.attach(&c, &run_id, 0).await.all().await;
    assert_eq!(late.last().unwrap()["error"]["code"], "node_lost");

    // The chat is intact and continues elsewhere (the dead run's lock is free).
    let next = cluster.query(&c, json!({"agentKey": "c", "message": "again", "chatId": chat_id})).await.all().await;
    assert_eq!(next.last().unwrap()["type"], "run.complete", "{:?}", types(&next));
    // The continuing run's model call got the lost run's flushed step (the tool call and result).
    let last = cluster.fixture.requests().last().unwrap().body.to_string();
    assert!(last.contains("call_w") && last.contains("doomed"), "{last}");
    let (_, chat) = cluster.get(&b, &format!("/api/ap/chat?chatId={chat_id}")).await;
    let replayed = chat["data"]["events"].as_array().cloned().unwrap_or_default();
    assert_eq!(of(&replayed, "request.query").len(), 2, "both runs are in the history: {:?}", types(&replayed));
    assert_eq!(of(&replayed, "tool.result").len(), 1, "the lost run's flushed step: {replayed:#?}");
}

/// A run that waits for a person on a replica that is killed is adopted by the replica its
/// submit reaches: it continues there, and an observer on a third replica sees it complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_run_is_adopted_after_its_replica_died() {
    let Some(cluster) = Cluster::new("adopt").await else { return };
    let [mut a, b, c] = cluster.replicas();
    cluster.fixture.on_stage("agent-react-step-1", Transcript::openai_tool_call("call_fe", "confirm_dialog", &["{}"]));
    cluster.fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["adopted ", "and done"]));
    let mut on_a = cluster.query(&a, json!({"agentKey": "c", "message": "wait for me"})).await;
    let run_id = on_a.until("run.start").await["runId"].as_str().unwrap().to_owned();
    on_a.until("tool.end").await;
    // The wait is recorded right after tool.end; give the mirror a moment to report it.
    tokio::time::sleep(Duration::from_millis(500)).await;
    a.kill();
    drop(on_a);
    tokio::time::sleep(Duration::from_millis(LEASE_MS + 300)).await;

    let watcher = cluster.attach(&c, &run_id, 0).await;
    let (status, answer) = cluster
        .post(&b, "/api/ap/submit", json!({"runId": run_id, "toolId": "call_fe", "params": {"confirmed": true}}))
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["data"]["accepted"], true, "{answer}");
    let events = watcher.all().await;
    assert_eq!(events.last().unwrap()["type"], "run.complete", "{:?}", types(&events));
    assert!(text(&events).contains("adopted and done"), "{:?}", types(&events));
}

/// Readiness of a replica reports its database and Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_names_the_shared_state() {
    let Some(cluster) = Cluster::new("ready").await else { return };
    let a = cluster.replica("a");
    let (status, ready) = cluster.get(&a, "/readyz").await;
    assert_eq!((status, ready["status"].as_str()), (200, Some("ready")), "{ready}");
}

/// A TCP proxy in front of Redis that can be cut (every connection dropped, new ones refused)
/// and restored: a Redis outage as one replica sees it.
struct Proxy {
    addr: std::net::SocketAddr,
    up: tokio::sync::watch::Sender<bool>,
}

impl Proxy {
    async fn start(redis_url: &str) -> Proxy {
        let target = redis_url.trim_start_matches("redis://").trim_end_matches('/').to_owned();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (up, _) = tokio::sync::watch::channel(true);
        let state = up.clone();
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                if !*state.borrow() {
                    continue;
                }
                let target = target.clone();
                let mut rx = state.subscribe();
                tokio::spawn(async move {
                    let Ok(mut server) = tokio::net::TcpStream::connect(&target).await else { return };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = rx.wait_for(|up| !*up) => {}
                    }
                });
            }
        });
        Proxy { addr, up }
    }

    fn url(&self) -> String {
        format!("redis://{}/", self.addr)
    }

    fn set(&self, up: bool) {
        self.up.send_replace(up);
    }
}

/// A short Redis outage on the replica running a run: the run and its own client go on
/// untouched, the replica reports itself not ready meanwhile, and once Redis is back its mirror
/// completes the run's stream, so an attach on another replica replays every event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_redis_outage_cuts_no_run_and_the_stream_catches_up() {
    let Some(cluster) = Cluster::new("outage").await else { return };
    let proxy = Proxy::start(&cluster.redis).await;
    // A lease longer than the outage: the replica is not declared lost.
    let a = cluster.replica_with("a", &[("AGW_REDIS_URL", proxy.url()), ("AGW_CLUSTER_LEASE", "8s".into())]);
    let b = cluster.replica("b");
    script(&cluster.fixture, vec![("through", "agent-react-step-1", slow_text(30, 100))]);
    let mut on_a = cluster.query(&a, json!({"agentKey": "c", "message": "through the outage"})).await;
    let run_id = on_a.until("run.start").await["runId"].as_str().unwrap().to_owned();
    on_a.until("content.delta").await;

    proxy.set(false);
    let mut not_ready = Value::Null;
    for _ in 0..40 {
        let (status, body) = cluster.get(&a, "/readyz").await;
        if status == 503 {
            not_ready = body;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(not_ready["status"], "unavailable", "readiness fails while Redis is unreachable");
    assert!(not_ready["failing"].get("redis").is_some(), "{not_ready}");
    tokio::time::sleep(Duration::from_millis(800)).await;
    proxy.set(true);

    let events = on_a.all().await;
    assert_eq!(events.last().unwrap()["type"], "run.complete", "the run was not cut: {:?}", types(&events));
    let mut ready = 0;
    for _ in 0..50 {
        ready = cluster.get(&a, "/readyz").await.0;
        if ready == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(ready, 200, "ready again once Redis answers");
    let replayed = cluster.attach(&b, &run_id, 0).await.all().await;
    let seqs = |events: &[Value]| events.iter().map(|e| e["seq"].as_u64().unwrap()).collect::<Vec<_>>();
    assert_eq!(seqs(&replayed), seqs(&events), "the mirror caught up: every event, in order");
    assert_eq!(text(&replayed), text(&events));
}

/// `agw migrate-chats`: a chat directory written by a single agw on files is copied into
/// PostgreSQL; a second run copies nothing; a replica on the database lists and replays the
/// chats exactly as the single agw did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_chats_moves_a_file_store_into_the_database() {
    let Some(cluster) = Cluster::new("migrate").await else { return };
    script(&cluster.fixture, vec![("chat", "agent-react-step-1", Transcript::openai_text(&["an ", "answer"]))]);
    let chats_dir = cluster.dir.join("files");
    let files = [("AGW_DATABASE_URL", String::new()), ("AGW_REDIS_URL", String::new())];
    let single =
        cluster.replica_with("single", &[&files[..], &[("MEMORY_CHAT_DIR", chats_dir.display().to_string())]].concat());
    let mut chat_ids = Vec::new();
    for i in 0..3 {
        let events = cluster.query(&single, json!({"agentKey": "c", "message": format!("chat {i}")})).await.all().await;
        chat_ids.push(of(&events, "run.start")[0]["chatId"].as_str().unwrap().to_owned());
    }
    let (_, listed_before) = cluster.get(&single, "/api/ap/chats").await;
    let (_, replay_before) = cluster.get(&single, &format!("/api/ap/chat?chatId={}", chat_ids[1])).await;
    drop(single);

    let migrate = || {
        let out = Command::new(env!("CARGO_BIN_EXE_agw"))
            .args(["migrate-chats", "--from"])
            .arg(&chats_dir)
            .env_remove("AGW_TEST_DATABASE_URL")
            .env_remove("AGW_TEST_REDIS_URL")
            .env("AGW_DATABASE_URL", &cluster.db)
            .env("AGW_DATABASE_SCHEMA", &cluster.schema)
            .output()
            .expect("run migrate-chats");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<Value>(&out.stdout).expect("JSON report")
    };
    let first = migrate();
    assert_eq!(first["chats_copied"], 3, "{first}");
    assert_eq!(first["mismatches"], json!([]), "{first}");
    let second = migrate();
    assert_eq!((second["chats_copied"].as_u64(), second["chats_skipped"].as_u64()), (Some(0), Some(3)), "{second}");

    let replica = cluster.replica("a");
    let (_, listed_after) = cluster.get(&replica, "/api/ap/chats").await;
    assert_eq!(listed_after["data"], listed_before["data"]);
    let (_, replay_after) = cluster.get(&replica, &format!("/api/ap/chat?chatId={}", chat_ids[1])).await;
    assert_eq!(replay_after["data"], replay_before["data"]);
}

/// Quotas count across replicas: with one run in flight per subject allowed, a second query on
/// another replica is refused while the first runs, and admitted after it ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotas_hold_across_replicas() {
    let Some(cluster) = Cluster::new("quotas").await else { return };
    let one = [("AGW_QUOTAS_SUBJECT_CONCURRENT_RUNS", "1".to_owned())];
    let (a, b) = (cluster.replica_with("a", &one), cluster.replica_with("b", &one));
    script(
        &cluster.fixture,
        vec![
            ("first", "agent-react-step-1", slow_text(10, 100)),
            ("second", "agent-react-step-1", Transcript::openai_text(&["ok"])),
        ],
    );
    let mut first = cluster.query(&a, json!({"agentKey": "c", "message": "first"})).await;
    first.until("content.delta").await;
    let (status, refused) = cluster.post(&b, "/api/ap/query", json!({"agentKey": "c", "message": "second"})).await;
    assert_eq!(status, 429, "{refused}");
    assert_eq!(
        (refused["code"].as_str(), refused["quota"].as_str()),
        (Some("quota_exceeded"), Some("subject.concurrent-runs"))
    );
    assert_eq!(first.all().await.last().unwrap()["type"], "run.complete");
    // The finished run leaves the shared set right after its end.
    let mut admitted = None;
    for _ in 0..20 {
        let resp = cluster
            .client
            .post(format!("{}/api/ap/query", b.base))
            .json(&json!({"agentKey": "c", "message": "second"}))
            .send()
            .await
            .unwrap();
        if resp.status() == 200 {
            admitted = Some(Events::new(resp).all().await);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let events = admitted.expect("admitted once the first run ended");
    assert_eq!(events.last().unwrap()["type"], "run.complete");
}

/// `queue` policy across replicas: a second query into a busy chat on another replica opens its
/// stream at once and its run starts only after the first run ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_query_on_another_replica_waits_for_the_chats_run() {
    let Some(cluster) = Cluster::new("queue").await else { return };
    let queue = [("AGW_RUNS_CHAT_CONCURRENCY", "queue".to_owned())];
    let (a, b) = (cluster.replica_with("a", &queue), cluster.replica_with("b", &queue));
    script(
        &cluster.fixture,
        vec![
            ("first", "agent-react-step-1", slow_text(10, 100)),
            ("second", "agent-react-step-1", Transcript::openai_text(&["after"])),
        ],
    );
    let mut first = cluster.query(&a, json!({"agentKey": "c", "message": "first"})).await;
    let chat_id = first.until("run.start").await["chatId"].as_str().unwrap().to_owned();
    first.until("content.delta").await;
    let second = cluster.query(&b, json!({"agentKey": "c", "message": "second", "chatId": chat_id})).await;
    let second = tokio::spawn(async move {
        let events = second.all().await;
        (events, Instant::now())
    });
    let first_events = first.all().await;
    let first_done = Instant::now();
    assert_eq!(first_events.last().unwrap()["type"], "run.complete");
    let (events, second_done) = second.await.unwrap();
    assert_eq!(events.last().unwrap()["type"], "run.complete", "{:?}", types(&events));
    assert!(second_done >= first_done, "the queued run ended after the chat's first run");
    let requests = cluster.fixture.requests();
    let first_req = requests.iter().position(|r| r.body.to_string().contains("first")).unwrap();
    let second_req = requests.iter().position(|r| r.last_user_message() == Some("second")).unwrap();
    assert!(second_req > first_req, "the second run called the model only after the first");
    let body = requests[second_req].body.to_string();
    assert!(body.contains("p9"), "the queued run saw the first run's whole answer in its history");
}
