//! The chat index `_chats.jsonl`: upsert rules, listing order and fallbacks. Tests that do not
//! depend on the file's own mechanics (appends, compaction, torn or duplicate lines) run against
//! every backend (`common::storages`): the PostgreSQL `chats` table holds the same record lines.

mod common;

use std::fs;

use agw_memory::{ChatSummary, ChatUpsert, Owner};
use common::{Storage, TempDir, storages, store_in};

const CHAT: &str = "0b8f6a52-7c1e-4d3a-9f2b-5e6d7c8b9a01";
const OTHER: &str = "123e4567-e89b-12d3-a456-426614174000";

fn index_text(dir: &TempDir) -> String {
    fs::read_to_string(dir.path().join("_chats.jsonl")).expect("index file")
}

/// The stored index as one text, a line per record (the file as it is; the rows of `chats`).
fn stored_index(storage: &Storage) -> String {
    storage.index_lines().iter().map(|l| format!("{l}\n")).collect()
}

#[test]
fn a_new_chat_is_written_with_the_contract_key_order() {
    for storage in storages() {
        let store = storage.open(20, &[]);
        let upsert =
            store.upsert_chat(CHAT, "上海现在几点？", Some("weatherBot"), None, 1771000099990).expect("upsert");
        assert_eq!(upsert, ChatUpsert { created: true, chat_name: "上海现在几点？".into() });
        assert_eq!(
            stored_index(&storage),
            format!(
                "{{\"chatId\":\"{CHAT}\",\"chatName\":\"上海现在几点？\",\"firstAgentKey\":\"weatherBot\",\"firstAgentName\":\"weatherBot\",\"createdAt\":1771000099990,\"updatedAt\":1771000099990}}\n"
            )
        );
    }
}

#[test]
fn existing_chats_keep_name_and_agent_and_get_a_new_updated_at() {
    for storage in storages() {
        existing_chats(&storage);
    }
}

fn existing_chats(storage: &Storage) {
    let store = storage.open(20, &[]);
    store.upsert_chat(CHAT, "first message", Some("demoModePlain"), Some("示例-单次直答"), 100).expect("first");
    let again = store.upsert_chat(CHAT, "second message", Some("other"), Some("Other"), 200).expect("second");
    assert_eq!(again, ChatUpsert { created: false, chat_name: "first message".into() });
    let chat = store.get_chat(CHAT).expect("get").expect("indexed");
    assert_eq!(
        chat,
        ChatSummary {
            chat_id: CHAT.into(),
            chat_name: "first message".into(),
            first_agent_key: Some("demoModePlain".into()),
            first_agent_name: Some("示例-单次直答".into()),
            created_at: 100,
            updated_at: 200,
            usage: None,
            cost: None,
            last_agent_key: None,
            owner: None,
        }
    );
    // The update was appended; a reader that starts from the file sees the same record.
    assert!(storage.index_lines().len() <= 2);
    let fresh = storage.open(20, &[]);
    assert_eq!(fresh.get_chat(CHAT).expect("get"), Some(chat));
}

/// Collapses the index file the way the contract's reader does (first position, later values
/// win — our records always carry every field) and returns (records, canonical bytes).
fn canonical(text: &str) -> (Vec<serde_json::Value>, usize) {
    let mut records: Vec<serde_json::Value> = Vec::new();
    for line in text.lines() {
        let record: serde_json::Value = serde_json::from_str(line).expect("every index line is JSON");
        match records.iter_mut().find(|r| r["chatId"] == record["chatId"]) {
            Some(first) => *first = record,
            None => records.push(record),
        }
    }
    let bytes = records.iter().map(|r| r.to_string().len() + 1).sum();
    (records, bytes)
}

