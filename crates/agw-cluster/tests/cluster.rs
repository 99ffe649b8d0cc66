//! The cluster layer against a real Redis, with two or three `Cluster`s standing for replicas.
//! Set `AGW_TEST_REDIS_URL` (e.g. `redis://127.0.0.1:6379/`); without it the Redis tests say so
//! and pass. Each test uses its own key prefix and deletes its keys at the end, even on failure.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agw_cluster::{
    Appended, Cluster, ClusterConfig, ClusterError, ClusterSecret, ControlKind, ControlReply, ControlRequest,
    FollowItem, Frame, RunRecord,
};
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::json;

const LEASE: Duration = Duration::from_millis(600);

/// The secret the test's nodes share.
fn secret() -> Option<ClusterSecret> {
    Some(ClusterSecret::new("agw-cluster-tests-shared-secret-0123456789").unwrap())
}

/// One test's Redis namespace; its keys are deleted when it is dropped.
struct Env {
    url: String,
    prefix: String,
}

impl Env {
    fn new() -> Option<Env> {
        match std::env::var("AGW_TEST_REDIS_URL") {
            Ok(url) if !url.is_empty() => Some(Env { url, prefix: format!("agwtest:{}", uuid::Uuid::new_v4()) }),
            _ => {
                eprintln!("skipped: AGW_TEST_REDIS_URL is not set (Redis cluster tests)");
                None
            }
        }
    }

    fn cfg(&self) -> ClusterConfig {
        ClusterConfig {
            url: self.url.clone(),
            prefix: self.prefix.clone(),
            lease: LEASE,
            retention: Duration::from_secs(60),
            secret: secret(),
            ..ClusterConfig::default()
        }
    }

    async fn node(&self) -> Cluster {
        Cluster::connect(self.cfg()).await.expect("connect to the test redis")
    }

    fn redis(&self) -> redis::Connection {
        redis::Client::open(self.url.as_str()).unwrap().get_connection().unwrap()
    }

    fn pttl(&self, key: &str) -> i64 {
        redis::cmd("PTTL").arg(format!("{}:{key}", self.prefix)).query(&mut self.redis()).unwrap()
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        let Ok(mut conn) = redis::Client::open(self.url.as_str()).and_then(|c| c.get_connection()) else { return };
        let keys: Vec<String> =
            redis::cmd("KEYS").arg(format!("{}:*", self.prefix)).query(&mut conn).unwrap_or_default();
        if !keys.is_empty() {
            let _: Result<(), _> = redis::cmd("DEL").arg(keys).query(&mut conn);
        }
    }
}

fn frame(seq: u64) -> Frame {
    Frame { seq, bytes: Bytes::from(format!("frame {seq}")) }
}

fn frames(seqs: impl IntoIterator<Item = u64>) -> Vec<Frame> {
    seqs.into_iter().map(frame).collect()
}

/// The next item, failing the test after 5 s.
async fn next(follow: &mut BoxStream<'static, Result<FollowItem, ClusterError>>) -> FollowItem {
    tokio::time::timeout(Duration::from_secs(5), follow.next())
        .await
        .expect("the follower answers within 5 s")
        .expect("the follower never ends by itself")
        .expect("no follow error")
}

/// The next `n` frames, skipping idle items.
async fn next_frames(follow: &mut BoxStream<'static, Result<FollowItem, ClusterError>>, n: usize) -> Vec<Frame> {
    let mut out = Vec::new();
    while out.len() < n {
        if let FollowItem::Frame(f) = next(follow).await {
            out.push(f);
        }
    }
    out
}

async fn wait_past_lease() {
    tokio::time::sleep(LEASE + Duration::from_millis(300)).await;
}

#[tokio::test]
async fn leases_live_with_the_heartbeat_expire_without_it_and_go_at_once_on_shutdown() {
    let Some(env) = Env::new() else { return };
    let (a, b) = (env.node().await, env.node().await);
    assert_ne!(a.node_id(), b.node_id());
    assert!(b.node_alive(a.node_id()).await.unwrap());
    assert!(!b.node_alive("no-such-node").await.unwrap());

    // The heartbeat keeps the lease well past its length.
    tokio::time::sleep(LEASE * 3).await;
    assert!(b.node_alive(a.node_id()).await.unwrap(), "heartbeat keeps the lease");

    // A lease that expired anyway (e.g. Redis was unreachable for a while) is re-established.
    let _: () = redis::cmd("DEL").arg(format!("{}:node:{}", env.prefix, a.node_id())).query(&mut env.redis()).unwrap();
    tokio::time::sleep(LEASE / 3 + Duration::from_millis(200)).await;
    assert!(b.node_alive(a.node_id()).await.unwrap(), "the heartbeat re-establishes a lost lease");

    // A node that stops heartbeating (crash) is dead after its lease.
    a.stop_heartbeat_for_test();
    wait_past_lease().await;
    assert!(!b.node_alive(a.node_id()).await.unwrap(), "a node without heartbeat is dead after the lease");

    // Dropping the last clone without shutdown stops the heartbeat as well.
    let c = env.node().await;
    let c_id = c.node_id().to_owned();
    let c2 = c.clone();
    drop(c);
    tokio::time::sleep(LEASE * 2).await;
    assert!(b.node_alive(&c_id).await.unwrap(), "a clone still alive keeps the heartbeat");
    drop(c2);
    wait_past_lease().await;
    assert!(!b.node_alive(&c_id).await.unwrap(), "the heartbeat stops with the last clone");

    // A graceful shutdown deletes the lease at once.
    let b_id = b.node_id().to_owned();
    b.shutdown().await;
    assert!(!a.node_alive(&b_id).await.unwrap(), "shutdown deletes the lease at once");
    tokio::time::sleep(LEASE).await;
    assert!(!a.node_alive(&b_id).await.unwrap(), "no heartbeat revives it after shutdown");
    b.shutdown().await; // twice is fine
    b.ping().await.unwrap(); // the connection still works
    a.shutdown().await;
}

