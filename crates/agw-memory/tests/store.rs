//! History: appends, reading, the window, trimming, crash and failure behaviour. Tests that do
//! not look at file bytes run against every backend (`common::storages`: files, and PostgreSQL
//! when `AGW_TEST_DATABASE_URL` is set); the PostgreSQL counterparts of the file-only crash
//! tests are in `tests/postgres.rs`.

mod common;

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::sync::Arc;

use agw_memory::{ChatStore, FsyncPolicy, MemoryConfig, MemoryError};
use agw_protocol::chat::ChatMessage;
use agw_protocol::event::TaskStatus;
use agw_protocol::history::{self, HistoryLine, StepLine, StoredMessage, SystemSnapshot};
use agw_protocol::{AgentDelta, ids};
use common::{Run, TempDir, capture_logs, query, storages, store_in};
use serde_json::Value;

const CHAT: &str = "123e4567-e89b-12d3-a456-426614174000";

fn line(text: &str) -> HistoryLine {
    HistoryLine::parse(text).expect("valid").expect("known")
}

/// A complete one-step run (query + oneshot step with the user message and one answer).
fn simple_run(run_id: &str, user: &str, answer: &str) -> Vec<HistoryLine> {
    let mut run = Run::new(CHAT, run_id, query(user), None, &[]);
    run.push(1, AgentDelta::StageMarker("oneshot".into()));
    run.push(2, AgentDelta::Content(answer.into()));
    run.complete(3);
    run.lines
}

fn texts(messages: &[ChatMessage]) -> Vec<String> {
    messages
        .iter()
        .map(|m| match m {
            ChatMessage::User { content, .. } => format!("user {content}"),
            ChatMessage::Assistant { content, .. } => format!("assistant {content}"),
            ChatMessage::Tool { content, .. } => format!("tool {content}"),
            ChatMessage::System { content } => format!("system {content}"),
        })
        .collect()
}

#[test]
fn window_sends_the_last_k_runs_and_keeps_all_history_on_disk() {
    // ChatWindowMemoryStoreTest 2, minus the automatic trim (agw never deletes history).
    for storage in storages() {
        let store = storage.open(2, &[]);
        window_and_trim(&store, &storage);
    }
}

fn window_and_trim(store: &ChatStore, storage: &common::Storage) {
    for (run, user, answer) in [("run_001", "u1", "a1"), ("run_002", "u2", "a2"), ("run_003", "u3", "a3")] {
        store.append_final(CHAT, &simple_run(run, user, answer)).expect("append");
    }
    assert_eq!(
        texts(&store.history_for_model(CHAT).expect("history")),
        ["user u2", "assistant a2", "user u3", "assistant a3"]
    );
    assert_eq!(storage.raw_lines(CHAT).len(), 6, "all three runs stay on disk");

    // the explicit trim of §7
    assert_eq!(store.trim(CHAT).expect("trim"), 2);
    let run_ids: Vec<String> = store.read_lines(CHAT).expect("read").iter().map(|l| l.run_id().to_owned()).collect();
    assert_eq!(run_ids, ["run_002", "run_002", "run_003", "run_003"]);
    assert_eq!(store.trim(CHAT).expect("trim again"), 0);
    assert_eq!(
        texts(&store.history_for_model(CHAT).expect("history")),
        ["user u2", "assistant a2", "user u3", "assistant a3"]
    );
}

#[test]
fn trim_keeps_lines_without_run_id_and_unparseable_lines_and_drops_blank_lines() {
    for storage in storages() {
        let store = storage.open(1, &[]);
        storage.write_raw(
            CHAT,
            "{\"_type\":\"step\",\"runId\":\"old\",\"_seq\":1,\"messages\":[]}\n\n{\"note\":\"no run id\"}\nnot json\n{\"_type\":\"step\",\"runId\":\"new\",\"_seq\":1,\"messages\":[]}\n",
        );
        assert_eq!(store.trim(CHAT).expect("trim"), 1);
        assert_eq!(
            storage.raw_lines(CHAT),
            [
                "{\"note\":\"no run id\"}",
                "not json",
                "{\"_type\":\"step\",\"runId\":\"new\",\"_seq\":1,\"messages\":[]}"
            ]
        );
        if let Some(path) = store.history_path(CHAT) {
            assert_eq!(
                fs::read_to_string(&path).expect("read"),
                "{\"note\":\"no run id\"}\nnot json\n{\"_type\":\"step\",\"runId\":\"new\",\"_seq\":1,\"messages\":[]}\n"
            );
        }
        assert_eq!(store.trim(CHAT).expect("trim again"), 0);
    }
}