#[test]
fn upserts_append_one_line_and_compaction_bounds_the_file_to_twice_its_canonical_size() {
    let dir = TempDir::new();
    let store = store_in(dir.path(), 20, &[]);
    let ids: Vec<String> = (0..20).map(|i| format!("00000000-0000-4000-8000-{i:012x}")).collect();
    let mut compactions = 0;
    let mut appends = 0;
    let mut last_len = 0;
    for step in 0..2_000i64 {
        // Chats come and come back; names and agents differ per chat.
        let id = &ids[(step as usize * 7 + step as usize / 13) % ids.len()];
        store
            .upsert_chat(id, &format!("message {step}"), Some("agent"), None, 1_000_000_000_000 + step)
            .expect("upsert");
        let text = index_text(&dir);
        let (records, canonical_bytes) = canonical(&text);
        assert!(text.len() <= 2 * canonical_bytes, "step {step}: {} bytes for {canonical_bytes} canonical", text.len());
        if text.len() > last_len && text.len() - last_len < 200 {
            appends += 1;
        } else {
            compactions += 1;
        }
        last_len = text.len();
        // The file, read as the contract reads it, is what a full rewrite would have written.
        let listed = store.list_chats().expect("list");
        assert_eq!(listed.len(), records.len());
        let chat = store.get_chat(id).expect("get").expect("indexed");
        assert_eq!(chat.updated_at, 1_000_000_000_000 + step);
        assert_eq!(listed[0], chat, "the chat just upserted is the newest");
        let on_disk = records.iter().find(|r| r["chatId"] == id.as_str()).expect("record on disk");
        assert_eq!(serde_json::to_value(&chat).expect("json"), *on_disk);
    }
    assert!(appends > 1_500, "most upserts append one line: {appends} appends, {compactions} rewrites");
    assert!(compactions > 10, "the file is compacted from time to time: {compactions}");

    // A process that starts from the file reads the same chats, and its first upsert compacts.
    let expected = store.list_chats().expect("list");
    drop(store);
    let fresh = store_in(dir.path(), 20, &[]);
    assert_eq!(fresh.list_chats().expect("list"), expected);
    fresh.upsert_chat(&ids[0], "again", None, None, 2_000_000_000_000).expect("upsert");
    let text = index_text(&dir);
    assert_eq!(text.lines().count(), ids.len(), "one line per chat after the rewrite: {text}");
}

#[test]
fn a_torn_last_index_line_is_dropped_and_an_unterminated_readable_one_is_kept() {
    let dir = TempDir::new();
    let store = store_in(dir.path(), 20, &[]);
    store.upsert_chat(CHAT, "first", Some("a"), None, 1000).expect("upsert");
    // A crash cut an append short: no newline, not JSON.
    let mut text = index_text(&dir);
    text.push_str(&format!("{{\"chatId\":\"{OTHER}\",\"chatNa"));
    fs::write(dir.path().join("_chats.jsonl"), &text).expect("tear");
    let chats = store.list_chats().expect("list");
    assert_eq!(chats.iter().map(|c| c.chat_id.as_str()).collect::<Vec<_>>(), [CHAT]);
    store.upsert_chat(CHAT, "again", None, None, 2000).expect("upsert after the tear");
    let text = index_text(&dir);
    assert_eq!(text.lines().count(), 1, "the fragment is gone: {text}");
    assert!(text.ends_with('\n'));

    // An edit that left out the final newline is still a record.
    fs::write(dir.path().join("_chats.jsonl"), format!("{}{{\"chatId\":\"{OTHER}\",\"chatName\":\"edited\"}}", text))
        .expect("edit");
    let names: Vec<String> = store.list_chats().expect("list").into_iter().map(|c| c.chat_name).collect();
    assert_eq!(names, ["first", "edited"]);
}

#[test]
fn chat_names_follow_the_name_rule() {
    for storage in storages() {
        chat_names(&storage.open(20, &[]));
    }
}

fn chat_names(store: &agw_memory::ChatStore) {
    let cases = [
        ("  hello \n\t  world  ", "hello world".to_owned()),
        (" \n ", "新对话".to_owned()),
        (&"汉".repeat(40), "汉".repeat(30)),
        ("0123456789ABCDEFGHI", "0123456789ABCDEFGHI".to_owned()),
    ];
    for (i, (message, expected)) in cases.iter().enumerate() {
        let chat_id = format!("00000000-0000-4000-8000-00000000000{i}");
        let upsert = store.upsert_chat(&chat_id, message, None, None, 10).expect("upsert");
        assert!(upsert.created);
        assert_eq!(&upsert.chat_name, expected, "{message:?}");
        assert_eq!(store.get_chat(&chat_id).expect("get").map(|c| c.chat_name).as_ref(), Some(expected));
    }
}