#[tokio::test]
async fn run_records_are_shared_and_expire_once_finished() {
    let Some(env) = Env::new() else { return };
    let (a, b) = (env.node().await, env.node().await);
    assert_eq!(b.get_run("r1").await.unwrap(), None);
    let mut run = RunRecord {
        run_id: "r1".into(),
        chat_id: "c1".into(),
        agent_key: "demo".into(),
        node_id: a.node_id().into(),
        owner: Some(json!({"sub": "alice", "tenant": "t|1"}).to_string()),
        status: "running".into(),
    };
    a.put_run(&run).await.unwrap();
    a.append_frames("r1", &frames(1..=3)).await.unwrap();
    assert_eq!(b.get_run("r1").await.unwrap().as_ref(), Some(&run));
    assert_eq!(env.pttl("run:r1"), -1, "no expiry while running");

    a.set_run_status("r1", "waiting", false).await.unwrap();
    run.status = "waiting".into();
    assert_eq!(b.get_run("r1").await.unwrap().as_ref(), Some(&run));

    // Adoption by B.
    b.set_run_node("r1", b.node_id()).await.unwrap();
    run.node_id = b.node_id().into();
    assert_eq!(a.get_run("r1").await.unwrap().as_ref(), Some(&run));

    b.set_run_status("r1", "completed", true).await.unwrap();
    run.status = "completed".into();
    assert_eq!(a.get_run("r1").await.unwrap().as_ref(), Some(&run));
    for key in ["run:r1", "run:r1:frames"] {
        let ttl = env.pttl(key);
        assert!(ttl > 50_000 && ttl <= 60_000, "{key} expires after the retention, got {ttl} ms");
    }
    // Frames appended late to a finished run keep the expiry.
    b.append_frames("r1", &frames([4])).await.unwrap();
    assert!(env.pttl("run:r1:frames") > 0);

    // Back to not finished: no expiry again.
    b.set_run_status("r1", "running", false).await.unwrap();
    assert_eq!(env.pttl("run:r1"), -1);
    assert_eq!(env.pttl("run:r1:frames"), -1);

    // Without an owner; put_run replaces the whole record.
    run.owner = None;
    a.put_run(&run).await.unwrap();
    assert_eq!(b.get_run("r1").await.unwrap(), Some(run));

    // Status and node changes of an unknown run create nothing.
    a.set_run_status("ghost", "failed", true).await.unwrap();
    a.set_run_node("ghost", "x").await.unwrap();
    assert_eq!(a.get_run("ghost").await.unwrap(), None);
    a.shutdown().await;
    b.shutdown().await;
}

/// A run's end is one step in Redis: whoever sees its terminal frame in the stream finds its
/// record finished and its chat free, never one without the other.
#[tokio::test]
async fn finishing_a_run_appends_its_last_frames_sets_its_status_and_frees_its_chat_at_once() {
    let Some(env) = Env::new() else { return };
    let (a, b) = (env.node().await, env.node().await);
    let run = RunRecord {
        run_id: "r1".into(),
        chat_id: "c1".into(),
        agent_key: "demo".into(),
        node_id: a.node_id().into(),
        owner: None,
        status: "running".into(),
    };
    a.put_run(&run).await.unwrap();
    assert_eq!(a.acquire_chat("c1", "r1").await.unwrap(), None);
    a.append_frames("r1", &frames(1..=3)).await.unwrap();
    assert_eq!(b.acquire_chat("c1", "r2").await.unwrap(), Some("r1".into()), "held while running");

    assert_eq!(a.finish_run("r1", "c1", &frames(3..=5), "completed").await.unwrap(), Appended::Done);
    assert_eq!(b.last_seq("r1").await.unwrap(), Some(5), "the last frames are there (3 not twice)");
    assert_eq!(b.get_run("r1").await.unwrap().map(|r| r.status), Some("completed".into()));
    for key in ["run:r1", "run:r1:frames"] {
        let ttl = env.pttl(key);
        assert!(ttl > 50_000 && ttl <= 60_000, "{key} expires after the retention, got {ttl} ms");
    }
    assert_eq!(b.acquire_chat("c1", "r2").await.unwrap(), None, "the chat is free");

    // A chat another run holds by now is not freed by a late finish.
    assert_eq!(a.finish_run("r1", "c1", &[], "completed").await.unwrap(), Appended::Done);
    assert_eq!(a.acquire_chat("c1", "r3").await.unwrap(), Some("r2".into()));
    a.shutdown().await;
    b.shutdown().await;
}

