//! Several replicas of the real binary on one PostgreSQL database and one Redis
//! (`docs/deployment.md`): a run started on one replica is attached, steered, answered and
//! interrupted through the others; a run in flight on a replica killed mid-run is taken over by
//! another (crash recovery) — or, with recovery off, leaves its observers a `run.error`
//! `node_lost`; a run that waited for a person on it is adopted by the replica its answer
//! reaches; the chat lists agree.
//!
//! The cluster's trust boundary (issue 32, `docs/security.md`): what someone who can write to
//! Redis pushes onto a replica's inbox — unsigned, forged, replayed, or for another user — is
//! refused and logged, an owner rewritten in a run record hands the run to nobody, and a replica
//! without the cluster secret does not start.
//!
//! Needs `AGW_TEST_DATABASE_URL` and `AGW_TEST_REDIS_URL` (`.ci/run` sets both to the local
//! servers); without them every test says it was skipped and passes.

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agw_testkit::{FixtureServer, Transcript};
use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::rsa::{KeyPair, KeySize};
use aws_lc_rs::signature::{self, KeyPair as _};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use common::{Agw, Events, types};
use serde_json::{Value, json};

/// The lease of the test replicas: short, so a killed one is noticed quickly.
const LEASE_MS: u64 = 1500;
/// The cluster secret every test replica is given.
const SECRET: &str = "agw-cluster-test-secret-0123456789abcdef";

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
        // The replicas' logs go to files (the tests read them); a failing test shows them.
        if std::thread::panicking() {
            for entry in std::fs::read_dir(&self.dir).into_iter().flatten().flatten() {
                if entry.path().extension().is_some_and(|e| e == "log") {
                    let log = std::fs::read_to_string(entry.path()).unwrap_or_default();
                    eprintln!("----- {} -----\n{log}", entry.path().display());
                }
            }
        }
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

/// A REACT agent whose weather calls wait for a person's approval.
const ASKING_AGENT: &str = r#"{"key":"ask","mode":"REACT","modelConfig":{"providerKey":"fixture","model":"m","reasoning":{"enabled":false}},
  "toolConfig":{"backends":["mock_city_weather"],"approvals":{"mock_*":"ask"}},
  "react":{"systemPrompt":"You are a test agent.","maxSteps":4}}"#;