#[test]
fn duplicate_records_collapse_and_missing_fields_are_filled() {
    // ChatRecordStoreTest 5.
    let dir = TempDir::new();
    fs::write(
        dir.path().join("_chats.jsonl"),
        format!(
            "{{\"chatId\":\"{CHAT}\",\"chatName\":\"dup\",\"firstAgentKey\":\"demo\",\"createdAt\":1000,\"updatedAt\":1000}}\n\
             {{\"chatId\":\"{OTHER}\",\"chatName\":\"other\",\"createdAt\":5,\"updatedAt\":5,\"extra\":true}}\n\
             {{\"chatId\":\"{CHAT}\",\"chatName\":\"dup\",\"createdAt\":1000,\"updatedAt\":1000}}\n"
        ),
    )
    .expect("seed");
    let store = store_in(dir.path(), 20, &[]);
    let upsert = store.upsert_chat(CHAT, "ignored", Some("demoAgent"), Some("Demo Agent"), 2000).expect("upsert");
    assert!(!upsert.created);
    let text = index_text(&dir);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(
        lines[0],
        format!(
            "{{\"chatId\":\"{CHAT}\",\"chatName\":\"dup\",\"firstAgentKey\":\"demo\",\"firstAgentName\":\"Demo Agent\",\"createdAt\":1000,\"updatedAt\":2000}}"
        ),
        "first position kept, key never overwritten, missing name filled"
    );
    assert!(!lines[1].contains("extra"), "unknown keys are dropped on rewrite: {}", lines[1]);
}

#[test]
fn listing_sorts_newest_first_with_fallbacks() {
    // ChatRecordStoreTest 4, plus the skipped and fallback cases of http-api §3.
    let dir = TempDir::new();
    let legacy = "11111111-1111-4111-8111-111111111111";
    let active = "22222222-2222-4222-8222-222222222222";
    let only_updated = "33333333-3333-4333-8333-333333333333";
    fs::write(
        dir.path().join("_chats.jsonl"),
        format!(
            "{{\"chatId\":\"{legacy}\",\"chatName\":\"legacy\",\"firstAgentKey\":\"demo\",\"createdAt\":100}}\n\
             {{\"chatId\":\"not-a-uuid\",\"chatName\":\"skipped\",\"createdAt\":999}}\n\
             this line is not json\n\
             \n\
             {{\"chatId\":\"{active}\",\"chatName\":\"active\",\"firstAgentKey\":\"demo\",\"firstAgentName\":\"Demo Agent\",\"createdAt\":50,\"updatedAt\":200}}\n\
             {{\"chatId\":\"{only_updated}\",\"chatName\":\"  \",\"updatedAt\":150}}\n"
        ),
    )
    .expect("seed");
    let store = store_in(dir.path(), 20, &[]);
    let chats = store.list_chats().expect("list");
    let summary: Vec<_> = chats
        .iter()
        .map(|c| (c.chat_name.as_str(), c.first_agent_name.as_deref(), c.created_at, c.updated_at))
        .collect();
    assert_eq!(
        summary,
        [("active", Some("Demo Agent"), 50, 200), (only_updated, None, 150, 150), ("legacy", Some("demo"), 100, 100),]
    );
    assert_eq!(
        serde_json::to_string(&chats[1]).expect("json"),
        format!(
            "{{\"chatId\":\"{only_updated}\",\"chatName\":\"{only_updated}\",\"firstAgentKey\":null,\"firstAgentName\":null,\"createdAt\":150,\"updatedAt\":150}}"
        )
    );

    // an upsert rewrites with the stored-record rules and keeps the line it cannot read
    store.upsert_chat(CHAT, "new", None, None, 300).expect("upsert");
    let text = index_text(&dir);
    assert!(text.contains("this line is not json\n"), "{text}");
    assert!(text.contains(&format!("\"chatId\":\"{legacy}\",\"chatName\":\"legacy\",\"firstAgentKey\":\"demo\",\"firstAgentName\":null,\"createdAt\":100,\"updatedAt\":100")), "{text}");
    assert!(text.contains(&format!("\"chatId\":\"{only_updated}\",\"chatName\":\"{only_updated}\",\"firstAgentKey\":null,\"firstAgentName\":null,\"createdAt\":300,\"updatedAt\":150")), "{text}");
    assert_eq!(store.list_chats().expect("list")[0].chat_id, CHAT);
    assert!(
        !dir.path().read_dir().expect("dir").any(|e| e.expect("entry").file_name().to_string_lossy().contains(".tmp")),
        "no temp file left"
    );
}