/// Crash recovery across replicas: the node running a run writes its frames fenced with a signed
/// progress note; once another node took the run over (the record names it), the old node's
/// writes are refused and change nothing, and a progress note rewritten in Redis reads as absent.
#[tokio::test]
async fn a_run_taken_over_by_another_node_refuses_its_old_nodes_writes() {
    let Some(env) = Env::new() else { return };
    let (a, b) = (env.node().await, env.node().await);
    let run = RunRecord {
        run_id: "r".into(),
        chat_id: "c".into(),
        agent_key: "demo".into(),
        node_id: a.node_id().into(),
        owner: None,
        status: "running".into(),
    };
    a.put_run(&run).await.unwrap();
    assert_eq!(b.run_progress("r").await.unwrap(), None, "no note yet");
    assert_eq!(a.mirror_frames("r", &frames(1..=3), Some("p3")).await.unwrap(), Appended::Done);
    assert_eq!(b.run_progress("r").await.unwrap().as_deref(), Some("p3"), "the note, verified");
    // A note alone (no frames) is written too.
    assert_eq!(a.mirror_frames("r", &[], Some("p3b")).await.unwrap(), Appended::Done);
    assert_eq!(b.run_progress("r").await.unwrap().as_deref(), Some("p3b"));

    // b takes the run over and numbers on.
    b.set_run_node("r", b.node_id()).await.unwrap();
    assert_eq!(b.mirror_frames("r", &frames([4]), Some("p4")).await.unwrap(), Appended::Done);
    assert_eq!(a.mirror_frames("r", &frames(4..=6), Some("stale")).await.unwrap(), Appended::TakenOver);
    assert_eq!(a.finish_run("r", "c", &frames([7]), "failed").await.unwrap(), Appended::TakenOver);
    assert_eq!(b.last_seq("r").await.unwrap(), Some(4), "nothing of the old node's got in");
    assert_eq!(b.get_run("r").await.unwrap().map(|r| r.status), Some("running".into()));
    assert_eq!(b.run_progress("r").await.unwrap().as_deref(), Some("p4"));

    // Rewritten in Redis: refused.
    let _: () = redis::cmd("HSET")
        .arg(format!("{}:run:r", env.prefix))
        .arg("progress")
        .arg("forged")
        .query(&mut env.redis())
        .unwrap();
    assert_eq!(b.run_progress("r").await.unwrap(), None, "a forged note reads as absent");
    assert_eq!(b.finish_run("r", "c", &frames([5]), "completed").await.unwrap(), Appended::Done);
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test]
async fn frames_appended_on_one_node_are_followed_on_another_from_a_cursor() {
    let Some(env) = Env::new() else { return };
    let (a, b) = (env.node().await, env.node().await);
    assert_eq!(a.first_seq("r").await.unwrap(), None);
    assert_eq!(a.last_seq("r").await.unwrap(), None);
    a.append_frames("r", &frames(1..=5)).await.unwrap();
    assert_eq!(b.first_seq("r").await.unwrap(), Some(1));
    assert_eq!(b.last_seq("r").await.unwrap(), Some(5));

    // Retained replay from the cursor, then idle when quiet.
    let mut follow = b.follow("r", 2);
    assert_eq!(next_frames(&mut follow, 3).await, frames(3..=5));
    let started = Instant::now();
    assert_eq!(next(&mut follow).await, FollowItem::Idle);
    let idle_after = started.elapsed();
    assert!(idle_after >= Duration::from_millis(800) && idle_after < Duration::from_secs(3), "{idle_after:?}");

    // Live frames, in order.
    a.append_frames("r", &frames(6..=7)).await.unwrap();
    assert_eq!(next_frames(&mut follow, 2).await, frames(6..=7));

    // A retry after a partial failure: 5..=7 are already there and skipped, 8 is new.
    a.append_frames("r", &frames(5..=8)).await.unwrap();
    assert_eq!(next_frames(&mut follow, 1).await, frames([8]));
    a.append_frames("r", &frames([8, 2, 0])).await.unwrap();
    a.append_frames("r", &[]).await.unwrap();
    a.append_frames("r", &frames([9])).await.unwrap();
    assert_eq!(next_frames(&mut follow, 1).await, frames([9]), "nothing re-delivered");
    assert_eq!(a.last_seq("r").await.unwrap(), Some(9));

    // Binary frames come back byte for byte.
    let binary = Frame { seq: 10, bytes: Bytes::from_static(b"\x00\xff\r\ndata: {}\n\n") };
    a.append_frames("r", std::slice::from_ref(&binary)).await.unwrap();
    assert_eq!(next_frames(&mut follow, 1).await, vec![binary]);

    // A follower from 0 replays everything.
    let mut all = a.follow("r", 0);
    let replay = next_frames(&mut all, 10).await;
    assert_eq!(replay.iter().map(|f| f.seq).collect::<Vec<_>>(), (1..=10).collect::<Vec<_>>());
    drop(all);
    drop(follow);

    // MAXLEN ~ trimming shows in first_seq.
    let c = Cluster::connect(ClusterConfig { stream_max_events: 10, ..env.cfg() }).await.unwrap();
    for chunk in (1..=1000u64).collect::<Vec<_>>().chunks(100) {
        c.append_frames("t", &frames(chunk.iter().copied())).await.unwrap();
    }
    let first = a.first_seq("t").await.unwrap().unwrap();
    assert!(first > 1 && first <= 991, "first retained seq {first}");
    assert_eq!(a.last_seq("t").await.unwrap(), Some(1000));
    let mut trimmed = b.follow("t", 0);
    assert_eq!(next_frames(&mut trimmed, 1).await[0].seq, first, "a follower starts at the oldest retained");
    for n in [&a, &b, &c] {
        n.shutdown().await;
    }
}

/// Stream entries as `XRANGE` returns them: id, then field/value pairs.
type StreamEntries = Vec<(String, Vec<(String, Vec<u8>)>)>;