impl Cluster {
    async fn new(test: &str) -> Option<Cluster> {
        let (db, redis) = urls(test)?;
        let tag = format!("{}_{}", std::process::id(), Instant::now().elapsed().as_nanos() % 1_000_000);
        let dir = std::env::temp_dir().join(format!("agw-cluster-{test}-{tag}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("agents")).unwrap();
        std::fs::write(dir.join("agents/c.json"), AGENT).unwrap();
        std::fs::write(dir.join("agents/ask.json"), ASKING_AGENT).unwrap();
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
            "AGW_CLUSTER_SECRET_FILE",
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
            .env("AGW_CLUSTER_SECRET", SECRET)
            .env("RUST_LOG", "info")
            .envs(extra.iter().map(|(k, v)| (*k, v.as_str())))
            .stderr(std::fs::File::create(self.log(name)).expect("replica log file"));
        Agw::spawn(&mut cmd)
    }

    /// A replica with JWT auth on, trusting `users`' key.
    fn replica_for(&self, name: &str, users: &Users) -> Agw {
        self.replica_with(
            name,
            &[("AGENT_AUTH_LOCAL_PUBLIC_KEY", users.pem.clone()), ("SERVER_ADDRESS", "127.0.0.1".into())],
        )
    }

    /// Where replica `name` writes its log.
    fn log(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.log"))
    }

    /// Waits (up to 10 s) until replica `name` has logged `count` lines containing every needle;
    /// returns them.
    async fn wait_logged(&self, name: &str, needles: &[&str], count: usize) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let log = std::fs::read_to_string(self.log(name)).unwrap_or_default();
            let lines: Vec<String> =
                log.lines().filter(|l| needles.iter().all(|n| l.contains(n))).map(str::to_owned).collect();
            if lines.len() >= count {
                return lines;
            }
            assert!(Instant::now() < deadline, "replica {name} did not log {count} line(s) with {needles:?}:\n{log}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn redis(&self) -> redis::Connection {
        redis::Client::open(self.redis.as_str()).unwrap().get_connection().expect("connect to the test redis")
    }

    /// Alice's run on `on`, waiting for her approval of a weather call: its stream (past
    /// `awaiting.ask`) and its id.
    async fn alice_waiting(&self, on: &Agw, users: &Users) -> (Events, String) {
        script_weather(&self.fixture);
        let mut stream = self.query_as(on, &users.alice, json!({"agentKey": "ask", "message": "weather?"})).await;
        let run_id = stream.until("run.start").await["runId"].as_str().unwrap().to_owned();
        stream.until("awaiting.ask").await;
        (stream, run_id)
    }

    /// A node of the deployment besides the replicas (it has the secret, so what it signs is
    /// accepted), for what a replica with a bug or a stale view could send.
    async fn peer(&self) -> agw_cluster::Cluster {
        agw_cluster::Cluster::connect(agw_cluster::ClusterConfig {
            url: self.redis.clone(),
            prefix: self.prefix.clone(),
            node_id: "test-peer".into(),
            secret: Some(agw_cluster::ClusterSecret::new(SECRET).unwrap()),
            ..agw_cluster::ClusterConfig::default()
        })
        .await
        .expect("a test node joins the cluster")
    }

    /// The node that runs `run_id`, as its record says.
    fn run_node(&self, run_id: &str) -> String {
        redis::cmd("HGET").arg(format!("{}:run:{run_id}", self.prefix)).arg("node_id").query(&mut self.redis()).unwrap()
    }

    fn inbox(&self, node: &str) -> String {
        format!("{}:node:{node}:inbox", self.prefix)
    }

    /// A raw `RPUSH`: what anyone with write access to Redis can do.
    fn rpush(&self, key: &str, value: &str) {
        let _: () = redis::cmd("RPUSH").arg(key).arg(value).query(&mut self.redis()).unwrap();
    }

    async fn query_as(&self, on: &Agw, token: &str, body: Value) -> Events {
        let resp = self
            .client
            .post(format!("{}/api/ap/query", on.base))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .expect("query");
        assert_eq!(resp.status(), 200, "query must stream");
        Events::new(resp)
    }

    async fn post_as(&self, on: &Agw, token: &str, path: &str, body: Value) -> (u16, Value) {
        let resp =
            self.client.post(format!("{}{path}", on.base)).bearer_auth(token).json(&body).send().await.expect("post");
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// Three replicas started together (they apply the schema's migrations at the same time).
    fn replicas(&self) -> [Agw; 3] {
        self.replicas_with(&[])
    }

    /// [`Self::replicas`] with extra environment.
    fn replicas_with(&self, extra: &[(&str, String)]) -> [Agw; 3] {
        std::thread::scope(|s| {
            let a = s.spawn(|| self.replica_with("a", extra));
            let b = s.spawn(|| self.replica_with("b", extra));
            let c = s.spawn(|| self.replica_with("c", extra));
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

/// Signs test tokens (RS256) with a key whose public half the replicas trust.
struct Users {
    pem: String,
    alice: String,
    bob: String,
}

impl Users {
    fn new() -> Users {
        let key = KeyPair::generate(KeySize::Rsa2048).expect("RSA key");
        let der = STANDARD.encode(key.public_key().as_der().expect("SPKI DER").as_ref());
        let lines: Vec<&str> = der.as_bytes().chunks(64).map(|c| std::str::from_utf8(c).unwrap()).collect();
        let pem = format!("-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n", lines.join("\n"));
        let token = |sub: &str| {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
            let header = URL_SAFE_NO_PAD.encode(json!({"alg": "RS256", "typ": "JWT"}).to_string());
            let claims = URL_SAFE_NO_PAD.encode(json!({"sub": sub, "iat": now, "exp": now + 600}).to_string());
            let input = format!("{header}.{claims}");
            let mut sig = vec![0; key.public_modulus_len()];
            key.sign(&signature::RSA_PKCS1_SHA256, &SystemRandom::new(), input.as_bytes(), &mut sig).expect("sign");
            format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig))
        };
        Users { alice: token("alice"), bob: token("bob"), pem }
    }
}

/// The weather call (`call_w`) the asking agent makes, then its answer.
fn script_weather(fixture: &FixtureServer) {
    let call = Transcript::openai_tool_call("call_w", "mock_city_weather", &[r#"{"city":"Paris"}"#]);
    script(
        fixture,
        vec![
            ("weather", "agent-react-step-1", call),
            ("weather", "agent-react-step-2", Transcript::openai_text(&["Sunny."])),
        ],
    );
}

/// Stream entries as `XRANGE` returns them: id, then field/value pairs.
type StreamEntries = Vec<(String, Vec<(String, Vec<u8>)>)>;

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
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
    // Sent the moment the previous run's terminal event arrived, on the replica that ran it: the
    // chat's lock of a run that has ended is taken over, not answered with 409.
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
    // And on another replica than the one that ran the previous run.
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

/// SIGKILL of the replica running a run, crash recovery off: observers on another replica get
/// `run.error` `node_lost` within the lease; the history holds what was flushed; a new query
/// continues the chat on a surviving replica.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observers_of_a_killed_replica_see_node_lost() {
    let Some(cluster) = Cluster::new("killed").await else { return };
    let [mut a, b, c] = cluster.replicas_with(&[("AGW_RECOVERY_ENABLED", "false".into())]);
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

/// Seqs of `events` go up by one from the first: no gap, no duplicate.
fn assert_gap_free(events: &[Value]) {
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    for pair in seqs.windows(2) {
        assert_eq!(pair[1], pair[0] + 1, "seqs go up by one: {seqs:?}\n{:?}", types(events));
    }
}

/// Crash recovery across replicas (issue 37): SIGKILL of the replica while the second REACT
/// turn streams. A surviving replica takes the run over within about a lease: an observer
/// attached on another replica sees `run.resume` right after the last event it had, then the
/// retried turn and `run.complete`, with one gap-free `seq` sequence; the provider is asked for
/// the completed first step once and for the interrupted turn again; a third replica attaches
/// mid-way with `lastSeq` and gets the rest; the history holds the run once, whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_in_flight_on_a_killed_replica_is_resumed_by_another() {
    let Some(cluster) = Cluster::new("takeover").await else { return };
    let [mut a, b, c] = cluster.replicas();
    let weather = r#"{"city":"Paris","date":"2026-11-26"}"#;
    script(
        &cluster.fixture,
        vec![
            ("survive", "agent-react-step-1", Transcript::openai_tool_call("call_w", "mock_city_weather", &[weather])),
            ("survive", "agent-react-step-2", slow_text(30, 60)),
        ],
    );
    let mut on_a = cluster.query(&a, json!({"agentKey": "c", "message": "survive"})).await;
    let start = on_a.until("run.start").await;
    let (run_id, chat_id) = (start["runId"].as_str().unwrap().to_owned(), start["chatId"].as_str().unwrap().to_owned());
    on_a.until("tool.result").await;
    let mut on_b = cluster.attach(&b, &run_id, 0).await;
    let mut seen = Vec::new();
    while seen.iter().filter(|e: &&Value| e["type"] == "content.delta").count() < 3 {
        seen.push(on_b.next().await.expect("events before the kill"));
    }
    a.kill();
    drop(on_a);
    let killed = Instant::now();
    let mut resumed_after = None;
    while let Some(event) = on_b.next().await {
        if event["type"] == "run.resume" {
            resumed_after = Some(killed.elapsed());
        }
        seen.push(event);
    }
    assert_eq!(seen.last().unwrap()["type"], "run.complete", "{:?}", types(&seen));
    // The lease runs out, then the observer's next quiet second settles it (+ slack for CI).
    let resumed_after = resumed_after.expect("run.resume");
    eprintln!("run.resume reached the observer {resumed_after:?} after the kill (lease {LEASE_MS} ms)");
    assert!(
        resumed_after < Duration::from_millis(LEASE_MS + 1000 + 700),
        "within the lease + a second: {resumed_after:?}"
    );
    assert_gap_free(&seen);
    let resume = of(&seen, "run.resume");
    assert_eq!(resume.len(), 1, "{:?}", types(&seen));
    assert_eq!(resume[0]["attempt"], 1);
    // What came after the first step is superseded; the retried turn streams in new blocks.
    let discard = resume[0]["discardFrom"].as_u64().unwrap();
    let result_seq = of(&seen, "tool.result")[0]["seq"].as_u64().unwrap();
    assert!(discard > result_seq && discard <= resume[0]["seq"].as_u64().unwrap(), "{}", resume[0]);
    let after: Vec<Value> = seen.iter().filter(|e| e["seq"].as_u64() > resume[0]["seq"].as_u64()).cloned().collect();
    assert_eq!(text(&after), pieces(30).concat(), "the retried turn, whole");
    assert_eq!(of(&seen, "tool.result").len(), 1, "the completed step is not repeated");

    // The provider: step 1 once, step 2 twice (the interrupted turn, then its retry).
    let stages: Vec<String> =
        cluster.fixture.requests().iter().map(|r| r.stage().unwrap_or_default().to_owned()).collect();
    assert_eq!(stages.iter().filter(|s| *s == "agent-react-step-1").count(), 1, "{stages:?}");
    assert_eq!(stages.iter().filter(|s| *s == "agent-react-step-2").count(), 2, "{stages:?}");
    let taker = if std::fs::read_to_string(cluster.log("b")).unwrap().contains("took over a run") { "b" } else { "c" };
    cluster.wait_logged(taker, &["took over a run of a lost replica", &run_id], 1).await;

    // A third observer, from the last event the history covers: the same events from there on —
    // through Redis the superseded ones too; from the replica that took the run over, which
    // never held them, `run.resume` next (it supersedes them anyway).
    let resume_seq = resume[0]["seq"].as_u64().unwrap();
    let late = cluster.attach(&c, &run_id, discard - 1).await.all().await;
    let expected: Vec<&Value> = seen.iter().filter(|e| e["seq"].as_u64().unwrap() >= discard).collect();
    let fresh: Vec<&Value> = seen.iter().filter(|e| e["seq"].as_u64().unwrap() >= resume_seq).collect();
    let late: Vec<&Value> = late.iter().collect();
    assert!(late == expected || late == fresh, "the same stream from lastSeq on: {late:?}");
    // From the very start, on both survivors: the replica that took the run over never held
    // the old attempt's events and serves them from Redis.
    for on in [&b, &c] {
        let whole = cluster.attach(on, &run_id, 0).await.all().await;
        assert_eq!(whole, seen, "the whole run, old attempt included, on {}", on.base);
    }

    // The history holds the run once, with the retried answer.
    let (_, chat) = cluster.get(&b, &format!("/api/ap/chat?chatId={chat_id}")).await;
    let replayed = chat["data"]["events"].as_array().cloned().unwrap_or_default();
    assert_eq!(of(&replayed, "request.query").len(), 1, "{:?}", types(&replayed));
    assert_eq!(of(&replayed, "tool.result").len(), 1, "{:?}", types(&replayed));
    let answer: String = of(&replayed, "content.snapshot").iter().map(|e| e["text"].as_str().unwrap()).collect();
    assert_eq!(answer, pieces(30).concat(), "{:?}", types(&replayed));
    assert_eq!(of(&replayed, "run.complete").len(), 1);
}

/// Nobody watches a run when its replica dies: the surviving replicas' sweep takes it over
/// anyway (the provider gets the retried turn without any request naming the run), and an
/// attach afterwards from the start shows the whole run, `run.resume` included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unwatched_run_of_a_killed_replica_is_resumed_by_the_sweep() {
    let Some(cluster) = Cluster::new("sweep").await else { return };
    let [mut a, b, c] = cluster.replicas();
    script(&cluster.fixture, vec![("alone", "agent-react-step-1", slow_text(20, 60))]);
    let mut on_a = cluster.query(&a, json!({"agentKey": "c", "message": "alone"})).await;
    let run_id = on_a.until("run.start").await["runId"].as_str().unwrap().to_owned();
    on_a.until("content.delta").await;
    a.kill();
    drop(on_a);
    let deadline = Instant::now() + Duration::from_millis(LEASE_MS * 3 + 5000);
    while cluster.fixture.requests().len() < 2 {
        assert!(Instant::now() < deadline, "the sweep never retried the turn");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let events = cluster.attach(&c, &run_id, 0).await.all().await;
    assert_eq!(events.last().unwrap()["type"], "run.complete", "{:?}", types(&events));
    assert_gap_free(&events);
    let resume = of(&events, "run.resume");
    assert_eq!(resume.len(), 1, "{:?}", types(&events));
    let after: Vec<Value> = events.iter().filter(|e| e["seq"].as_u64() > resume[0]["seq"].as_u64()).cloned().collect();
    assert_eq!(text(&after), pieces(20).concat());
    assert_eq!(cluster.fixture.requests().len(), 2, "one retry");
    drop((b, c));
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

/// Every model call is a weather call using 20 tokens: a REACT run goes on calling until
/// something stops it.
fn every_call_uses_20_tokens(fixture: &FixtureServer) {
    fixture.set_default(
        Transcript::new()
            .tool_call_start(0, "call_w", "mock_city_weather")
            .tool_args(0, r#"{"city":"Shanghai","date":"2026-02-13"}"#)
            .finish("tool_calls")
            .usage(10, 10)
            .done()
            .with_chunk_delay_ms(10),
    );
}

/// Sends `n` queries at once, alternating between the replicas; returns the events of the runs
/// admitted and the `quota` of each refusal.
async fn at_once(cluster: &Cluster, on: [&Agw; 2], n: usize) -> (Vec<Vec<Value>>, Vec<String>) {
    // Sent at once: each on a task of its own.
    let sends: Vec<_> = (0..n)
        .map(|i| {
            let request = cluster.client.post(format!("{}/api/ap/query", on[i % 2].base));
            tokio::spawn(request.json(&json!({"agentKey": "c", "message": format!("run {i}")})).send())
        })
        .collect();
    let (mut admitted, mut refused) = (Vec::new(), Vec::new());
    for send in sends {
        let resp = send.await.unwrap().expect("query");
        if resp.status() == 429 {
            let body: Value = resp.json().await.unwrap();
            assert_eq!(body["code"], "quota_exceeded", "{body}");
            refused.push(body["quota"].as_str().unwrap().to_owned());
        } else {
            assert_eq!(resp.status(), 200);
            admitted.push(tokio::spawn(Events::new(resp).all()));
        }
    }
    let mut runs = Vec::new();
    for run in admitted {
        runs.push(run.await.unwrap());
    }
    (runs, refused)
}

/// Daily token quotas across replicas (issue 32): 8 runs at once on two replicas against 30
/// tokens a day. Without a reservation each is admitted while the shared spend is below 30 and
/// every model call is checked against it first, so the day passes 30 by at most one call per
/// run in flight; with the default reservation only one run starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daily_token_quotas_hold_across_replicas_within_one_call_per_run() {
    let Some(cluster) = Cluster::new("daily-quotas").await else { return };
    every_call_uses_20_tokens(&cluster.fixture);
    let per_subject =
        [("AGW_QUOTAS_SUBJECT_TOKENS_PER_DAY", "30".to_owned()), ("AGW_QUOTAS_RESERVE_TOKENS", "0".to_owned())];
    let (a, b) = (cluster.replica_with("a", &per_subject), cluster.replica_with("b", &per_subject));
    let (runs, refused) = at_once(&cluster, [&a, &b], 8).await;
    assert_eq!(runs.len() + refused.len(), 8);
    assert!(refused.iter().all(|q| q == "subject.tokens-per-day"), "{refused:?}");
    let requests = cluster.fixture.request_count() as u64;
    let bound = 30 + runs.len() as u64 * 20;
    assert!(requests * 20 <= bound, "{requests} calls of 20 tokens; {} runs in flight allow {bound}", runs.len());
    let reported: u64 = runs.iter().map(|run| run.last().unwrap()["usage"]["calls"].as_u64().unwrap_or(0)).sum();
    assert_eq!(reported, requests, "every provider request is a call some run counted; refused calls sent none");
    for run in &runs {
        let end = run.last().unwrap();
        assert_eq!((end["type"].as_str(), end["error"]["code"].as_str()), (Some("run.error"), Some("quota_exceeded")));
    }
    for replica in [&a, &b] {
        let (status, body) = cluster.post(replica, "/api/ap/query", json!({"agentKey": "c", "message": "more"})).await;
        assert_eq!((status, body["quota"].as_str()), (429, Some("subject.tokens-per-day")), "{body}");
    }
    assert_eq!(cluster.fixture.request_count() as u64, requests);
    drop((a, b));

    // Per agent, with the default reservation (1,000 tokens, more than the day): one run holds
    // it, so no other starts on either replica; it is stopped one call past the day.
    cluster.fixture.forget_requests();
    let per_agent = [("AGW_QUOTAS_AGENT_TOKENS_PER_DAY", "30".to_owned())];
    let (c, d) = (cluster.replica_with("c", &per_agent), cluster.replica_with("d", &per_agent));
    let (runs, refused) = at_once(&cluster, [&c, &d], 8).await;
    assert_eq!((runs.len(), refused.len()), (1, 7), "{refused:?}");
    assert!(refused.iter().all(|q| q == "agent.tokens-per-day"), "{refused:?}");
    let end = runs[0].last().unwrap();
    assert_eq!(end["error"]["code"], "quota_exceeded", "{end}");
    assert_eq!((end["usage"]["totalTokens"].as_u64(), cluster.fixture.request_count()), (Some(40), 2));
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

// ----- the trust boundary (issue 32) --------------------------------------------------------

/// Issue 32: one raw `RPUSH` of an unsigned request onto a replica's inbox answered another
/// user's pending approval with `always`. Now the replica that runs the run refuses and logs a
/// request in that unsigned form and one whose MAC was made up without the secret; the approval
/// stays pending, and the owner's genuine answer, forwarded from another replica, is the one
/// that counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsigned_and_forged_control_requests_do_not_answer_a_pending_approval() {
    let Some(cluster) = Cluster::new("forged").await else { return };
    let users = Users::new();
    let (a, b) = (cluster.replica_for("a", &users), cluster.replica_for("b", &users));
    let (mut on_a, run_id) = cluster.alice_waiting(&a, &users).await;
    let node = cluster.run_node(&run_id);

    let reply_key = format!("{}:reply:attack", cluster.prefix);
    let always = json!({"runId": run_id, "awaitingId": "call_w", "params": {"decision": "always"}});
    // The form every replica obeyed before: plain JSON, nothing signed.
    let unsigned = json!({"reply_to": reply_key, "deadline_ms": now_ms() + 60_000, "from": "mallory",
        "request": {"kind": "submit", "run_id": run_id, "body": always}});
    // The signed form, with a MAC made up by someone without the secret.
    let envelope = json!({"from": "mallory", "to": node, "reply_to": reply_key, "nonce": "0".repeat(32),
        "issued_ms": now_ms(), "deadline_ms": now_ms() + 4_000,
        "request": {"kind": "submit", "run_id": run_id, "body": always, "principal": {"sub": "alice"}}});
    let forged = format!("agw1.{}.{envelope}", "ab".repeat(32));
    cluster.rpush(&cluster.inbox(&node), &unsigned.to_string());
    cluster.rpush(&cluster.inbox(&node), &forged);

    // A either answers one of them (on the reply key) or refuses both: whichever comes first.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let replies: Vec<String> =
            redis::cmd("LRANGE").arg(&reply_key).arg(0).arg(-1).query(&mut cluster.redis()).unwrap();
        assert!(replies.is_empty(), "a request nobody signed was obeyed: {replies:?}");
        let log = std::fs::read_to_string(cluster.log("a")).unwrap_or_default();
        if log.lines().filter(|l| l.contains("control request refused")).count() >= 2 {
            break;
        }
        assert!(Instant::now() < deadline, "A neither refused nor answered the pushed requests:\n{log}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cluster.wait_logged("a", &["control request refused", "unsigned or malformed"], 1).await;
    cluster.wait_logged("a", &["control request refused", "MAC does not verify"], 1).await;

    // Alice's own answer, sent to B and forwarded to A, is accepted: nothing answered before it.
    let once = json!({"runId": run_id, "awaitingId": "call_w", "params": {"decision": "once"}});
    let (status, answered) = cluster.post_as(&b, &users.alice, "/api/ap/submit", once).await;
    assert_eq!(status, 200, "{answered}");
    assert_eq!(answered["data"]["status"], "accepted", "{answered}");
    let echoed = on_a.until("awaiting.answer").await;
    assert_eq!(echoed["answer"]["approvals"][0]["decision"], "once", "{echoed}");
    let events = on_a.all().await;
    assert_eq!(events.last().unwrap()["type"], "run.complete", "{:?}", types(&events));
}

/// The arguments of one `MONITOR` line (`<time> [<db> <client>] "arg" "arg" …`), unescaped as
/// Redis escapes them (`\"`, `\\`, `\n`, `\r`, `\t`, `\a`, `\b`, `\xHH`).
fn monitor_args(line: &str) -> Vec<Vec<u8>> {
    let bytes = line.as_bytes();
    let mut i = line.find(']').map_or(bytes.len(), |at| at + 1);
    let mut args = Vec::new();
    while i < bytes.len() {
        if bytes[i] != b'"' {
            i += 1;
            continue;
        }
        i += 1;
        let mut arg = Vec::new();
        while i < bytes.len() && bytes[i] != b'"' {
            if bytes[i] == b'\\' && i + 1 < bytes.len() {
                i += 1;
                match bytes[i] {
                    b'n' => arg.push(b'\n'),
                    b'r' => arg.push(b'\r'),
                    b't' => arg.push(b'\t'),
                    b'a' => arg.push(7),
                    b'b' => arg.push(8),
                    b'x' if i + 2 < bytes.len() => {
                        let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                        arg.push(hex.and_then(|h| u8::from_str_radix(h, 16).ok()).unwrap_or(b'?'));
                        i += 2;
                    }
                    other => arg.push(other),
                }
            } else {
                arg.push(bytes[i]);
            }
            i += 1;
        }
        args.push(arg);
        i += 1;
    }
    args
}

/// A genuine steer forwarded from B, copied as it crossed Redis (`MONITOR`) and pushed onto the
/// inbox of the replica that runs the run again within its deadline, is refused as a replay and
/// logged: the run takes the steer once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_steer_is_refused_and_the_run_takes_it_once() {
    use futures::StreamExt;
    let Some(cluster) = Cluster::new("replay").await else { return };
    let (a, b) = (cluster.replica("a"), cluster.replica("b"));
    script(
        &cluster.fixture,
        vec![
            ("hello replay", "agent-react-step-1", slow_text(30, 100)),
            ("steer once", "agent-react-step-2", Transcript::openai_text(&["after ", "the steer"])),
            ("steer once", "agent-react-step-3", Transcript::openai_text(&["and again"])),
        ],
    );
    let mut on_a = cluster.query(&a, json!({"agentKey": "c", "message": "hello replay"})).await;
    let run_id = on_a.until("run.start").await["runId"].as_str().unwrap().to_owned();
    on_a.until("content.delta").await;
    let inbox = cluster.inbox(&cluster.run_node(&run_id));

    // Watch every command Redis receives, as someone with access to it can.
    let client = redis::Client::open(cluster.redis.as_str()).unwrap();
    let mut monitor = client.get_async_monitor().await.expect("MONITOR").into_on_message::<String>();
    let steer = json!({"runId": run_id, "message": "steer once", "steerId": "s-replayed"});
    let (status, steered) = cluster.post(&b, "/api/ap/steer", steer).await;
    assert_eq!((status, steered["data"]["status"].as_str()), (200, Some("queued")), "{steered}");
    let captured = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(line) = monitor.next().await {
            let args = monitor_args(&line);
            if args.len() >= 3 && args[0].eq_ignore_ascii_case(b"RPUSH") && args[1] == inbox.as_bytes() {
                return String::from_utf8(args[2].clone()).expect("a UTF-8 request");
            }
        }
        panic!("MONITOR ended");
    })
    .await
    .expect("the forwarded steer crossed Redis");
    drop(monitor);

    // The replay: the same bytes again, well within their deadline.
    cluster.rpush(&inbox, &captured);
    let events = on_a.all().await;
    assert_eq!(events.last().unwrap()["type"], "run.complete", "{:?}", types(&events));
    let taken = of(&events, "request.steer");
    assert_eq!(taken.len(), 1, "the run took the steer once, not once per copy: {:?}", types(&events));
    cluster.wait_logged("a", &["control request refused", "replayed"], 1).await;
}

/// The owner in the run record is what the other replicas check a caller against. Rewriting it
/// in Redis (bob as the owner of alice's run) makes the record read as absent: bob's answer sent
/// to another replica is `unmatched`, the refusal is logged, and alice still answers her run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_rewritten_in_redis_does_not_hand_the_run_to_another_user() {
    let Some(cluster) = Cluster::new("owner").await else { return };
    let users = Users::new();
    let (a, b) = (cluster.replica_for("a", &users), cluster.replica_for("b", &users));
    let (mut on_a, run_id) = cluster.alice_waiting(&a, &users).await;

    let _: () = redis::cmd("HSET")
        .arg(format!("{}:run:{run_id}", cluster.prefix))
        .arg("owner")
        .arg(r#"{"sub":"bob"}"#)
        .query(&mut cluster.redis())
        .unwrap();
    let always = json!({"runId": run_id, "awaitingId": "call_w", "params": {"decision": "always"}});
    let (status, answered) = cluster.post_as(&b, &users.bob, "/api/ap/submit", always).await;
    assert_eq!(status, 200, "{answered}");
    assert_eq!(answered["data"]["status"], "unmatched", "bob answered alice's approval: {answered}");
    let (status, _) = cluster.post_as(&b, &users.bob, "/api/ap/interrupt", json!({"runId": run_id})).await;
    assert_eq!(status, 404, "bob cannot interrupt it either");
    cluster.wait_logged("b", &["run record refused", &run_id], 1).await;

    let once = json!({"runId": run_id, "awaitingId": "call_w", "params": {"decision": "once"}});
    let (_, answered) = cluster.post_as(&a, &users.alice, "/api/ap/submit", once).await;
    assert_eq!(answered["data"]["status"], "accepted", "{answered}");
    let echoed = on_a.until("awaiting.answer").await;
    assert_eq!(echoed["answer"]["approvals"][0]["decision"], "once", "{echoed}");
    assert_eq!(on_a.all().await.last().unwrap()["type"], "run.complete");
}

/// A frame written into a run's stream in Redis by someone else (here a fake `run.complete` and
/// a text delta at the next seq) never reaches an observer on another replica: frames are
/// signed by the replica that mirrors them, and a follower drops, and logs, one that does not
/// verify. The run's own frames still arrive, up to its real end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_injected_into_a_runs_stream_never_reach_an_observer_on_another_replica() {
    let Some(cluster) = Cluster::new("inject").await else { return };
    let (a, b) = (cluster.replica("a"), cluster.replica("b"));
    script_weather(&cluster.fixture);
    let mut on_a = cluster.query(&a, json!({"agentKey": "ask", "message": "weather?"})).await;
    let run_id = on_a.until("run.start").await["runId"].as_str().unwrap().to_owned();
    let asked = on_a.until("awaiting.ask").await["seq"].as_u64().unwrap();

    // The run waits: once its stream holds the ask, nothing else is appended until the answer.
    let stream = format!("{}:run:{run_id}:frames", cluster.prefix);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let last: StreamEntries = redis::cmd("XREVRANGE")
            .arg(&stream)
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(1)
            .query(&mut cluster.redis())
            .unwrap();
        if last.first().is_some_and(|(id, _)| *id == format!("{asked}-0")) {
            break;
        }
        assert!(Instant::now() < deadline, "the ask never reached the stream: {last:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (seq, now) = (asked + 1, now_ms());
    let delta = json!({"seq": seq, "type": "content.delta", "timestamp": now, "contentId": "x", "delta": "INJECTED"});
    let complete =
        json!({"seq": seq + 1, "type": "run.complete", "timestamp": now, "runId": run_id, "finishReason": "INJECTED"});
    for (seq, event) in [(seq, delta), (seq + 1, complete)] {
        let frame = format!("id:{seq}\nevent:message\ndata:{event}\n\n");
        let _: String = redis::cmd("XADD")
            .arg(&stream)
            .arg(format!("{seq}-0"))
            .arg("f")
            .arg(frame)
            .query(&mut cluster.redis())
            .unwrap();
    }

    // An observer on B from the start, then the answer: the run goes on to its real end.
    let on_b = cluster.attach(&b, &run_id, 0).await;
    let once = json!({"runId": run_id, "awaitingId": "call_w", "params": {"decision": "once"}});
    let (status, answered) = cluster.post(&b, "/api/ap/submit", once).await;
    assert_eq!((status, answered["data"]["status"].as_str()), (200, Some("accepted")), "{answered}");
    assert_eq!(on_a.all().await.last().unwrap()["type"], "run.complete");
    let seen = on_b.all().await;
    assert!(
        !seen.iter().any(|e| e.to_string().contains("INJECTED")),
        "an injected frame reached B's observer: {seen:?}"
    );
    let last = seen.last().unwrap();
    assert_eq!(last["type"], "run.complete", "{:?}", types(&seen));
    assert!(last["finishReason"] != "INJECTED", "{last}");
    cluster.wait_logged("b", &["frame refused", &run_id], 1).await;
}

/// Clustered mode (`agw.redis.url` set) does not start without the cluster secret, nor with one
/// shorter than 32 bytes, and `agw check` says why. Needs no Redis: the settings are refused
/// before any connection.
#[test]
fn clustered_mode_refuses_to_start_without_a_secret() {
    let dir = std::env::temp_dir().join(format!("agw-cluster-secretless-{}", std::process::id()));
    let run = |args: &[&str], secret: Option<&str>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_agw"));
        for var in ["AGW_CONFIG", "AGW_CLUSTER_SECRET", "AGW_CLUSTER_SECRET_FILE", "AGW_DATABASE_URL"] {
            cmd.env_remove(var);
        }
        cmd.args(args)
            .env("AGW_REDIS_URL", "redis://127.0.0.1:1/")
            .env("MEMORY_CHAT_DIR", dir.join("chats"))
            .env("AGENT_DATA_EXTERNAL_DIR", dir.join("data"))
            .env("AGW_RESOURCES_SYNC_BUNDLED", "false")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(secret) = secret {
            cmd.env("AGW_CLUSTER_SECRET", secret);
        }
        let mut child = cmd.spawn().expect("spawn agw");
        let deadline = Instant::now() + Duration::from_secs(20);
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("agw {args:?} kept running without a usable cluster secret");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let out = child.wait_with_output().unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        (out.status.success(), text)
    };
    for (secret, why) in [(None, "required when agw.redis.url is set"), (Some("only-twenty-one-bytes"), "at least 32")]
    {
        for args in [&["serve", "--port", "0"][..], &["check"][..]] {
            let (ok, text) = run(args, secret);
            assert!(!ok, "agw {args:?} must fail: {text}");
            assert!(text.contains("agw.cluster.secret") && text.contains("AGW_CLUSTER_SECRET"), "{args:?}: {text}");
            assert!(text.contains(why), "{args:?}: {text}");
            assert!(!text.contains("only-twenty-one-bytes"), "the secret is never printed: {text}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A node of the deployment (it has the secret) forwards for the wrong caller — a replica with a
/// bug, or with a stale idea of the owner. The replica that runs alice's run checks the caller
/// the signed request names against the run's owner, as its own routes do: bob's (or nobody's)
/// answer is `unmatched`, his interrupt and steer `run_not_found`, each logged; alice's, sent the same way,
/// is accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_request_for_another_user_is_refused_by_the_replica_that_runs_the_run() {
    use agw_cluster::{ControlKind, ControlRequest};
    let Some(cluster) = Cluster::new("principal").await else { return };
    let users = Users::new();
    let a = cluster.replica_for("a", &users);
    let (mut on_a, run_id) = cluster.alice_waiting(&a, &users).await;
    let node = cluster.run_node(&run_id);

    let peer = cluster.peer().await;
    let send = |kind: ControlKind, body: Value, principal: Option<Value>| {
        let request = ControlRequest { kind, run_id: run_id.clone(), body, principal };
        peer.send_control(&node, request, Duration::from_secs(5))
    };
    let bob = || Some(json!({"sub": "bob"}));
    let answer = |decision: &str| json!({"runId": run_id, "awaitingId": "call_w", "params": {"decision": decision}});

    for principal in [bob(), None] {
        let reply = send(ControlKind::Submit, answer("always"), principal.clone()).await.unwrap();
        assert_eq!((reply.status, reply.body["data"]["status"].as_str()), (200, Some("unmatched")), "{principal:?}");
    }
    // Refused as the run service refuses a run the caller may not see: `run_not_found`.
    let reply = send(ControlKind::Interrupt, json!({"runId": run_id}), bob()).await.unwrap();
    assert_eq!((reply.status, reply.body["error"]["code"].as_str()), (409, Some("run_not_found")), "{reply:?}");
    let reply = send(ControlKind::Steer, json!({"runId": run_id, "message": "bob was here"}), bob()).await.unwrap();
    assert_eq!((reply.status, reply.body["error"]["code"].as_str()), (409, Some("run_not_found")), "{reply:?}");
    cluster.wait_logged("a", &["forwarded request refused", "may not act on the run"], 4).await;
    cluster.wait_logged("a", &["forwarded request refused", "names no caller"], 1).await;

    let reply = send(ControlKind::Submit, answer("once"), Some(json!({"sub": "alice"}))).await.unwrap();
    assert_eq!(reply.body["data"]["status"], "accepted", "{reply:?}");
    let echoed = on_a.until("awaiting.answer").await;
    assert_eq!(echoed["answer"]["approvals"][0]["decision"], "once", "{echoed}");
    assert_eq!(on_a.all().await.last().unwrap()["type"], "run.complete");
    assert!(!cluster.fixture.requests().iter().any(|r| r.body.to_string().contains("bob was here")));
    peer.shutdown().await;
}

/// A run's replica frees its chat's lock in Redis just after the run's last frame (its mirror
/// does, off the run's path), so the next query, sent the moment the terminal event arrives, can
/// find the lock still held. A lock held by a run that has ended — its record says so, or the
/// last frame of its stream is its terminal event — is taken over instead of answering 409; a
/// lock held by a run that is still going is 409 naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_lock_left_by_a_run_that_has_ended_is_taken_over() {
    use agw_cluster::{Frame, RunRecord};
    let Some(cluster) = Cluster::new("takeover").await else { return };
    let a = cluster.replica("a");
    cluster.fixture.set_default(Transcript::openai_text(&["fine"]));
    // A node of the deployment whose runs hold the locks (its records and frames are signed).
    let peer = cluster.peer().await;
    let hold = |run: &'static str, chat: &'static str, status: &'static str, last_frame: &'static str| {
        let peer = &peer;
        async move {
            let record = RunRecord {
                run_id: run.into(),
                chat_id: chat.into(),
                agent_key: "c".into(),
                node_id: "test-peer".into(),
                owner: None,
                status: status.into(),
            };
            peer.put_run(&record).await.unwrap();
            let data = format!("{{\"seq\":1,\"type\":\"{last_frame}\",\"runId\":\"{run}\"}}");
            let frame = Frame { seq: 1, bytes: format!("id:1\nevent:message\ndata:{data}\n\n").into_bytes().into() };
            peer.append_frames(run, &[frame]).await.unwrap();
            assert_eq!(peer.acquire_chat(chat, run).await.unwrap(), None, "the peer's run holds the chat");
        }
    };
    let query = |chat: &str| json!({"agentKey": "c", "message": "next", "chatId": chat});

    // The record already says the run ended; its replica has not freed the lock yet.
    let ended = "7d1c0f2e-5b6a-4c3d-8e9f-0a1b2c3d4e01";
    hold("ended-run", ended, "completed", "run.complete").await;
    assert_eq!(cluster.query(&a, query(ended)).await.all().await.last().unwrap()["type"], "run.complete");

    // The record still says running, but the terminal event is the last frame of its stream.
    let closing = "7d1c0f2e-5b6a-4c3d-8e9f-0a1b2c3d4e02";
    hold("closing-run", closing, "running", "run.cancel").await;
    assert_eq!(cluster.query(&a, query(closing)).await.all().await.last().unwrap()["type"], "run.complete");

    // A run that is still going keeps its chat.
    let live = "7d1c0f2e-5b6a-4c3d-8e9f-0a1b2c3d4e03";
    hold("live-run", live, "running", "content.delta").await;
    let (status, busy) = cluster.post(&a, "/api/ap/query", query(live)).await;
    assert_eq!(status, 409, "{busy}");
    assert_eq!((busy["code"].as_str(), busy["runId"].as_str()), (Some("chat_busy"), Some("live-run")));
    cluster.wait_logged("a", &["chat lock taken over from a run that has ended"], 2).await;
}