#[test]
fn a_chat_with_only_a_history_file_is_not_new() {
    for storage in storages() {
        let store = storage.open(20, &[]);
        storage.write_raw(CHAT, "");
        let upsert = store.upsert_chat(CHAT, "hi", Some("a"), None, 1).expect("upsert");
        assert!(!upsert.created, "the server has seen this chat: no chat.start");
        assert!(store.get_chat(CHAT).expect("get").is_some(), "but it is indexed from now on");
    }
}

#[test]
fn missing_index_lists_nothing() {
    for storage in storages() {
        let store = storage.open(20, &[]);
        assert!(store.list_chats().expect("list").is_empty());
        assert_eq!(store.get_chat(CHAT).expect("get"), None);
        assert_eq!(store.get_chat("not-a-uuid").expect("get"), None);
    }
}

#[test]
fn upserts_see_changes_made_to_the_file_by_someone_else() {
    let dir = TempDir::new();
    let store = store_in(dir.path(), 20, &[]);
    store.upsert_chat(CHAT, "first", Some("a"), None, 1000).expect("upsert");
    store.upsert_chat(CHAT, "again", Some("b"), None, 2000).expect("upsert from the kept index");
    // Another writer replaces the file (different content, same and different lengths).
    let edited = index_text(&dir).replace("\"chatName\":\"first\"", "\"chatName\":\"fixed\"");
    fs::write(dir.path().join("_chats.jsonl"), format!("{edited}not json\n")).expect("edit");
    let upsert = store.upsert_chat(OTHER, "other", None, None, 3000).expect("upsert after the edit");
    assert!(upsert.created);
    let text = index_text(&dir);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].contains("\"chatName\":\"fixed\"") && lines[0].contains("\"updatedAt\":2000"), "{text}");
    assert_eq!(lines[1], "not json");
    assert!(lines[2].contains(OTHER), "{text}");
    // And the kept index keeps working after the re-read.
    let again = store.upsert_chat(CHAT, "ignored", None, None, 4000).expect("upsert");
    assert_eq!(again, ChatUpsert { created: false, chat_name: "fixed".into() });
    let chats = store.list_chats().expect("list");
    assert_eq!(chats.iter().map(|c| c.chat_id.as_str()).collect::<Vec<_>>(), [CHAT, OTHER]);
    assert_eq!(chats[0].updated_at, 4000);
}

// ---- owners (issue 22 item 3) ----

fn owner(sub: &str, tenant: Option<&str>) -> Owner {
    Owner { sub: sub.into(), tenant: tenant.map(str::to_owned) }
}

/// The permission check agw-http applies for a plain user: exactly their own chats.
fn only(me: &Owner) -> impl Fn(Option<&Owner>) -> bool + '_ {
    move |chat: Option<&Owner>| chat == Some(me)
}

#[test]
fn the_owner_is_stored_after_the_contract_keys_and_never_listed() {
    for storage in storages() {
        owner_stored(&storage);
    }
}