#[test]
fn a_multi_step_react_run_gives_four_history_messages() {
    // ChatWindowMemoryStoreTest 5.
    for storage in storages() {
        let store = storage.open(20, &[]);
        react_run(&store);
    }
}

fn react_run(store: &ChatStore) {
    let mut run = Run::new(CHAT, "run_react", query("find files"), None, &[]);
    let meta =
        agw_protocol::ToolStartMeta { tool_name: "_bash_".into(), tool_type: "function".into(), ..Default::default() };
    run.push(1, AgentDelta::StageMarker("react-step-1".into()));
    run.push(2, AgentDelta::ToolArgs { tool_id: "call_bash".into(), meta, delta: r#"{"command":"ls"}"#.into() });
    run.push(3, AgentDelta::ToolResult { tool_id: "call_bash".into(), result: "file.txt".into() });
    store.append(CHAT, &run.push(4, AgentDelta::StageMarker("react-step-2".into()))).expect("append");
    run.push(5, AgentDelta::Content("found file.txt".into()));
    store.append_final(CHAT, &run.complete(6)).expect("append");
    let history = store.history_for_model(CHAT).expect("history");
    assert_eq!(texts(&history), ["user find files", "assistant ", "tool file.txt", "assistant found file.txt"]);
    let ChatMessage::Assistant { tool_calls, .. } = &history[1] else { panic!("assistant") };
    assert_eq!(tool_calls[0].name, "_bash_");
}

#[test]
fn system_snapshots_are_read_back_per_line() {
    // ChatWindowMemoryStoreTest 3, with lines written directly.
    for storage in storages() {
        let store = storage.open(20, &[]);
        system_snapshots(&store, &storage);
    }
}

fn system_snapshots(store: &ChatStore, storage: &common::Storage) {
    let system_a = SystemSnapshot::new(Some("m".into()), "prompt A", Vec::new(), None);
    let system_b = SystemSnapshot::new(Some("m".into()), "prompt B", Vec::new(), None);
    let step = |seq: i64, system: Option<SystemSnapshot>| {
        HistoryLine::Step(StepLine {
            chat_id: CHAT.into(),
            run_id: "run_1".into(),
            stage: "react".into(),
            seq,
            updated_at: 10 + seq,
            system,
            messages: vec![StoredMessage::user("x", 1)],
            ..StepLine::default()
        })
    };
    let query_line = line(r#"{"_type":"query","chatId":"c","runId":"run_1","updatedAt":1,"query":{"message":"x"}}"#);
    store.append(CHAT, &[query_line, step(1, Some(system_a.clone()))]).expect("append");
    store.append(CHAT, &[step(2, None)]).expect("append");
    store.append(CHAT, &[step(3, Some(system_b.clone()))]).expect("append");
    let raw = storage.raw_lines(CHAT);
    assert!(raw[1].contains(r#""system":"#) && !raw[2].contains(r#""system":"#) && raw[3].contains("prompt B"));
    let lines = store.read_lines(CHAT).expect("read");
    assert_eq!(history::latest_system(&lines), Some(&system_b));
    assert_ne!(system_a, system_b);
}

#[test]
fn latest_plan_is_normalised() {
    // ChatWindowMemoryStoreTest 4, written as raw text so the legacy status reaches the reader.
    for storage in storages() {
        let store = storage.open(20, &[]);
        latest_plan(&store, &storage);
    }
}

fn latest_plan(store: &ChatStore, storage: &common::Storage) {
    let plan = |status: &str| {
        format!(
            r#"{{"planId":"plan_chat_001","tasks":[{{"taskId":"task0","description":"a","status":"{status}"}},{{"taskId":"task1","description":"b","status":"in_progress"}}]}}"#
        )
    };
    let text = [
        r#"{"_type":"query","chatId":"c","runId":"run_1","updatedAt":1,"query":{"message":"plan"}}"#.to_owned(),
        format!(r#"{{"_type":"step","chatId":"c","runId":"run_1","_stage":"plan","_seq":1,"updatedAt":1,"plan":{},"messages":[{{"role":"user","content":[{{"type":"text","text":"plan"}}]}}]}}"#, plan("init")),
        format!(r#"{{"_type":"step","chatId":"c","runId":"run_1","_stage":"execute","_seq":2,"taskId":"task0","updatedAt":2,"plan":{},"messages":[{{"role":"assistant","content":[{{"type":"text","text":"done"}}]}}]}}"#, plan("completed")),
    ]
    .join("\n");
    storage.write_raw(CHAT, &(text + "\n"));
    let raw = storage.raw_lines(CHAT);
    assert!(raw[1].contains(r#""plan":"#) && raw[2].contains(r#""plan":"#));
    let lines = store.read_lines(CHAT).expect("read");
    let execute = lines[2].as_step().expect("step");
    assert_eq!((execute.task_id.as_deref(), execute.stage.as_str(), execute.seq), (Some("task0"), "execute", 2));
    let latest = store.latest_plan(CHAT).expect("read").expect("a plan");
    assert_eq!(latest.plan_id, "plan_chat_001");
    assert_eq!(latest.tasks.iter().map(|t| t.status).collect::<Vec<_>>(), [TaskStatus::Completed, TaskStatus::Init]);
    let context = store.chat_context(CHAT).expect("context");
    assert_eq!(context.plan, Some(latest));
    assert_eq!(texts(&context.history), ["user plan", "assistant done"]);
}

#[test]
fn a_torn_last_line_is_skipped_with_a_warning_and_does_not_block_appends() {
    let dir = TempDir::new();
    let store = store_in(dir.path(), 20, &[]);
    store.append(CHAT, &simple_run("run_1", "u1", "a1")).expect("append");
    let path = store.history_path(CHAT).expect("uuid");
    // the process died in the middle of the next append
    OpenOptions::new()
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(br#"{"_type":"step","chatId":"12"#))
        .expect("tear");

    let (lines, logs) = capture_logs(|| store.read_lines(CHAT).expect("read"));
    assert_eq!(lines.len(), 2, "everything before the torn line is intact");
    assert!(logs.contains("WARN") && logs.contains("torn last history line"), "{logs}");

    let (appended, logs) = capture_logs(|| store.append(CHAT, &simple_run("run_2", "u2", "a2")));
    appended.expect("append after a torn line");
    assert!(logs.contains("partial line"), "{logs}");
    let raw = fs::read_to_string(&path).expect("read");
    assert_eq!(
        raw.lines().filter(|l| l.starts_with(r#"{"_type":"step","chatId":"12"#) && !l.contains("runId")).count(),
        1,
        "the fragment is a line of its own"
    );
    let lines = store.read_lines(CHAT).expect("read");
    assert_eq!(lines.len(), 4);
    assert_eq!(
        texts(&store.history_for_model(CHAT).expect("history")),
        ["user u1", "assistant a1", "user u2", "assistant a2"]
    );
}

#[test]
fn concurrent_appends_never_interleave_within_a_line() {
    for storage in storages() {
        concurrent_appends(&storage);
    }
}

fn concurrent_appends(storage: &common::Storage) {
    const THREADS: usize = 8;
    const APPENDS: usize = 60;
    // two stores on one directory (PostgreSQL: two replicas on one schema): the second has none
    // of the first's in-process locks, so this also exercises the O_APPEND single-write
    // guarantee (PostgreSQL: the chat's advisory lock)
    let stores = [Arc::new(storage.open(20, &[])), Arc::new(storage.open(20, &[]))];
    let big = "x".repeat(20_000);
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let store = Arc::clone(&stores[t % 2]);
            let big = big.clone();
            std::thread::spawn(move || {
                for i in 0..APPENDS {
                    let run_id = format!("run-{t}-{i}");
                    let query = line(&format!(r#"{{"_type":"query","chatId":"{CHAT}","runId":"{run_id}","updatedAt":1,"query":{{"message":"m"}}}}"#));
                    let step = HistoryLine::Step(StepLine {
                        chat_id: CHAT.into(),
                        run_id,
                        stage: "oneshot".into(),
                        seq: 1,
                        messages: vec![StoredMessage::user(big.clone(), 1)],
                        ..StepLine::default()
                    });
                    store.append(CHAT, &[query, step]).expect("append");
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().expect("thread");
    }
    let raw = storage.raw_lines(CHAT);
    let non_blank: Vec<&str> = raw.iter().map(String::as_str).filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(non_blank.len(), THREADS * APPENDS * 2);
    assert!(non_blank.iter().all(|l| serde_json::from_str::<Value>(l).is_ok()), "every line is valid JSON");
    let lines = stores[0].read_lines(CHAT).expect("read");
    assert_eq!(lines.iter().filter(|l| l.as_step().is_some()).count(), THREADS * APPENDS);
    // each run's query line directly precedes its step line: one write per pair
    for pair in lines.chunks(2) {
        assert_eq!(pair[0].run_id(), pair[1].run_id());
    }
}

#[test]
fn storage_failures_are_errors_not_panics() {
    let dir = TempDir::new();
    // a "directory" that is a regular file: ENOTDIR even for root
    let blocker = dir.path().join("not-a-dir");
    fs::write(&blocker, "x").expect("file");
    let store = store_in(&blocker.join("chats"), 20, &[]);
    let err = store.append(CHAT, &simple_run("run_1", "u", "a")).expect_err("cannot create the directory");
    assert!(matches!(err, MemoryError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("not-a-dir"), "the message names the path: {err}");
    assert!(err.io_error().is_some());
    assert!(store.upsert_chat(CHAT, "m", Some("a"), None, 1).is_err());
    assert!(store.read_lines(CHAT).is_err());
    assert!(store.list_chats().is_err());
}

#[test]
fn read_only_directory_is_an_error() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new();
    let chats = dir.path().join("chats");
    fs::create_dir(&chats).expect("dir");
    fs::set_permissions(&chats, fs::Permissions::from_mode(0o555)).expect("chmod");
    if fs::write(chats.join("probe"), "x").is_ok() {
        eprintln!(
            "skipped: running as root, directory permissions are not enforced (see the ENOTDIR and ENOSPC tests)"
        );
        return;
    }
    let store = store_in(&chats, 20, &[]);
    let err = store.append(CHAT, &simple_run("run_1", "u", "a")).expect_err("read-only");
    assert_eq!(err.io_error().map(std::io::Error::kind), Some(std::io::ErrorKind::PermissionDenied));
    assert!(store.upsert_chat(CHAT, "m", None, None, 1).is_err());
    fs::set_permissions(&chats, fs::Permissions::from_mode(0o755)).expect("chmod back");
}

#[cfg(target_os = "linux")]
#[test]
fn a_full_disk_is_an_error() {
    let dir = TempDir::new();
    let store = store_in(dir.path(), 20, &[]);
    // every write to /dev/full fails with ENOSPC
    std::os::unix::fs::symlink("/dev/full", store.history_path(CHAT).expect("uuid")).expect("symlink");
    let err = store.append(CHAT, &simple_run("run_1", "u", "a")).expect_err("disk full");
    assert_eq!(err.io_error().and_then(std::io::Error::raw_os_error), Some(28), "ENOSPC: {err}");
}

#[test]
fn history_only_chats_exist_and_non_uuid_chats_are_no_ops() {
    for storage in storages() {
        let store = storage.open(20, &[]);
        history_only_and_non_uuid(&store);
        match &storage {
            common::Storage::Files(dir) => {
                let names: Vec<_> =
                    fs::read_dir(dir.path()).expect("dir").map(|e| e.expect("entry").file_name()).collect();
                assert_eq!(names, [std::ffi::OsString::from(format!("{CHAT}.json"))]);
            }
            #[cfg(feature = "postgres")]
            common::Storage::Postgres(_) => {
                assert!(store.history_path(CHAT).is_none(), "no files");
                assert!(storage.index_lines().is_empty());
            }
        }
    }
}

fn history_only_and_non_uuid(store: &ChatStore) {
    assert!(!store.chat_exists(CHAT).expect("exists"));
    store.append(CHAT, &simple_run("run_1", "u", "a")).expect("append");
    assert!(store.chat_exists(CHAT).expect("exists"), "a history file without index record");
    assert_eq!(store.get_chat(CHAT).expect("get"), None);

    for bad in ["not-a-uuid", "123E4567-E89B-12D3-A456-426614174000", "../escape", ""] {
        assert_eq!(store.history_path(bad), None);
        store.append(bad, &simple_run("run_1", "u", "a")).expect("no-op");
        assert!(store.read_lines(bad).expect("no-op").is_empty());
        assert!(!store.chat_exists(bad).expect("no-op"));
        assert_eq!(store.trim(bad).expect("no-op"), 0);
        let upsert = store.upsert_chat(bad, "hi", None, None, 1).expect("no-op");
        assert!(!upsert.created);
        store.mark_waiting(bad, CHAT).expect("no-op");
        store.mark_waiting(CHAT, bad).expect("no-op");
    }
    assert!(store.waiting_runs().expect("marks").is_empty());
}

#[test]
fn missing_files_read_as_empty_and_every_fsync_policy_works() {
    for fsync in [FsyncPolicy::Never, FsyncPolicy::EveryStep, FsyncPolicy::EveryRun] {
        let dir = TempDir::new();
        let store = ChatStore::new(MemoryConfig {
            dir: dir.path().join("nested").join("chats"),
            k: 0,
            fsync,
            action_tools: Vec::new(),
        });
        empty_then_written(&store, fsync);
    }
    // PostgreSQL: no fsync (a commit is durable); the rest holds as for files.
    for storage in storages().into_iter().filter(|s| s.name() != "files") {
        empty_then_written(&storage.open(0, &[]), FsyncPolicy::EveryRun);
    }
}

fn empty_then_written(store: &ChatStore, fsync: FsyncPolicy) {
    {
        assert_eq!(store.config().k, 1, "k is at least 1");
        assert!(store.read_lines(CHAT).expect("read").is_empty());
        assert!(store.history_for_model(CHAT).expect("history").is_empty());
        assert_eq!(store.latest_plan(CHAT).expect("plan"), None);
        assert!(store.list_chats().expect("list").is_empty());
        store.append_final(CHAT, &[]).expect("nothing to sync");
        let lines = simple_run("run_1", "u", "a");
        store.append(CHAT, &lines[..1]).expect("append");
        store.append_final(CHAT, &lines[1..]).expect("append final");
        store.upsert_chat(CHAT, "u", Some("agent"), None, 5).expect("upsert");
        assert_eq!(store.read_lines(CHAT).expect("read"), lines, "{fsync:?}");
    }
}

#[test]
fn recorder_from_the_store_uses_its_action_tools() {
    for storage in storages() {
        let store = storage.open(20, &["Switch_Theme"]);
        recorder_action_tools(&store);
    }
}

fn recorder_action_tools(store: &ChatStore) {
    let run_id = ids::new_run_id();
    let mut recorder = store.recorder(CHAT, &run_id, query("q"), None);
    let mut asm = agw_protocol::Assembler::new(run_id.as_str(), CHAT, Box::new(|| 5));
    let mut events = Vec::new();
    let meta = agw_protocol::ActionStartMeta { action_name: "switch_theme".into(), description: None };
    for delta in [
        AgentDelta::ActionArgs { action_id: "a1".into(), meta, delta: "{}".into() },
        AgentDelta::ActionResult { action_id: "a1".into(), result: serde_json::json!("OK") },
    ] {
        let before = events.len();
        asm.push(delta.clone(), &mut events).expect("accepted");
        assert!(recorder.observe(&delta, &events[before..]).is_empty());
    }
    let before = events.len();
    asm.complete("stop", &mut events);
    let lines = recorder.finish(&events[before..]);
    let step = lines[1].as_step().expect("step");
    assert_eq!(step.messages[1].action_id.as_deref(), Some("a1"));
}

#[test]
fn waiting_marks_are_listed_sorted_and_cleared() {
    let (run_a, run_b) = ("00000000-0000-4000-8000-00000000000a", "00000000-0000-4000-8000-00000000000b");
    for storage in storages() {
        let store = storage.open(20, &[]);
        assert!(store.waiting_runs().expect("none").is_empty());
        store.mark_waiting(run_b, CHAT).expect("mark");
        store.mark_waiting(run_a, CHAT).expect("mark");
        store.mark_waiting(run_a, CHAT).expect("marking again is fine");
        let expected = vec![(run_a.to_owned(), CHAT.to_owned()), (run_b.to_owned(), CHAT.to_owned())];
        assert_eq!(store.waiting_runs().expect("marks"), expected);
        assert_eq!(storage.open(20, &[]).waiting_runs().expect("marks from a fresh store"), expected);
        store.clear_waiting(run_a).expect("clear");
        store.clear_waiting(run_a).expect("clearing again is fine");
        assert_eq!(store.waiting_runs().expect("marks"), expected[1..]);
    }
}

#[test]
fn ping_and_backend_name() {
    for storage in storages() {
        let store = storage.open(20, &[]);
        assert_eq!(store.backend_name(), storage.name());
        store.ping().expect("ready");
    }
    // files: a directory that does not exist yet is created; one that is a file is not ready
    let dir = TempDir::new();
    let store = store_in(&dir.path().join("later"), 20, &[]);
    store.ping().expect("created");
    assert!(dir.path().join("later").is_dir());
    fs::write(dir.path().join("file"), "x").expect("file");
    let err = store_in(&dir.path().join("file"), 20, &[]).ping().expect_err("not a directory");
    assert!(matches!(err, MemoryError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("file"), "{err}");
    let err = store_in(&dir.path().join("file").join("chats"), 20, &[]).ping().expect_err("under a file");
    assert!(err.io_error().is_some(), "{err:?}");
}

/// Issue 36: runs a guard stopped, from their live events to the stored lines (on every backend,
/// the lines exactly as the recorder returned them) and back. The replay shows the withdrawn
/// answer under its live id followed by the live `content.revoke`, and the warnings and the block
/// where they streamed; the next run's window has neither the withdrawn text nor the question an
/// input guard refused.
#[test]
fn guarded_runs_are_stored_replayed_and_left_out_of_the_window() {
    for storage in storages() {
        let store = storage.open(20, &[]);
        guarded_runs(&store, &storage);
    }
}

fn guarded_runs(store: &ChatStore, storage: &common::Storage) {
    use agw_protocol::guard::{GuardNotice, GuardStage, Revocation};
    use agw_protocol::{ErrorCode, Event, EventPayload, RunErrorInfo, ToolStartMeta, replay_chat};
    let notice = |stage, tool_id: Option<&str>| GuardNotice {
        stage,
        guard: "rules:demo".into(),
        rule: Some("r1".into()),
        message: "careful".into(),
        tool_id: tool_id.map(str::to_owned),
    };
    let blocked = || RunErrorInfo::new(ErrorCode::GuardrailBlocked, "a guard blocked the run", false);

    // A run warned about its first answer and its call, then withdrawn in its second turn.
    let mut first = Run::new(CHAT, "run_1", query("look it up"), None, &[]);
    let meta = ToolStartMeta { tool_name: "lookup".into(), tool_type: "function".into(), ..Default::default() };
    first.push(1, AgentDelta::StageMarker("react-step-1".into()));
    first.push(2, AgentDelta::Content("Let me look.".into()));
    first.push(3, AgentDelta::GuardWarning(notice(GuardStage::Output, None)));
    first.push(4, AgentDelta::ToolArgs { tool_id: "call_1".into(), meta, delta: "{}".into() });
    first.push(5, AgentDelta::ToolEnd { tool_id: "call_1".into() });
    first.push(6, AgentDelta::GuardWarning(notice(GuardStage::ToolInput, Some("call_1"))));
    first.push(7, AgentDelta::ToolResult { tool_id: "call_1".into(), result: "found".into() });
    store.append(CHAT, &first.push(8, AgentDelta::StageMarker("react-step-2".into()))).expect("append");
    first.push(9, AgentDelta::Content("Mail bob@".into()));
    first.push(10, AgentDelta::Content("example.com".into()));
    let revocation =
        Revocation { guard: "rules:pii".into(), rule: Some("email".into()), reason: "personal data".into() };
    first.push(11, AgentDelta::Revoke(revocation));
    store.append_final(CHAT, &first.fail(12, blocked())).expect("append");
    // A run whose question an input guard refused: no model call, one block.
    let mut second = Run::new(CHAT, "run_2", query("bad question"), None, &[]);
    second.push(20, AgentDelta::StageMarker("oneshot".into()));
    second.push(21, AgentDelta::GuardBlock(notice(GuardStage::Input, None)));
    store.append_final(CHAT, &second.fail(22, blocked())).expect("append");

    let written: Vec<String> = first.jsonl().into_iter().chain(second.jsonl()).collect();
    assert_eq!(storage.raw_lines(CHAT), written, "stored as the recorder wrote them");
    assert!(written[2].contains(r#""_revoked":{"guard":"rules:pii","rule":"email","reason":"personal data"}"#));
    assert!(written[1].contains(r#""_guards":[{"at":2,"#), "{}", written[1]);

    // The replay repeats the live ids and guard events, in the live order.
    let replay = replay_chat(CHAT, None, &store.read_lines(CHAT).expect("read"), 0);
    let guarded = |events: &[Event]| -> Vec<EventPayload> {
        let kept = events.iter().filter(|e| {
            matches!(
                e.payload,
                EventPayload::ContentRevoke(_) | EventPayload::GuardWarning(_) | EventPayload::GuardBlock(_)
            )
        });
        kept.map(|e| e.payload.clone()).collect()
    };
    let live: Vec<Event> = first.events.iter().chain(&second.events).cloned().collect();
    assert_eq!(guarded(&replay), guarded(&live));
    let content_ids = |events: &[Event]| -> Vec<String> {
        let ids = events.iter().filter_map(|e| match &e.payload {
            EventPayload::ContentStart(s) => Some(s.content_id.clone()),
            EventPayload::ContentSnapshot(s) => Some(s.content_id.clone()),
            _ => None,
        });
        ids.collect()
    };
    assert_eq!(content_ids(&replay), content_ids(&live));
    let types: Vec<&str> = replay.iter().map(Event::type_name).collect();
    assert_eq!(
        types,
        [
            "request.query",
            "chat.start",
            "run.start",
            "content.snapshot",
            "guard.warning",
            "guard.warning",
            "tool.snapshot",
            "tool.result",
            "content.snapshot",
            "content.revoke",
            "run.complete",
            "request.query",
            "run.start",
            "guard.block",
            "run.complete"
        ]
    );
    let EventPayload::ContentRevoke(revoke) = &replay[9].payload else { panic!("a revoke") };
    assert_eq!(revoke.content_id, "run_1_c_2");

    // The next run's model reads the first answer and the call, not what was stopped.
    assert_eq!(
        texts(&store.history_for_model(CHAT).expect("history")),
        ["user look it up", "assistant Let me look.", "assistant ", "tool found"]
    );
}

/// `DELETE /api/ap/chat`'s storage half, on each backend: history, index record and the chat's
/// waiting marks go (another chat's stay); the chat then reads as never made, and its id makes
/// a new chat. Deleting again, or a chat that never was, deletes nothing.
#[test]
fn a_deleted_chat_is_gone_from_history_index_and_waiting_marks() {
    const OTHER: &str = "1d2c3b4a-5e6f-4a1b-8c2d-3e4f5a6b7c8d";
    const RUN: &str = "2a3b4c5d-6e7f-4a8b-9c0d-1e2f3a4b5c6d";
    const OTHER_RUN: &str = "3b4c5d6e-7f8a-4b9c-8d1e-2f3a4b5c6d7e";
    for storage in storages() {
        let store = storage.open(20, &[]);
        for chat in [CHAT, OTHER] {
            store.upsert_chat(chat, "hello", Some("a"), None, 100).expect("upsert");
            store.append_final(chat, &simple_run("run_001", "u1", "a1")).expect("append");
        }
        store.mark_waiting(RUN, CHAT).expect("mark");
        store.mark_waiting(OTHER_RUN, OTHER).expect("mark");

        assert!(store.delete_chat(CHAT).expect("delete"), "{}", storage.name());
        assert!(storage.raw_lines(CHAT).is_empty(), "{}: history gone", storage.name());
        assert!(!storage.index_lines().iter().any(|l| l.contains(CHAT) && !l.contains("\"deleted\":true")));
        assert!(!store.chat_exists(CHAT).unwrap() && store.get_chat(CHAT).unwrap().is_none());
        assert_eq!(store.chat_owner(CHAT).unwrap(), None);
        assert_eq!(store.waiting_runs().unwrap(), vec![(OTHER_RUN.to_owned(), OTHER.to_owned())]);
        let listed: Vec<String> = store.list_chats().unwrap().into_iter().map(|c| c.chat_id).collect();
        assert_eq!(listed, [OTHER], "{}", storage.name());
        // Another store on the same storage (a restart, another replica) sees the same.
        let again = storage.open(20, &[]);
        assert!(!again.chat_exists(CHAT).unwrap() && again.read_lines(CHAT).unwrap().is_empty());
        assert_eq!(again.list_chats().unwrap().len(), 1);

        assert!(!store.delete_chat(CHAT).unwrap(), "nothing left");
        assert!(!store.delete_chat("not-a-uuid").unwrap());
        let fresh = store.upsert_chat(CHAT, "again", Some("a"), None, 200).expect("upsert");
        assert!(fresh.created, "{}: the id starts a new chat", storage.name());
        assert_eq!(fresh.chat_name, "again");
    }
}

/// `POST /api/ap/chat/fork`'s storage half, on each backend: the new chat holds the runs up to
/// the point under new run ids and the caller as owner, with the source's name and agent; the
/// source is unchanged; the model's window of the fork is the copied runs'.
#[test]
fn a_fork_copies_the_runs_up_to_its_point_under_new_ids() {
    use agw_memory::{ForkError, ForkPoint, Owner};
    const FORK: &str = "4c5d6e7f-8a9b-4c0d-9e1f-2a3b4c5d6e7f";
    const RUN1: &str = "5d6e7f8a-9b0c-4d1e-8f2a-3b4c5d6e7f8a";
    const RUN2: &str = "6e7f8a9b-0c1d-4e2f-9a3b-4c5d6e7f8a9b";
    let bob = Owner { sub: "bob".into(), tenant: None };
    for storage in storages() {
        let store = storage.open(20, &[]);
        store.upsert_chat(CHAT, "hello there", Some("a"), Some("Agent A"), 100).expect("upsert");
        store.append_final(CHAT, &simple_run(RUN1, "u1", "a1")).expect("append");
        store.append_final(CHAT, &simple_run(RUN2, "u2", "a2")).expect("append");
        let source_lines = storage.raw_lines(CHAT);

        let point = ForkPoint::After { run_id: RUN1.into(), step_seq: None };
        let forked = store.fork_chat(CHAT, FORK, &point, Some(&bob), 500).expect("fork");
        assert_eq!(forked.runs.len(), 1, "{}", storage.name());
        let new_run = &forked.runs[0].1;
        assert_ne!(new_run, RUN1, "a run id names one run");
        let lines = store.read_lines(FORK).unwrap();
        assert_eq!(lines.len(), 2);
        assert!(lines.iter().all(|l| l.chat_id() == FORK && l.run_id() == new_run));
        assert_eq!(lines[0].as_query().unwrap().query.chat_id.as_deref(), Some(FORK));
        assert_eq!(texts(&store.history_for_model(FORK).unwrap()), ["user u1", "assistant a1"]);
        let record = store.get_chat(FORK).unwrap().expect("indexed");
        assert_eq!((record.chat_name.as_str(), record.first_agent_key.as_deref()), ("hello there", Some("a")));
        assert_eq!(record.first_agent_name.as_deref(), Some("Agent A"));
        assert_eq!((record.created_at, record.owner), (500, Some(bob.clone())));
        assert_eq!(storage.raw_lines(CHAT), source_lines, "the source is unchanged");

        // Before the first run: an empty chat of its own; an unknown run: refused, nothing made.
        let empty = "7f8a9b0c-1d2e-4f3a-8b4c-5d6e7f8a9b0c";
        store.fork_chat(CHAT, empty, &ForkPoint::Before { run_id: RUN1.into() }, None, 600).expect("fork");
        assert!(store.read_lines(empty).unwrap().is_empty() && store.chat_exists(empty).unwrap());
        let nowhere = "8a9b0c1d-2e3f-4a4b-9c5d-6e7f8a9b0c1d";
        let refused = store.fork_chat(CHAT, nowhere, &ForkPoint::Before { run_id: "r9".into() }, None, 600);
        assert!(matches!(refused, Err(ForkError::RunNotFound { .. })), "{refused:?}");
        assert!(!store.chat_exists(nowhere).unwrap());
    }
}

/// Retention's deletion, on each backend: only a chat whose record is older than the cutoff
/// goes; a chat updated since, or one already gone, is left (`false`), so replicas that sweep
/// together delete a chat once.
#[test]
fn retention_deletes_only_a_chat_untouched_since_the_cutoff() {
    const FRESH: &str = "9b0c1d2e-3f4a-4b5c-8d6e-7f8a9b0c1d2e";
    for storage in storages() {
        let store = storage.open(20, &[]);
        for (chat, at) in [(CHAT, 100), (FRESH, 900)] {
            store.upsert_chat(chat, "hi", Some("a"), None, at).expect("upsert");
            store.append_final(chat, &simple_run("run_001", "u", "a")).expect("append");
        }
        let old: Vec<String> = store.chats_untouched_since(500).unwrap().into_iter().map(|c| c.chat_id).collect();
        assert_eq!(old, [CHAT], "{}", storage.name());
        assert!(!store.delete_chat_untouched_since(FRESH, 500).unwrap(), "touched since");
        // Touched between the listing and the deletion: kept.
        store.upsert_chat(CHAT, "hi", Some("a"), None, 700).expect("upsert");
        assert!(!store.delete_chat_untouched_since(CHAT, 500).unwrap());
        assert!(store.chat_exists(CHAT).unwrap());
        assert!(store.delete_chat_untouched_since(CHAT, 800).unwrap());
        assert!(!store.delete_chat_untouched_since(CHAT, 800).unwrap(), "already gone");
        assert!(storage.raw_lines(CHAT).is_empty() && !store.chat_exists(CHAT).unwrap());
        assert!(store.chat_exists(FRESH).unwrap());
    }
}