/// Entries written into a run's stream by anyone but a node (no MAC, a made-up one, or a genuine
/// MAC moved to another seq or run) are skipped by followers; the genuine frames around them
/// arrive in order.
#[tokio::test]
async fn frames_written_to_redis_by_anyone_else_are_not_followed() {
    let Some(env) = Env::new() else { return };
    let (a, b) = (env.node().await, env.node().await);
    a.append_frames("r", &frames(1..=2)).await.unwrap();
    let stream = format!("{}:run:r:frames", env.prefix);
    let entries: StreamEntries = redis::cmd("XRANGE").arg(&stream).arg("-").arg("+").query(&mut env.redis()).unwrap();
    let genuine_mac = entries[1].1.iter().find(|(k, _)| k == "m").expect("a MAC field").1.clone();
    let xadd = |key: &str, id: &str, fields: &[(&str, &[u8])]| {
        let mut cmd = redis::cmd("XADD");
        cmd.arg(key).arg(id);
        for (k, v) in fields {
            cmd.arg(*k).arg(*v);
        }
        let _: String = cmd.query(&mut env.redis()).unwrap();
    };
    xadd(&stream, "3-0", &[("f", b"injected, no mac")]);
    xadd(&stream, "4-0", &[("f", b"injected"), ("m", &[0u8; 32])]);
    xadd(&stream, "5-0", &[("f", b"frame 2"), ("m", &genuine_mac)]); // frame 2's MAC, another seq
    a.append_frames("r", &frames(6..=7)).await.unwrap();
    // Frame 2's entry copied to another run's stream.
    let other = format!("{}:run:other:frames", env.prefix);
    xadd(&other, "2-0", &[("f", b"frame 2"), ("m", &genuine_mac)]);

    let mut follow = b.follow("r", 0);
    let seen = next_frames(&mut follow, 4).await;
    assert_eq!(seen.iter().map(|f| f.seq).collect::<Vec<_>>(), vec![1, 2, 6, 7]);
    assert_eq!(seen, [frames(1..=2), frames(6..=7)].concat());
    let mut copied = b.follow("other", 0);
    assert_eq!(next(&mut copied).await, FollowItem::Idle, "a frame moved to another run is not followed");
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test]
async fn a_follower_sees_100_frames_appended_while_it_follows() {
    let Some(env) = Env::new() else { return };
    let (a, b) = (env.node().await, env.node().await);
    let mut follow = b.follow("live", 0);
    let writer = tokio::spawn(async move {
        for seq in 1..=100u64 {
            a.append_frames("live", &[frame(seq)]).await.unwrap();
            if seq % 10 == 0 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        a
    });
    let got = next_frames(&mut follow, 100).await;
    assert_eq!(got, frames(1..=100));
    let a = writer.await.unwrap();
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test]
async fn control_requests_reach_the_owner_and_a_dead_node_gives_no_reply() {
    let Some(env) = Env::new() else { return };
    let (a, b) = (env.node().await, env.node().await);
    let handled = Arc::new(AtomicUsize::new(0));
    let b_id = b.node_id().to_owned();
    {
        let handled = Arc::clone(&handled);
        b.serve_control(move |req: ControlRequest| {
            let handled = Arc::clone(&handled);
            let b_id = b_id.clone();
            async move {
                handled.fetch_add(1, Ordering::SeqCst);
                match req.body["behave"].as_str() {
                    Some("panic") => panic!("handler bug"),
                    Some("slow") => {
                        tokio::time::sleep(Duration::from_millis(300)).await;
                        ControlReply { status: 202, body: json!({"slow": true}) }
                    }
                    _ => ControlReply {
                        status: 200,
                        body: json!({"node": b_id, "kind": req.kind, "run": req.run_id, "echo": req.body}),
                    },
                }
            }
        });
    }
    // The transport does not care what is asked: the handler's behaviour rides in the body.
    let req = |behave: &str| ControlRequest {
        kind: ControlKind::Interrupt,
        run_id: "r9".into(),
        body: json!({"behave": behave}),
        principal: None,
    };

    let reply = a.send_control(b.node_id(), req("cancel"), Duration::from_secs(2)).await.unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.body,
        json!({"node": b.node_id(), "kind": "interrupt", "run": "r9", "echo": {"behave": "cancel"}})
    );

    // Concurrent requests are handled concurrently, each answered to its own sender.
    let started = Instant::now();
    let replies =
        futures::future::join_all((0..5).map(|_| a.send_control(b.node_id(), req("slow"), Duration::from_secs(3))))
            .await;
    assert!(replies.iter().all(|r| r.as_ref().unwrap().status == 202));
    assert!(started.elapsed() < Duration::from_millis(1200), "handled in parallel: {:?}", started.elapsed());

    // A panicking handler answers 500.
    let reply = a.send_control(b.node_id(), req("panic"), Duration::from_secs(2)).await.unwrap();
    assert_eq!(reply.status, 500);

    // A node that is gone: NoReply at once.
    let started = Instant::now();
    let err = b.send_control("dead-node", req("cancel"), Duration::from_secs(1)).await.unwrap_err();
    assert!(matches!(&err, ClusterError::NoReply { node } if node == "dead-node"), "{err}");
    assert!(started.elapsed() < Duration::from_millis(500));

    // A node that is alive by its lease but does not answer (hung, or no control server):
    // NoReply within the timeout.
    let c = env.node().await;
    let started = Instant::now();
    let err = a.send_control(c.node_id(), req("cancel"), Duration::from_millis(700)).await.unwrap_err();
    let took = started.elapsed();
    assert!(matches!(err, ClusterError::NoReply { .. }), "{err}");
    assert!(took >= Duration::from_millis(650) && took < Duration::from_millis(1500), "{took:?}");
    // The unanswered request was withdrawn from the inbox.
    let queued: i64 =
        redis::cmd("LLEN").arg(format!("{}:node:{}:inbox", env.prefix, c.node_id())).query(&mut env.redis()).unwrap();
    assert_eq!(queued, 0);

    // A request in the unsigned form of agw before signing (and past its deadline too) is
    // dropped, not handled.
    let before = handled.load(Ordering::SeqCst);
    let stale = json!({"reply_to": format!("{}:reply:x", env.prefix), "deadline_ms": 1, "from": "a",
        "request": {"kind": "interrupt", "run_id": "r", "body": null}});
    let _: () = redis::cmd("RPUSH")
        .arg(format!("{}:node:{}:inbox", env.prefix, b.node_id()))
        .arg(stale.to_string())
        .query(&mut env.redis())
        .unwrap();
    let reply = a.send_control(b.node_id(), req("status"), Duration::from_secs(2)).await.unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!(handled.load(Ordering::SeqCst), before + 1, "the stale request was not handled");

    // After shutdown B serves no more.
    b.shutdown().await;
    let err = a.send_control(b.node_id(), req("cancel"), Duration::from_millis(500)).await.unwrap_err();
    assert!(matches!(err, ClusterError::NoReply { .. }));
    a.shutdown().await;
    c.shutdown().await;
}