fn owner_stored(storage: &Storage) {
    let store = storage.open(20, &[]);
    let alice = owner("alice", Some("acme"));
    let upsert = store.upsert_owned_chat(CHAT, "hi", Some("a"), None, Some(&alice), &only(&alice), 10).expect("upsert");
    assert_eq!(upsert, Some(ChatUpsert { created: true, chat_name: "hi".into() }));
    assert_eq!(
        stored_index(storage),
        format!(
            "{{\"chatId\":\"{CHAT}\",\"chatName\":\"hi\",\"firstAgentKey\":\"a\",\"firstAgentName\":\"a\",\"createdAt\":10,\"updatedAt\":10,\"owner\":{{\"sub\":\"alice\",\"tenant\":\"acme\"}}}}\n"
        )
    );
    let listed = store.list_chats().expect("list");
    assert_eq!(listed[0].owner, Some(alice.clone()));
    // The listing JSON keeps the six contract keys.
    let json = serde_json::to_value(&listed[0]).unwrap();
    assert_eq!(json.as_object().unwrap().len(), 6, "{json}");
    // Without a tenant the key is left out; without an owner nothing is added (auth off).
    store.upsert_owned_chat(OTHER, "x", None, None, Some(&owner("bob", None)), &|_| true, 20).expect("upsert");
    assert!(stored_index(storage).contains("\"owner\":{\"sub\":\"bob\"}}"), "{}", stored_index(storage));
}

#[test]
fn another_users_upsert_changes_nothing_and_the_owner_is_never_replaced() {
    for storage in storages() {
        owner_kept(&storage);
    }
}

fn owner_kept(storage: &Storage) {
    let store = storage.open(20, &[]);
    let (alice, bob) = (owner("alice", None), owner("bob", None));
    store.upsert_owned_chat(CHAT, "alice's", Some("a"), None, Some(&alice), &only(&alice), 10).expect("upsert");
    let before = stored_index(storage);
    let refused = store.upsert_owned_chat(CHAT, "bob's", Some("b"), None, Some(&bob), &only(&bob), 20).expect("upsert");
    assert_eq!(refused, None);
    assert_eq!(stored_index(storage), before, "nothing written");
    // An operator (who may act on every chat) continuing it does not become its owner.
    let again = store.upsert_owned_chat(CHAT, "op", None, None, Some(&bob), &|_| true, 30).expect("upsert");
    assert_eq!(again, Some(ChatUpsert { created: false, chat_name: "alice's".into() }));
    let fresh = storage.open(20, &[]);
    assert_eq!(fresh.chat_owner(CHAT).expect("owner"), Some(Some(alice)));
    assert_eq!(fresh.chat_owner(OTHER).expect("owner"), None);
}

#[test]
fn records_without_an_owner_read_as_ownerless_and_bad_owners_do_not_hide_the_chat() {
    for storage in storages() {
        ownerless_records(&storage);
    }
}

fn ownerless_records(storage: &Storage) {
    storage.seed_index(&[
        format!(
            "{{\"chatId\":\"{CHAT}\",\"chatName\":\"old\",\"firstAgentKey\":null,\"firstAgentName\":null,\"createdAt\":1,\"updatedAt\":1}}"
        ),
        format!("{{\"chatId\":\"{OTHER}\",\"chatName\":\"edited\",\"createdAt\":2,\"updatedAt\":2,\"owner\":\"alice\"}}"),
    ]);
    let store = storage.open(20, &[]);
    let listed = store.list_chats().expect("list");
    assert_eq!(listed.len(), 2);
    assert!(listed.iter().all(|c| c.owner.is_none()));
    // An ownerless chat is not claimed by the first user who continues it.
    let alice = owner("alice", None);
    assert_eq!(store.upsert_owned_chat(CHAT, "m", None, None, Some(&alice), &only(&alice), 5).expect("upsert"), None);
    assert_eq!(store.chat_owner(CHAT).expect("owner"), Some(None));
}

#[test]
fn a_history_file_without_a_record_is_an_ownerless_chat() {
    for storage in storages() {
        orphan_history(&storage);
    }
}

fn orphan_history(storage: &Storage) {
    let store = storage.open(20, &[]);
    storage.write_raw(CHAT, "");
    assert_eq!(store.chat_owner(CHAT).expect("owner"), Some(None));
    let alice = owner("alice", None);
    assert_eq!(store.upsert_owned_chat(CHAT, "m", None, None, Some(&alice), &only(&alice), 5).expect("upsert"), None);
    match storage {
        Storage::Files(dir) => assert!(!dir.path().join("_chats.jsonl").exists(), "nothing written"),
        #[cfg(feature = "postgres")]
        Storage::Postgres(_) => {}
    }
    assert!(storage.index_lines().is_empty(), "nothing written");
    // Whoever may act on ownerless chats continues it; the record it gets still has no owner.
    let upsert = store.upsert_owned_chat(CHAT, "m", None, None, Some(&alice), &|_| true, 5).expect("upsert");
    assert_eq!(upsert.map(|u| u.created), Some(false));
    assert_eq!(store.chat_owner(CHAT).expect("owner"), Some(None));
}

#[test]
fn listing_rules_are_the_same_on_every_backend() {
    // The first half of `listing_sorts_newest_first_with_fallbacks`, from records of the same
    // shapes (the `chats` table cannot hold a line that is not a record).
    let legacy = "11111111-1111-4111-8111-111111111111";
    let active = "22222222-2222-4222-8222-222222222222";
    let only_updated = "33333333-3333-4333-8333-333333333333";
    for storage in storages() {
        storage.seed_index(&[
            format!("{{\"chatId\":\"{legacy}\",\"chatName\":\"legacy\",\"firstAgentKey\":\"demo\",\"createdAt\":100}}"),
            "{\"chatId\":\"not-a-uuid\",\"chatName\":\"skipped\",\"createdAt\":999}".to_owned(),
            format!("{{\"chatId\":\"{active}\",\"chatName\":\"active\",\"firstAgentKey\":\"demo\",\"firstAgentName\":\"Demo Agent\",\"createdAt\":50,\"updatedAt\":200}}"),
            format!("{{\"chatId\":\"{only_updated}\",\"chatName\":\"  \",\"updatedAt\":150}}"),
        ]);
        let store = storage.open(20, &[]);
        let chats = store.list_chats().expect("list");
        let summary: Vec<_> = chats
            .iter()
            .map(|c| (c.chat_name.as_str(), c.first_agent_name.as_deref(), c.created_at, c.updated_at))
            .collect();
        assert_eq!(
            summary,
            [
                ("active", Some("Demo Agent"), 50, 200),
                (only_updated, None, 150, 150),
                ("legacy", Some("demo"), 100, 100)
            ]
        );
        // an upsert of a legacy record fills what is missing and keeps its createdAt
        let upsert = store.upsert_chat(legacy, "ignored", Some("other"), None, 300).expect("upsert");
        assert_eq!(upsert, ChatUpsert { created: false, chat_name: "legacy".into() });
        let chat = store.get_chat(legacy).expect("get").expect("indexed");
        assert_eq!((chat.created_at, chat.updated_at, chat.first_agent_key.as_deref()), (100, 300, Some("demo")));
        assert_eq!(store.list_chats().expect("list")[0].chat_id, legacy);
    }
}

#[test]
fn run_totals_add_up_in_the_listing_on_every_backend() {
    use agw_protocol::history::HistoryLine;
    use agw_protocol::usage::{Cost, RunUsage};
    for storage in storages() {
        let store = storage.open(20, &[]);
        store.upsert_chat(CHAT, "hi", Some("a"), None, 100).expect("upsert");
        for (run, amount) in [("run_1", 0.5), ("run_2", 0.25)] {
            let mut usage = RunUsage::default();
            usage.add("openai", "m", &serde_json::json!({"prompt_tokens": 1000, "completion_tokens": 10}));
            let step = agw_protocol::history::StepLine {
                chat_id: CHAT.into(),
                run_id: run.into(),
                stage: "oneshot".into(),
                seq: 1,
                run_usage: Some(usage),
                run_cost: Some(Cost { currency: "USD".into(), amount }),
                ..Default::default()
            };
            store.append_final(CHAT, &[HistoryLine::Step(step)]).expect("append");
        }
        let chat = store.get_chat(CHAT).expect("get").expect("indexed");
        assert_eq!(chat.usage.as_ref().map(|u| u.totals.input_tokens), Some(2000));
        assert_eq!(chat.cost, Some(Cost { currency: "USD".into(), amount: 0.75 }));
        assert_eq!(storage.open(20, &[]).list_chats().expect("list"), vec![chat]);
    }
}