/// Polls `key` (a list) until it holds an item and returns the first one, failing after 5 s.
async fn first_item(env: &Env, key: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let items: Vec<String> = redis::cmd("LRANGE").arg(key).arg(0).arg(0).query(&mut env.redis()).unwrap();
        if let Some(item) = items.into_iter().next() {
            return item;
        }
        assert!(Instant::now() < deadline, "nothing arrived in {key}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn rpush(env: &Env, key: &str, value: &str) {
    let _: () = redis::cmd("RPUSH").arg(key).arg(value).query(&mut env.redis()).unwrap();
}

/// A handler that records what it handles and echoes the caller's principal.
fn recording(node: &Cluster) -> Arc<std::sync::Mutex<Vec<ControlRequest>>> {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    node.serve_control(move |req: ControlRequest| {
        let log = Arc::clone(&log);
        async move {
            let principal = req.principal.clone();
            log.lock().unwrap().push(req);
            ControlReply { status: 200, body: json!({"principal": principal}) }
        }
    });
    seen
}

/// What someone with write access to Redis pushes onto a node's inbox is never handled: the
/// unsigned form agw used before, a made-up MAC, a genuine request altered after signing, a
/// genuine request pushed again (replayed) or onto another node's inbox (misdirected). Genuine
/// requests keep working, and a forged reply on a sender's reply list is not taken for the
/// answer.
#[tokio::test]
async fn forged_altered_replayed_and_misdirected_control_requests_are_never_handled() {
    let Some(env) = Env::new() else { return };
    let (a, b, c) = (env.node().await, env.node().await, env.node().await);
    let inbox = |node: &Cluster| format!("{}:node:{}:inbox", env.prefix, node.node_id());
    let steer = |who: &str| ControlRequest {
        kind: ControlKind::Steer,
        run_id: "r1".into(),
        body: json!({"runId": "r1", "message": "go"}),
        principal: Some(json!({"sub": who})),
    };

    // A genuine request, captured in B's inbox before B serves it.
    let sender = a.clone();
    let (b_id, request) = (b.node_id().to_owned(), steer("alice"));
    let sent = tokio::spawn(async move { sender.send_control(&b_id, request, Duration::from_secs(5)).await });
    let genuine = first_item(&env, &inbox(&b)).await;
    assert!(genuine.starts_with("agw1."), "signed on the wire: {genuine}");
    let on_b = recording(&b);
    let on_c = recording(&c);
    let reply = sent.await.unwrap().unwrap();
    assert_eq!((reply.status, &reply.body), (200, &json!({"principal": {"sub": "alice"}})));

    // The attacks.
    let unsigned = json!({"reply_to": format!("{}:reply:x", env.prefix), "deadline_ms": u64::MAX, "from": "a",
        "request": {"kind": "submit", "run_id": "r1", "body": {"runId": "r1", "params": "always"}}});
    rpush(&env, &inbox(&b), &unsigned.to_string());
    let json_part = genuine.splitn(3, '.').nth(2).unwrap().to_owned();
    rpush(&env, &inbox(&b), &format!("agw1.{}.{json_part}", "0".repeat(64)));
    assert!(genuine.contains(r#""sub":"alice""#));
    rpush(&env, &inbox(&b), &genuine.replace(r#""sub":"alice""#, r#""sub":"bob""#));
    rpush(&env, &inbox(&b), &genuine);
    rpush(&env, &inbox(&c), &genuine);

    // One more genuine request to each: served after the attacks (one inbox is read in order).
    for node in [&b, &c] {
        let reply = a.send_control(node.node_id(), steer("carol"), Duration::from_secs(2)).await.unwrap();
        assert_eq!(reply.body, json!({"principal": {"sub": "carol"}}));
    }
    let who = |seen: &std::sync::Mutex<Vec<ControlRequest>>| {
        seen.lock().unwrap().iter().map(|r| r.principal.clone().unwrap()["sub"].clone()).collect::<Vec<_>>()
    };
    assert_eq!(who(&on_b), vec![json!("alice"), json!("carol")], "B handled only the two genuine requests");
    assert_eq!(who(&on_c), vec![json!("carol")], "C refused the request addressed to B");

    // A forged reply pushed to the sender's reply list is ignored; the genuine one is taken.
    let d = env.node().await;
    let sender = a.clone();
    let d_id = d.node_id().to_owned();
    let sent = tokio::spawn(async move { sender.send_control(&d_id, steer("alice"), Duration::from_secs(5)).await });
    let pending = first_item(&env, &inbox(&d)).await;
    let envelope: serde_json::Value = serde_json::from_str(pending.splitn(3, '.').nth(2).unwrap()).unwrap();
    let reply_to = envelope["reply_to"].as_str().unwrap();
    let forged = json!({"status": 200, "body": {"principal": {"sub": "mallory"}}}).to_string();
    rpush(&env, reply_to, &forged);
    rpush(&env, reply_to, &format!("agw1.{}.{forged}", "0".repeat(64)));
    let _on_d = recording(&d);
    let reply = sent.await.unwrap().unwrap();
    assert_eq!(reply.body, json!({"principal": {"sub": "alice"}}), "the genuine reply, not the forged ones");
    for node in [a, b, c, d] {
        node.shutdown().await;
    }
}

/// The owner in a run record cannot be rewritten through Redis alone: a record whose owner, ids
/// or signature were changed, or that was copied under another run id, reads as absent, and so
/// does a record signed with another secret. Status and node changes keep a record valid.
#[tokio::test]
async fn a_run_record_rewritten_in_redis_reads_as_absent() {
    let Some(env) = Env::new() else { return };
    let a = env.node().await;
    let run = RunRecord {
        run_id: "r1".into(),
        chat_id: "c1".into(),
        agent_key: "demo".into(),
        node_id: a.node_id().into(),
        owner: Some(json!({"sub": "alice"}).to_string()),
        status: "waiting".into(),
    };
    let key = |id: &str| format!("{}:run:{id}", env.prefix);
    let hset = |id: &str, field: &str, value: &str| {
        let _: () = redis::cmd("HSET").arg(key(id)).arg(field).arg(value).query(&mut env.redis()).unwrap();
    };
    for (field, value) in [
        ("owner", r#"{"sub":"bob"}"#),
        ("chat_id", "c2"),
        ("agent_key", "other"),
        ("run_id", "r2"),
        ("mac", "00"),
        ("mac", &"0".repeat(64)),
    ] {
        a.put_run(&run).await.unwrap();
        assert_eq!(a.get_run("r1").await.unwrap().as_ref(), Some(&run));
        hset("r1", field, value);
        assert_eq!(a.get_run("r1").await.unwrap(), None, "{field} rewritten to {value}");
    }
    a.put_run(&run).await.unwrap();
    let _: () = redis::cmd("HDEL").arg(key("r1")).arg("owner").query(&mut env.redis()).unwrap();
    assert_eq!(a.get_run("r1").await.unwrap(), None, "owner removed");

    // Copied whole under another run's key.
    a.put_run(&run).await.unwrap();
    let fields: Vec<String> = redis::cmd("HGETALL").arg(key("r1")).query(&mut env.redis()).unwrap();
    let _: () = redis::cmd("HSET").arg(key("r9")).arg(&fields).query(&mut env.redis()).unwrap();
    assert_eq!(a.get_run("r9").await.unwrap(), None, "a record copied to another run id");

    // What the nodes change in place leaves it valid.
    a.set_run_status("r1", "running", false).await.unwrap();
    a.set_run_node("r1", "elsewhere").await.unwrap();
    let read = a.get_run("r1").await.unwrap().expect("still valid");
    assert_eq!((read.status.as_str(), read.node_id.as_str()), ("running", "elsewhere"));

    // Another deployment's secret: its records are not ours.
    let other = ClusterConfig {
        secret: Some(ClusterSecret::new("another-deployment-another-secret-xyz").unwrap()),
        ..env.cfg()
    };
    let other = Cluster::connect(other).await.unwrap();
    other.put_run(&run).await.unwrap();
    assert_eq!(a.get_run("r1").await.unwrap(), None);
    other.shutdown().await;
    a.shutdown().await;
}

#[tokio::test]
async fn one_run_per_chat_across_nodes_and_a_dead_holder_is_replaced() {
    let Some(env) = Env::new() else { return };
    let (a, b) = (env.node().await, env.node().await);
    assert_eq!(a.acquire_chat("c", "r1").await.unwrap(), None);
    assert_eq!(a.acquire_chat("c", "r1").await.unwrap(), None, "already ours");
    assert_eq!(b.acquire_chat("c", "r2").await.unwrap(), Some("r1".into()), "busy on another node");
    assert_eq!(a.acquire_chat("c", "r3").await.unwrap(), Some("r1".into()), "busy for another run on the same node");
    assert_eq!(b.acquire_chat("other", "r2").await.unwrap(), None, "chats are independent");

    b.release_chat("c", "r2").await.unwrap(); // not the holder: no effect
    assert_eq!(b.acquire_chat("c", "r2").await.unwrap(), Some("r1".into()));
    a.release_chat("c", "r1").await.unwrap();
    assert_eq!(b.acquire_chat("c", "r2").await.unwrap(), None, "free after release");

    // B crashes: its holding does not count once its lease is gone.
    b.stop_heartbeat_for_test();
    assert_eq!(a.acquire_chat("c", "r4").await.unwrap(), Some("r2".into()));
    wait_past_lease().await;
    assert_eq!(a.acquire_chat("c", "r4").await.unwrap(), None, "taken over from a dead node");
    assert_eq!(b.acquire_chat("c", "r5").await.unwrap(), Some("r4".into()));

    // Adoption: the same run re-acquired on another node moves the lock to that node.
    let c = env.node().await;
    assert_eq!(c.acquire_chat("c", "r4").await.unwrap(), None);
    a.shutdown().await;
    assert_eq!(b.acquire_chat("c", "r6").await.unwrap(), Some("r4".into()), "held by C now, which is alive");
    c.release_chat("c", "r4").await.unwrap();
    assert_eq!(b.acquire_chat("c", "r6").await.unwrap(), None);
    c.shutdown().await;
}

#[tokio::test]
async fn a_claim_is_won_exactly_once_among_three_racing_nodes() {
    let Some(env) = Env::new() else { return };
    let nodes = [env.node().await, env.node().await, env.node().await];
    for round in 0..20 {
        let key = format!("job-{round}");
        let wins = futures::future::join_all(nodes.iter().map(|n| n.claim(&key, Duration::from_secs(30)))).await;
        let won = wins.into_iter().map(Result::unwrap).filter(|w| *w).count();
        assert_eq!(won, 1, "round {round}");
    }
    assert!(!nodes[0].claim("job-0", Duration::from_secs(30)).await.unwrap());
    // A claim is free again after its TTL.
    assert!(nodes[1].claim("short", Duration::from_millis(200)).await.unwrap());
    assert!(!nodes[2].claim("short", Duration::from_millis(200)).await.unwrap());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(nodes[2].claim("short", Duration::from_millis(200)).await.unwrap());
    for n in &nodes {
        n.shutdown().await;
    }
}

#[tokio::test]
async fn limited_sets_honour_the_limit_across_nodes_and_free_a_dead_nodes_members() {
    let Some(env) = Env::new() else { return };
    let (a, b, c) = (env.node().await, env.node().await, env.node().await);
    assert!(a.enter_limited("q", "m1", 2).await.unwrap());
    assert!(a.enter_limited("q", "m1", 2).await.unwrap(), "entering twice is idempotent");
    assert!(b.enter_limited("q", "m2", 2).await.unwrap());
    assert!(!c.enter_limited("q", "m3", 2).await.unwrap(), "full");
    assert_eq!(c.count_limited("q").await.unwrap(), 2);
    a.leave_limited("q", "m1").await.unwrap();
    assert_eq!(c.count_limited("q").await.unwrap(), 1);
    assert!(c.enter_limited("q", "m3", 2).await.unwrap());
    assert!(!a.enter_limited("q", "m4", 2).await.unwrap());

    // Racing for the last places: exactly the limit gets in.
    let members = ["x0", "x1", "x2"];
    let results =
        futures::future::join_all([&a, &b, &c].iter().zip(members).map(|(n, m)| n.enter_limited("race", m, 2))).await;
    assert_eq!(results.into_iter().map(Result::unwrap).filter(|x| *x).count(), 2);
    assert_eq!(a.count_limited("race").await.unwrap(), 2);

    // B dies: its member no longer counts.
    b.stop_heartbeat_for_test();
    wait_past_lease().await;
    assert_eq!(a.count_limited("q").await.unwrap(), 1, "only C's member is live");
    assert!(a.enter_limited("q", "m4", 2).await.unwrap());
    assert_eq!(a.count_limited("q").await.unwrap(), 2);
    assert_eq!(c.count_limited("missing").await.unwrap(), 0);
    a.shutdown().await;
    c.shutdown().await;
}

/// Reservations against a daily budget: granted while spend plus the others' reservations is
/// below the limit, settled by spends, released by their run, dropped with a dead node.
#[tokio::test]
async fn reservations_hold_a_budget_across_nodes_until_settled_released_or_their_node_dies() {
    let Some(env) = Env::new() else { return };
    let (a, b, c) = (env.node().await, env.node().await, env.node().await);
    let day = Duration::from_secs(60);
    let r = a.reserve("spent", "held", "run-a", 60, 100, day).await.unwrap();
    assert_eq!((r.granted, r.spent, r.held), (true, 0, 0));
    assert!(env.pttl("reserve:held") > 50_000, "a new reservation hash expires");
    let r = b.reserve("spent", "held", "run-b", 60, 100, day).await.unwrap();
    assert_eq!((r.granted, r.held), (true, 60), "60 < 100: granted");
    let r = c.reserve("spent", "held", "run-c", 60, 100, day).await.unwrap();
    assert_eq!((r.granted, r.held), (false, 120), "the others hold 120 of 100");
    // Reserving again replaces a member's own reservation, it does not add to it.
    assert!(a.reserve("spent", "held", "run-a", 60, 100, day).await.unwrap().granted);

    // A spends 50: counted, and taken off its reservation (60 → 10); B releases.
    a.spend(&[("spent", 50), ("cost", 7), ("none", 0)], &["held"], "run-a", 50, day).await.unwrap();
    assert_eq!(c.get_counters(&["spent", "cost", "none"]).await.unwrap(), [50, 7, 0]);
    assert!(env.pttl("counter:spent") > 50_000);
    b.release_reservation(&["held"], "run-b").await.unwrap();
    let r = c.reserve("spent", "held", "run-c", 0, 100, day).await.unwrap();
    assert_eq!((r.granted, r.spent, r.held), (true, 50, 10), "a zero amount only checks");
    // Settling more than is left stops at 0.
    a.spend(&[("spent", 45)], &["held"], "run-a", 45, day).await.unwrap();
    let r = c.reserve("spent", "held", "run-c", 0, 100, day).await.unwrap();
    assert_eq!((r.spent, r.held), (95, 0));
    assert!(!c.reserve("spent", "held", "run-c", 0, 95, day).await.unwrap().granted, "spent reached the limit");

    // A dies: its reservation no longer counts.
    assert!(a.reserve("spent", "held", "run-a2", 90, 1_000, day).await.unwrap().granted);
    a.stop_heartbeat_for_test();
    wait_past_lease().await;
    let r = c.reserve("spent", "held", "run-c", 0, 1_000, day).await.unwrap();
    assert_eq!((r.granted, r.held), (true, 0), "{r:?}");
    assert!(b.get_counters(&[]).await.unwrap().is_empty());
    b.shutdown().await;
    c.shutdown().await;
}

#[tokio::test]
async fn windows_and_counters_are_shared() {
    let Some(env) = Env::new() else { return };
    let (a, b) = (env.node().await, env.node().await);
    let window = Duration::from_millis(800);
    let (n1, left1) = a.hit_window("ip", window).await.unwrap();
    let (n2, left2) = b.hit_window("ip", window).await.unwrap();
    let (n3, _) = a.hit_window("ip", window).await.unwrap();
    assert_eq!((n1, n2, n3), (1, 2, 3));
    assert!(left1 <= window && left1 > Duration::from_millis(600), "{left1:?}");
    assert!(left2 <= left1, "the window does not restart with later hits");
    tokio::time::sleep(window + Duration::from_millis(100)).await;
    let (n, left) = b.hit_window("ip", window).await.unwrap();
    assert_eq!(n, 1, "a new window after expiry");
    assert!(left > Duration::from_millis(600));

    assert_eq!(a.get_counter("tokens").await.unwrap(), 0);
    assert_eq!(a.add_counter("tokens", 5, Duration::from_secs(60)).await.unwrap(), 5);
    assert_eq!(b.add_counter("tokens", -2, Duration::from_secs(1)).await.unwrap(), 3);
    assert_eq!(b.get_counter("tokens").await.unwrap(), 3);
    let ttl = env.pttl("counter:tokens");
    assert!(ttl > 50_000, "the TTL is set when the counter is new only: {ttl}");
    assert_eq!(a.add_counter("forever", 1, Duration::ZERO).await.unwrap(), 1);
    assert_eq!(env.pttl("counter:forever"), -1);
    assert_eq!(a.add_counter("brief", 7, Duration::from_millis(200)).await.unwrap(), 7);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(b.get_counter("brief").await.unwrap(), 0);
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test]
async fn node_ids_and_the_prefix_shape_the_key_layout() {
    let Some(env) = Env::new() else { return };
    let cfg = ClusterConfig { node_id: "node-7".into(), ..env.cfg() };
    let a = Cluster::connect(cfg.clone()).await.unwrap();
    assert_eq!(a.node_id(), "node-7");
    assert_eq!(a.config().prefix, env.prefix);
    a.ping().await.unwrap();
    a.put_run(&RunRecord {
        run_id: "r".into(),
        chat_id: "c".into(),
        agent_key: "k".into(),
        node_id: "node-7".into(),
        owner: None,
        status: "running".into(),
    })
    .await
    .unwrap();
    a.append_frames("r", &frames([1])).await.unwrap();
    a.acquire_chat("c", "r").await.unwrap();
    a.claim("k", Duration::from_secs(5)).await.unwrap();
    a.enter_limited("l", "m", 1).await.unwrap();
    a.hit_window("w", Duration::from_secs(5)).await.unwrap();
    a.add_counter("n", 1, Duration::from_secs(5)).await.unwrap();
    let mut keys: Vec<String> = redis::cmd("KEYS").arg(format!("{}:*", env.prefix)).query(&mut env.redis()).unwrap();
    keys.iter_mut().for_each(|k| *k = k[env.prefix.len() + 1..].to_owned());
    keys.sort();
    assert_eq!(
        keys,
        ["chat:c:run", "claim:k", "counter:n", "limit:l", "node:node-7", "run:r", "run:r:frames", "window:w"]
    );
    let holder: String = redis::cmd("GET").arg(format!("{}:chat:c:run", env.prefix)).query(&mut env.redis()).unwrap();
    assert_eq!(holder, "node-7|r");

    let bad = Cluster::connect(ClusterConfig { node_id: "a|b".into(), ..cfg }).await.unwrap_err();
    assert!(matches!(bad, ClusterError::Config(_)), "{bad}");
    a.shutdown().await;
}

// The two tests below need no Redis.

#[tokio::test]
async fn connecting_to_a_wrong_port_fails_clearly_within_the_op_timeout() {
    // Port 1 on loopback: nothing listens there.
    let op_timeout = Duration::from_secs(1);
    let cfg =
        ClusterConfig { url: "redis://127.0.0.1:1/".into(), op_timeout, secret: secret(), ..ClusterConfig::default() };
    let started = Instant::now();
    let err = Cluster::connect(cfg).await.unwrap_err();
    assert!(started.elapsed() < op_timeout + Duration::from_millis(300), "{:?}", started.elapsed());
    let msg = err.to_string();
    eprintln!("connect error: {msg}");
    assert!(matches!(err, ClusterError::Redis(..)), "{msg}");
    assert!(msg.contains("connect to redis://127.0.0.1:1/"), "{msg}");
    assert!(err.is_unavailable(), "{msg}");
}

#[tokio::test]
async fn connecting_to_a_server_that_never_answers_fails_within_the_op_timeout() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((sock, _)) = listener.accept().await {
            held.push(sock); // accept, never answer
        }
    });
    let op_timeout = Duration::from_millis(700);
    let cfg = ClusterConfig {
        url: format!("redis://:secret@{addr}/"),
        op_timeout,
        secret: secret(),
        ..ClusterConfig::default()
    };
    let started = Instant::now();
    let err = Cluster::connect(cfg).await.unwrap_err();
    assert!(started.elapsed() < op_timeout + Duration::from_millis(300), "{:?}", started.elapsed());
    let msg = err.to_string();
    eprintln!("connect error: {msg}");
    assert!(err.is_unavailable(), "{msg}");
    assert!(!msg.contains("secret"), "no password in errors: {msg}");
    hold.abort();
}

/// Every operation's future can move between threads (the HTTP layer spawns them). Compiled,
/// never run.
#[allow(dead_code)]
fn every_future_is_send(c: &Cluster, run: &RunRecord, req: ControlRequest) {
    fn send<T: Send>(_: T) {}
    let d = Duration::from_secs(1);
    send(Cluster::connect(ClusterConfig::default()));
    send(c.ping());
    send(c.shutdown());
    send(c.node_alive("n"));
    send(c.put_run(run));
    send(c.get_run("r"));
    send(c.set_run_status("r", "completed", true));
    send(c.set_run_node("r", "n"));
    send(c.append_frames("r", &[]));
    send(c.first_seq("r"));
    send(c.last_seq("r"));
    send(c.follow("r", 0));
    send(c.send_control("n", req, d));
    send(c.acquire_chat("c", "r"));
    send(c.release_chat("c", "r"));
    send(c.claim("k", d));
    send(c.enter_limited("k", "m", 1));
    send(c.leave_limited("k", "m"));
    send(c.count_limited("k"));
    send(c.hit_window("k", d));
    send(c.add_counter("k", 1, d));
    send(c.get_counter("k"));
}

/// A TCP proxy in front of Redis that can stall (hold bytes until resumed), black-hole (swallow
/// bytes for good on the connections it catches, like a peer that vanished) or drop every
/// connection (like a Redis restart), to see the cluster fail fast and recover.
mod outage {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;
    use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
    use tokio::sync::watch;

    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    pub enum Mode {
        Up,
        Stall,
        Blackhole,
        Down,
    }

    pub struct Proxy {
        pub url: String,
        pub mode: watch::Sender<Mode>,
        task: tokio::task::JoinHandle<()>,
    }

    impl Drop for Proxy {
        fn drop(&mut self) {
            self.mode.send_replace(Mode::Down);
            self.task.abort();
        }
    }

    pub async fn start(redis_url: &str) -> Proxy {
        let target = redis_url.trim_start_matches("redis://").trim_end_matches('/').to_owned();
        let target = target.split('/').next().unwrap().to_owned();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("redis://{}/", listener.local_addr().unwrap());
        let (mode, _) = watch::channel(Mode::Up);
        let modes = mode.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if *modes.borrow() == Mode::Down {
                    continue; // closed at once
                }
                let Ok(server) = tokio::net::TcpStream::connect(&target).await else { continue };
                let (cr, cw) = client.into_split();
                let (sr, sw) = server.into_split();
                tokio::spawn(pipe(cr, sw, modes.subscribe()));
                tokio::spawn(pipe(sr, cw, modes.subscribe()));
            }
        });
        Proxy { url, mode, task }
    }

    async fn pipe(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut mode: watch::Receiver<Mode>) {
        let mut buf = vec![0u8; 16 * 1024];
        let mut dead = *mode.borrow_and_update() == Mode::Blackhole;
        loop {
            let n = tokio::select! {
                r = from.read(&mut buf) => match r { Ok(0) | Err(_) => return, Ok(n) => n },
                changed = mode.changed() => {
                    match (changed, *mode.borrow_and_update()) {
                        (Err(_), _) | (_, Mode::Down) => return,
                        (_, Mode::Blackhole) => dead = true,
                        _ => {}
                    }
                    continue;
                }
            };
            loop {
                let now = *mode.borrow_and_update();
                match now {
                    Mode::Up => break,
                    Mode::Blackhole => {
                        dead = true;
                        break;
                    }
                    Mode::Down => return,
                    Mode::Stall => {
                        if mode.changed().await.is_err() {
                            return;
                        }
                    }
                }
            }
            if !dead && to.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    }
}

#[tokio::test]
async fn a_redis_outage_gives_errors_within_the_op_timeout_and_the_cluster_recovers() {
    use outage::Mode;
    let Some(env) = Env::new() else { return };
    let proxy = outage::start(&env.url).await;
    let op_timeout = Duration::from_millis(500);
    let cfg = ClusterConfig { url: proxy.url.clone(), op_timeout, lease: Duration::from_secs(5), ..env.cfg() };
    let a = Cluster::connect(cfg).await.unwrap();
    a.ping().await.unwrap();
    a.append_frames("r", &frames([1])).await.unwrap();
    let mut follow = a.follow("r", 0);
    assert_eq!(next_frames(&mut follow, 1).await, frames([1]));

    // A stalled link: every command fails within op_timeout instead of hanging.
    proxy.mode.send_replace(Mode::Stall);
    let started = Instant::now();
    let err = a.ping().await.unwrap_err();
    assert!(matches!(err, ClusterError::Timeout), "{err}");
    assert!(err.is_unavailable());
    assert!(started.elapsed() < op_timeout + Duration::from_millis(300), "{:?}", started.elapsed());
    let err = a.claim("k", Duration::from_secs(5)).await.unwrap_err();
    assert!(err.is_unavailable(), "{err}");
    // The follower reports the failure (after its block and op_timeout) and ends.
    let item = tokio::time::timeout(Duration::from_secs(3), follow.next()).await.expect("no hang");
    match item {
        Some(Ok(FollowItem::Idle)) => {
            let item = tokio::time::timeout(Duration::from_secs(3), follow.next()).await.expect("no hang");
            assert!(matches!(item, Some(Err(_))), "{item:?}");
        }
        other => assert!(matches!(other, Some(Err(_))), "{other:?}"),
    }
    assert!(follow.next().await.is_none(), "the follower ends after its error");

    // Redis is back.
    proxy.mode.send_replace(Mode::Up);
    recovers(&a).await;

    // A link that silently stopped answering for good: after a few timeouts in a row the shared
    // connection is replaced, so the cluster recovers once Redis is reachable again.
    proxy.mode.send_replace(Mode::Blackhole);
    for _ in 0..3 {
        let started = Instant::now();
        assert!(matches!(a.ping().await, Err(ClusterError::Timeout)));
        assert!(started.elapsed() < op_timeout + Duration::from_millis(300), "{:?}", started.elapsed());
    }
    proxy.mode.send_replace(Mode::Up);
    recovers(&a).await;
    assert!(env.node().await.node_alive(a.node_id()).await.unwrap());

    // Every connection dropped (a restart), and refused for a while: errors, no hang.
    proxy.mode.send_replace(Mode::Down);
    for _ in 0..3 {
        let started = Instant::now();
        assert!(a.get_counter("n").await.is_err());
        assert!(started.elapsed() < op_timeout + Duration::from_millis(300), "{:?}", started.elapsed());
    }
    proxy.mode.send_replace(Mode::Up);
    recovers(&a).await;
    assert_eq!(a.add_counter("n", 2, Duration::from_secs(30)).await.unwrap(), 2);
    let mut follow = a.follow("r", 0);
    assert_eq!(next_frames(&mut follow, 1).await, frames([1]), "a new follower works again");
    a.shutdown().await;
    assert!(!env.node().await.node_alive(a.node_id()).await.unwrap());
}

/// Waits (up to 10 s) until the cluster answers again.
async fn recovers(c: &Cluster) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match c.ping().await {
            Ok(()) => return,
            Err(e) if Instant::now() < deadline => {
                eprintln!("still failing: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("the cluster did not recover: {e}"),
        }
    }
}
