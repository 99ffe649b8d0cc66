//! Per-user isolation over real HTTP (issue 22 item 3): with JWT auth on, chats and runs belong
//! to the authenticated subject (and tenant); another user's chat is absent for everyone else —
//! not listed, 404 to read or continue, `unmatched` to submit to — while the operator role sees
//! all. Without auth nothing changes.

mod common;

use std::time::Duration;

use agw_testkit::Transcript;
use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::rsa::{KeyPair, KeySize};
use aws_lc_rs::signature::{self, KeyPair as _};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use common::{Gateway, LiveStream, oneshot_agent, read_stream};
use serde_json::{Value, json};

const OPERATOR_ROLE: &str = "agw-admin";

/// An RSA key that signs test tokens (RS256) and whose public half the gateway trusts.
struct Signer(KeyPair);

impl Signer {
    fn new() -> Self {
        Signer(KeyPair::generate(KeySize::Rsa2048).expect("RSA key generation"))
    }

    fn public_pem(&self) -> String {
        let der = self.0.public_key().as_der().expect("SPKI DER");
        let b64 = STANDARD.encode(der.as_ref());
        let lines: Vec<&str> = b64.as_bytes().chunks(64).map(|c| std::str::from_utf8(c).unwrap()).collect();
        format!("-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n", lines.join("\n"))
    }

    /// A valid token for `sub` with `extra` claims.
    fn token(&self, sub: &str, extra: Value) -> String {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        let mut claims = json!({"sub": sub, "iat": now, "exp": now + 300});
        for (k, v) in extra.as_object().unwrap() {
            claims[k] = v.clone();
        }
        let header = json!({"alg": "RS256", "typ": "JWT"});
        let input =
            format!("{}.{}", URL_SAFE_NO_PAD.encode(header.to_string()), URL_SAFE_NO_PAD.encode(claims.to_string()));
        let mut sig = vec![0; self.0.public_modulus_len()];
        self.0.sign(&signature::RSA_PKCS1_SHA256, &SystemRandom::new(), input.as_bytes(), &mut sig).expect("sign");
        format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig))
    }
}

/// A gateway with auth on (local key) and an operator role, plus tokens for its users.
struct Users {
    gw: Gateway,
    alice: String,
    bob: String,
    operator: String,
}

async fn gateway_with_users(extra_env: &[(&str, &str)], agents: &[(String, String)]) -> Users {
    let signer = Signer::new();
    let pem = signer.public_pem();
    let mut env = vec![
        ("SERVER_ADDRESS", "127.0.0.1"),
        ("AGENT_AUTH_LOCAL_PUBLIC_KEY", pem.as_str()),
        ("AGW_AUTH_OPERATOR_ROLE", OPERATOR_ROLE),
    ];
    env.extend_from_slice(extra_env);
    let gw = Gateway::start(agents, &env).await;
    gw.fixture.set_default(Transcript::openai_text(&["hello"]));
    Users {
        alice: signer.token("alice", json!({})),
        bob: signer.token("bob", json!({"roles": ["user"]})),
        operator: signer.token("ops", json!({"roles": ["user", OPERATOR_ROLE]})),
        gw,
    }
}

impl Users {
    async fn query(&self, token: &str, body: &Value) -> reqwest::Response {
        self.gw
            .client
            .post(format!("{}/api/ap/query", self.gw.base))
            .bearer_auth(token)
            .json(body)
            .send()
            .await
            .unwrap()
    }

    /// A whole run as `token`; the chat id it ran in.
    async fn run(&self, token: &str, body: &Value) -> String {
        let resp = self.query(token, body).await;
        assert_eq!(resp.status(), 200);
        let stream = read_stream(resp).await;
        assert_eq!(stream.last()["type"], "run.complete", "{:?}", stream.types());
        stream.of_type("run.start")[0]["chatId"].as_str().unwrap().to_string()
    }

    async fn get(&self, token: &str, path: &str) -> (u16, Value) {
        let resp = self.gw.client.get(format!("{}{path}", self.gw.base)).bearer_auth(token).send().await.unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap())
    }

    async fn chat_ids(&self, token: &str) -> Vec<String> {
        let (status, body) = self.get(token, "/api/ap/chats").await;
        assert_eq!(status, 200, "{body}");
        body["data"].as_array().unwrap().iter().map(|c| c["chatId"].as_str().unwrap().to_string()).collect()
    }
}

const NEVER_CREATED: &str = "0b8f6a52-7c1e-4d3a-9f2b-5e6d7c8b9a01";

#[tokio::test]
async fn bob_cannot_list_read_or_continue_alices_chat() {
    let users = gateway_with_users(&[], &[oneshot_agent("a", false, 5000)]).await;
    let alices = users.run(&users.alice, &json!({"agentKey": "a", "message": "alice's secret plan"})).await;
    let bobs = users.run(&users.bob, &json!({"agentKey": "a", "message": "bob's question"})).await;

    assert_eq!(users.chat_ids(&users.alice).await, std::slice::from_ref(&alices));
    assert_eq!(users.chat_ids(&users.bob).await, std::slice::from_ref(&bobs));

    // Reading: the same 404 as for a chat that never existed; nothing of hers in the answer.
    let (status, body) = users.get(&users.bob, &format!("/api/ap/chat?chatId={alices}")).await;
    assert_eq!((status, body["msg"].as_str().unwrap()), (404, format!("chat not found: {alices}").as_str()));
    assert!(!body.to_string().contains("secret plan"));
    let (status, absent) = users.get(&users.bob, &format!("/api/ap/chat?chatId={NEVER_CREATED}")).await;
    assert_eq!(status, 404);
    assert_eq!(absent["data"], body["data"]);
    let (status, own) = users.get(&users.alice, &format!("/api/ap/chat?chatId={alices}")).await;
    assert_eq!(status, 200);
    assert!(own.to_string().contains("secret plan"));

    // Continuing: 404 before anything streams; the model is not called, her chat is unchanged.
    let calls = users.gw.fixture.request_count();
    let index_before = users.gw.state.runs.chat_store().get_chat(&alices).unwrap().unwrap();
    let resp = users.query(&users.bob, &json!({"agentKey": "a", "message": "tell me", "chatId": alices})).await;
    assert_eq!(resp.status(), 404);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["msg"], format!("chat not found: {alices}"));
    assert_eq!(users.gw.fixture.request_count(), calls, "no model call for a refused query");
    assert_eq!(users.gw.state.runs.chat_store().get_chat(&alices).unwrap().unwrap(), index_before);
    let history = users.gw.state.runs.chat_store().read_lines(&alices).unwrap();
    assert_eq!(history.iter().filter(|l| l.to_json().unwrap().contains("tell me")).count(), 0);

    // She still can.
    assert_eq!(users.run(&users.alice, &json!({"agentKey": "a", "message": "more", "chatId": alices})).await, alices);
}

#[tokio::test]
async fn bob_cannot_submit_to_alices_running_run() {
    let ask = (
        "ask.json".to_string(),
        r#"{"key":"ask","mode":"REACT","modelConfig":{"providerKey":"fixture","model":"m"},
            "toolConfig":{"frontends":["confirm_dialog"]},"react":{"systemPrompt":"You ask.","maxSteps":3}}"#
            .to_string(),
    );
    let users = gateway_with_users(&[], &[ask]).await;
    users.gw.fixture.on_stage(
        "agent-react-step-1",
        Transcript::openai_tool_call("call_fe", "confirm_dialog", &["{\"question\":\"Go?\"}"]),
    );
    users.gw.fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["done"]));
    let mut live = LiveStream::new(users.query(&users.alice, &json!({"agentKey": "ask", "message": "plan"})).await);
    live.until(|e| e["type"] == "tool.end").await;
    let run_id = live.seen.iter().find(|e| e["type"] == "run.start").unwrap()["runId"].as_str().unwrap().to_string();

    let submit = |token: String, run: String| {
        let request = users
            .gw
            .client
            .post(format!("{}/api/ap/submit", users.gw.base))
            .bearer_auth(token)
            .json(&json!({"runId": run, "toolId": "call_fe", "params": {"selectedOption": "B"}}));
        async move { request.send().await.unwrap().json::<Value>().await.unwrap() }
    };
    // Bob gets exactly what a submit to a run that does not exist gets: `unmatched`.
    let bobs = submit(users.bob.clone(), run_id.clone()).await;
    assert_eq!(bobs["data"]["status"], "unmatched", "{bobs}");
    assert_eq!(bobs["data"]["detail"], format!("No pending frontend tool found for runId={run_id}, toolId=call_fe"));
    let nobody = submit(users.bob.clone(), NEVER_CREATED.to_string()).await;
    assert_eq!(nobody["data"]["status"], "unmatched");
    // Attach, steer and interrupt: bob gets what a run that does not exist gets (404), and
    // nothing happens to alice's run.
    let client = &users.gw.client;
    let base = &users.gw.base;
    let token = users.bob.clone();
    let attach = client.get(format!("{base}/api/ap/attach?runId={run_id}")).bearer_auth(&token).send().await.unwrap();
    assert_eq!(attach.status(), 404);
    for (path, body) in
        [("interrupt", json!({"runId": run_id})), ("steer", json!({"runId": run_id, "message": "bob was here"}))]
    {
        let resp = client.post(format!("{base}/api/ap/{path}")).bearer_auth(&token).json(&body).send().await.unwrap();
        assert_eq!(resp.status(), 404, "{path}");
        let never = json!({"runId": NEVER_CREATED, "message": "x"});
        let resp = client.post(format!("{base}/api/ap/{path}")).bearer_auth(&token).json(&never).send().await.unwrap();
        assert_eq!(resp.status(), 404, "{path} of a run that never existed");
    }
    let own =
        client.get(format!("{base}/api/ap/attach?runId={run_id}")).bearer_auth(&users.alice).send().await.unwrap();
    assert_eq!(own.status(), 200, "alice attaches to her own run");
    drop(own);
    // Alice's run is still waiting: bob's requests neither answered, steered nor cancelled it.
    assert!(tokio::time::timeout(Duration::from_millis(200), live.next_event()).await.is_err());
    let alices = submit(users.alice.clone(), run_id.clone()).await;
    assert_eq!(alices["data"]["status"], "accepted", "{alices}");
    let result = live.until(|e| e["type"] == "tool.result").await;
    assert_eq!(result["result"], "{\"selectedOption\":\"B\"}");
    let rest = live.rest().await;
    assert_eq!(rest.last().unwrap()["type"], "run.complete");
    assert!(rest.iter().all(|e| e["type"] != "request.steer"), "bob's steer was not taken");
}

/// Deleting (`DELETE /api/ap/chat`, issue 37): only the owner or the operator; anyone else gets
/// the 404 of a chat that never existed, and nothing of the chat goes.
#[tokio::test]
async fn only_the_owner_or_the_operator_deletes_a_chat() {
    let users = gateway_with_users(&[], &[oneshot_agent("a", false, 5000)]).await;
    let alices = users.run(&users.alice, &json!({"agentKey": "a", "message": "alice's secret plan"})).await;
    let other = users.run(&users.alice, &json!({"agentKey": "a", "message": "her other chat"})).await;
    let delete = |token: &str, chat_id: &str| {
        let request = users.gw.client.delete(format!("{}/api/ap/chat?chatId={chat_id}", users.gw.base));
        let request = request.bearer_auth(token);
        async move {
            let resp = request.send().await.unwrap();
            (resp.status().as_u16(), resp.json::<Value>().await.unwrap())
        }
    };
    let store = users.gw.state.runs.chat_store().clone();
    let lines_before = store.read_lines(&alices).unwrap().len();

    let (status, body) = delete(&users.bob, &alices).await;
    assert_eq!((status, body["msg"].as_str().unwrap()), (404, format!("chat not found: {alices}").as_str()));
    let (_, absent) = delete(&users.bob, NEVER_CREATED).await;
    assert_eq!(absent["data"], body["data"], "the same answer as for a chat that never existed");
    assert_eq!(store.read_lines(&alices).unwrap().len(), lines_before, "nothing deleted");
    assert_eq!(users.get(&users.alice, &format!("/api/ap/chat?chatId={alices}")).await.0, 200);
    // Without a token: 401 before anything is looked up.
    let resp = users.gw.client.delete(format!("{}/api/ap/chat?chatId={alices}", users.gw.base)).send().await;
    assert_eq!(resp.unwrap().status(), 401);

    assert_eq!(delete(&users.alice, &alices).await.0, 200);
    assert_eq!(users.get(&users.alice, &format!("/api/ap/chat?chatId={alices}")).await.0, 404);
    assert_eq!(delete(&users.operator, &other).await.0, 200, "the operator deletes anyone's chat");
    assert!(users.chat_ids(&users.alice).await.is_empty());
}

/// Forking (`POST /api/ap/chat/fork`, issue 37): whoever may read a chat may fork it, and the
/// fork is the caller's own chat; anyone else gets the 404 of a chat that never existed.
#[tokio::test]
async fn a_fork_belongs_to_whoever_forked_and_another_users_chat_is_not_found() {
    let users = gateway_with_users(&[], &[oneshot_agent("a", false, 5000)]).await;
    let alices = users.run(&users.alice, &json!({"agentKey": "a", "message": "alice's secret plan"})).await;
    let fork = |token: &str, chat_id: &str| {
        let request = users.gw.client.post(format!("{}/api/ap/chat/fork", users.gw.base));
        let request = request.bearer_auth(token).json(&json!({"chatId": chat_id}));
        async move {
            let resp = request.send().await.unwrap();
            (resp.status().as_u16(), resp.json::<Value>().await.unwrap())
        }
    };

    let (status, body) = fork(&users.bob, &alices).await;
    assert_eq!((status, body["msg"].as_str().unwrap()), (404, format!("chat not found: {alices}").as_str()));
    let (_, absent) = fork(&users.bob, NEVER_CREATED).await;
    assert_eq!(absent["data"], body["data"], "the same answer as for a chat that never existed");
    assert!(users.chat_ids(&users.bob).await.is_empty(), "bob got nothing");

    let (status, body) = fork(&users.alice, &alices).await;
    assert_eq!(status, 200, "{body}");
    let hers = body["data"]["chatId"].as_str().unwrap().to_owned();
    assert_eq!(users.chat_ids(&users.alice).await.len(), 2);
    assert_eq!(users.get(&users.bob, &format!("/api/ap/chat?chatId={hers}")).await.0, 404);
    // The operator forks anyone's chat into a chat of its own, which alice does not see.
    let (status, body) = fork(&users.operator, &alices).await;
    assert_eq!(status, 200, "{body}");
    let theirs = body["data"]["chatId"].as_str().unwrap().to_owned();
    assert!(!users.chat_ids(&users.alice).await.contains(&theirs));
    assert_eq!(users.get(&users.alice, &format!("/api/ap/chat?chatId={theirs}")).await.0, 404);
}

#[tokio::test]
async fn the_operator_role_sees_and_continues_every_chat() {
    let users = gateway_with_users(&[], &[oneshot_agent("a", false, 5000)]).await;
    let alices = users.run(&users.alice, &json!({"agentKey": "a", "message": "hers"})).await;
    let bobs = users.run(&users.bob, &json!({"agentKey": "a", "message": "his"})).await;
    let mut all = users.chat_ids(&users.operator).await;
    all.sort();
    let mut expected = vec![alices.clone(), bobs];
    expected.sort();
    assert_eq!(all, expected);
    assert_eq!(users.get(&users.operator, &format!("/api/ap/chat?chatId={alices}")).await.0, 200);
    // Continuing her chat does not make it the operator's: she still sees it, bob still does not.
    users.run(&users.operator, &json!({"agentKey": "a", "message": "op", "chatId": alices})).await;
    assert!(users.chat_ids(&users.alice).await.contains(&alices));
    assert!(!users.chat_ids(&users.bob).await.contains(&alices));
}

#[tokio::test]
async fn chats_made_without_auth_are_only_the_operators_once_auth_is_on() {
    let users = gateway_with_users(&[], &[oneshot_agent("a", false, 5000)]).await;
    // An ownerless chat, as a gateway without auth (or an older agw) left it.
    users.gw.state.runs.chat_store().upsert_chat(NEVER_CREATED, "from before", Some("a"), None, 1).unwrap();
    assert!(users.chat_ids(&users.alice).await.is_empty());
    assert_eq!(users.get(&users.alice, &format!("/api/ap/chat?chatId={NEVER_CREATED}")).await.0, 404);
    let resp =
        users.query(&users.alice, &json!({"agentKey": "a", "message": "mine now?", "chatId": NEVER_CREATED})).await;
    assert_eq!(resp.status(), 404, "an ownerless chat cannot be claimed");
    assert_eq!(users.chat_ids(&users.operator).await, [NEVER_CREATED]);
    assert_eq!(users.get(&users.operator, &format!("/api/ap/chat?chatId={NEVER_CREATED}")).await.0, 200);
}

#[tokio::test]
async fn the_same_subject_in_another_tenant_is_another_user() {
    let signer = Signer::new();
    let pem = signer.public_pem();
    let gw = Gateway::start(
        &[oneshot_agent("a", false, 5000)],
        &[("SERVER_ADDRESS", "127.0.0.1"), ("AGENT_AUTH_LOCAL_PUBLIC_KEY", &pem), ("AGW_AUTH_TENANT_CLAIM", "org")],
    )
    .await;
    gw.fixture.set_default(Transcript::openai_text(&["hello"]));
    let (acme, globex) =
        (signer.token("alice", json!({"org": "acme"})), signer.token("alice", json!({"org": "globex"})));
    let resp = gw
        .client
        .post(format!("{}/api/ap/query", gw.base))
        .bearer_auth(&acme)
        .json(&json!({"agentKey":"a","message":"m"}))
        .send()
        .await
        .unwrap();
    let chat = read_stream(resp).await.of_type("run.start")[0]["chatId"].as_str().unwrap().to_string();
    let list = |token: String| {
        let request = gw.client.get(format!("{}/api/ap/chats", gw.base)).bearer_auth(token);
        async move { request.send().await.unwrap().json::<Value>().await.unwrap()["data"].as_array().unwrap().len() }
    };
    assert_eq!(list(acme.clone()).await, 1);
    assert_eq!(list(globex.clone()).await, 0);
    let resp =
        gw.client.get(format!("{}/api/ap/chat?chatId={chat}", gw.base)).bearer_auth(&globex).send().await.unwrap();
    assert_eq!(resp.status(), 404);
    // A token without the tenant claim is not a user of any tenant.
    let resp = gw
        .client
        .get(format!("{}/api/ap/chats", gw.base))
        .bearer_auth(signer.token("alice", json!({})))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    assert_eq!(resp.json::<Value>().await.unwrap()["msg"], "unauthorized: missing tenant claim");
}

/// Quotas count per owner — subject and tenant — like chats (issue 32): `alice` of one tenant
/// spending the day's tokens does not refuse `alice` of another.
#[tokio::test]
async fn quotas_count_per_owner_so_the_same_subject_in_another_tenant_has_its_own() {
    let signer = Signer::new();
    let pem = signer.public_pem();
    let gw = Gateway::start(
        &[oneshot_agent("a", false, 5000)],
        &[
            ("SERVER_ADDRESS", "127.0.0.1"),
            ("AGENT_AUTH_LOCAL_PUBLIC_KEY", &pem),
            ("AGW_AUTH_TENANT_CLAIM", "org"),
            ("AGW_QUOTAS_SUBJECT_TOKENS_PER_DAY", "100"),
        ],
    )
    .await;
    // Every answer uses 150 tokens: one run spends its owner's day.
    gw.fixture.set_default(Transcript::new().content("hello").finish("stop").usage(100, 50).done());
    let (acme, globex) =
        (signer.token("alice", json!({"org": "acme"})), signer.token("alice", json!({"org": "globex"})));
    let query = |token: &str| {
        let request = gw.client.post(format!("{}/api/ap/query", gw.base)).bearer_auth(token);
        request.json(&json!({"agentKey": "a", "message": "m"})).send()
    };
    let first = query(&acme).await.unwrap();
    assert_eq!(first.status(), 200);
    assert_eq!(read_stream(first).await.last()["usage"]["totalTokens"], 150);
    let other = query(&globex).await.unwrap();
    assert_eq!(other.status(), 200, "alice of globex is another user with her own quota");
    assert_eq!(read_stream(other).await.last()["type"], "run.complete");

    let refused = query(&acme).await.unwrap();
    assert_eq!(refused.status(), 429, "alice of acme spent her day");
    let body: Value = refused.json().await.unwrap();
    assert_eq!(
        (body["code"].as_str(), body["quota"].as_str()),
        (Some("quota_exceeded"), Some("subject.tokens-per-day"))
    );
    assert!(body["msg"].as_str().unwrap().contains("of alice (tenant acme) reached"), "{body}");
    assert_eq!(gw.fixture.request_count(), 2);
}

#[tokio::test]
async fn without_auth_every_chat_is_the_single_users_and_nothing_new_is_stored() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[]).await;
    gw.fixture.set_default(Transcript::openai_text(&["hello"]));
    let stream = gw.run(&json!({"agentKey": "a", "message": "m"})).await;
    let chat = stream.of_type("run.start")[0]["chatId"].as_str().unwrap().to_string();
    let (status, list) = gw.get_json("/api/ap/chats").await;
    assert_eq!((status, list["data"].as_array().unwrap().len()), (200, 1));
    assert_eq!(gw.get_json(&format!("/api/ap/chat?chatId={chat}")).await.0, 200);
    gw.run(&json!({"agentKey": "a", "message": "again", "chatId": chat})).await;
    let index = std::fs::read_to_string(gw.agents_dir.join("chats/_chats.jsonl")).unwrap();
    assert!(!index.contains("owner"), "auth off writes the contract's records only: {index}");
}

impl Users {
    /// `POST /api/ai-sdk/a/chat` as `token` with the AI SDK chat id `id`: status, and the agw chat
    /// id and text of the stream when it ran.
    async fn ai_sdk(&self, token: &str, id: &str, text: &str) -> (u16, Option<(String, String)>) {
        let user = json!({"id": "u", "role": "user", "parts": [{"type": "text", "text": text}]});
        let resp = self
            .gw
            .client
            .post(format!("{}/api/ai-sdk/a/chat", self.gw.base))
            .bearer_auth(token)
            .json(&json!({"id": id, "messages": [user]}))
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        if status != 200 {
            return (status, None);
        }
        let chunks: Vec<Value> = resp
            .text()
            .await
            .unwrap()
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter(|d| *d != "[DONE]")
            .map(|d| serde_json::from_str(d).unwrap())
            .collect();
        let chat_id = chunks[0]["messageMetadata"]["chatId"].as_str().unwrap().to_owned();
        let text = chunks.iter().filter(|c| c["type"] == "text-delta").map(|c| c["delta"].as_str().unwrap()).collect();
        (status, Some((chat_id, text)))
    }

    /// `POST /api/ag-ui/a` as `token` with the AG-UI thread `thread`: status and the agw chat id.
    async fn ag_ui(&self, token: &str, thread: &str) -> (u16, Option<String>) {
        let input = json!({"threadId": thread, "runId": "r", "state": {}, "tools": [], "context": [],
            "forwardedProps": {}, "messages": [{"id": "m1", "role": "user", "content": "hi"}]});
        let resp = self
            .gw
            .client
            .post(format!("{}/api/ag-ui/a", self.gw.base))
            .bearer_auth(token)
            .json(&input)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        if status != 200 {
            return (status, None);
        }
        let body = resp.text().await.unwrap();
        let first: Value = serde_json::from_str(body.lines().find_map(|l| l.strip_prefix("data: ")).unwrap()).unwrap();
        (status, Some(first["threadId"].as_str().unwrap().to_owned()))
    }
}

/// Issue 32: the AI SDK's `id` and AG-UI's `threadId` are strings the client picks, often
/// predictable (`"support"`, a user name). With auth on the chat such a string names is the
/// caller's own: bob using it first does not take it from alice, and bob sending it never reaches
/// alice's chat. The same caller and string always name the same chat.
#[tokio::test]
async fn client_chat_ids_name_the_callers_own_chat() {
    let users = gateway_with_users(&[], &[oneshot_agent("a", false, 5000)]).await;
    let (status, bobs) = users.ai_sdk(&users.bob, "support", "bob squats the id").await;
    assert_eq!(status, 200);
    let (bobs, _) = bobs.unwrap();
    let (status, alices) = users.ai_sdk(&users.alice, "support", "alice's secret plan").await;
    assert_eq!(status, 200, "the id is alice's to use too");
    let (alices, text) = alices.unwrap();
    assert_eq!(text, "hello");
    assert_ne!(alices, bobs, "two users, two chats");
    let (_, again) = users.ai_sdk(&users.alice, "support", "and then?").await;
    assert_eq!(again.unwrap().0, alices, "a follow-up with the same id finds her chat");
    assert_eq!(users.chat_ids(&users.alice).await, std::slice::from_ref(&alices));
    assert_eq!(users.chat_ids(&users.bob).await, std::slice::from_ref(&bobs));
    let history = users.gw.history_json(&alices).await;
    let queries: Vec<&str> = history.iter().filter_map(|l| l["query"]["message"].as_str()).collect();
    assert_eq!(queries, ["alice's secret plan", "and then?"], "bob's message is not in her chat");

    // Bob's resume of the string is his chat, never hers; her agw chat id stays hers.
    let resume = users
        .gw
        .client
        .get(format!("{}/api/ai-sdk/a/chat/support/stream", users.gw.base))
        .bearer_auth(&users.bob)
        .send()
        .await
        .unwrap();
    assert_eq!(resume.status(), 204, "bob has nothing running");
    let (status, _) = users.ai_sdk(&users.bob, &alices, "let me in").await;
    assert_eq!(status, 404, "alice's agw chat id is hers");

    // AG-UI threads the same way.
    let (status, bob_thread) = users.ag_ui(&users.bob, "support").await;
    assert_eq!((status, bob_thread.as_deref()), (200, Some(bobs.as_str())), "the same derivation as the AI SDK's");
    let (_, alice_thread) = users.ag_ui(&users.alice, "support").await;
    assert_eq!(alice_thread.as_deref(), Some(alices.as_str()));
}

/// The phase stream (issue 35) under auth: `/chat` needs a token like `/api/**`; a run and its
/// chat are the caller's (bob can neither attach to alice's run nor continue her chat), and the
/// `user-id` header is recorded, never taken as the identity.
#[tokio::test]
async fn the_phase_stream_keeps_runs_and_chats_to_their_owner() {
    let users = gateway_with_users(&[], &[oneshot_agent("a", false, 5000)]).await;
    let gw = &users.gw;
    let body = json!({"messages": [{"role": "user", "content": "alice's secret plan"}]});
    let anonymous = gw.client.post(format!("{}/chat", gw.base)).json(&body).send().await.unwrap();
    assert_eq!(anonymous.status(), 401, "/chat is protected");
    let resp = gw
        .client
        .post(format!("{}/chat", gw.base))
        .bearer_auth(&users.alice)
        .header("user-id", "bob")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let run_id = resp.headers()["x-agw-run-id"].to_str().unwrap().to_owned();
    let chat_id = resp.headers()["x-agw-chat-id"].to_str().unwrap().to_owned();
    assert!(resp.text().await.unwrap().contains("\"type\":\"done\""));
    assert_eq!(users.chat_ids(&users.alice).await, std::slice::from_ref(&chat_id), "hers, whatever user-id says");
    assert!(users.chat_ids(&users.bob).await.is_empty());

    let attach = format!("/api/phase/attach?runId={run_id}");
    let (status, _) = users.get(&users.bob, &attach).await;
    assert_eq!(status, 404, "another user's run is absent");
    let own = gw.client.get(format!("{}{attach}", gw.base)).bearer_auth(&users.alice).send().await.unwrap();
    assert_eq!(own.status(), 200);
    assert!(own.text().await.unwrap().contains("\"type\":\"done\""));

    let calls = gw.fixture.request_count();
    let steal = json!({"chatId": chat_id, "messages": [{"role": "user", "content": "tell me"}]});
    let resp =
        gw.client.post(format!("{}/api/phase/a", gw.base)).bearer_auth(&users.bob).json(&steal).send().await.unwrap();
    assert_eq!(resp.status(), 404);
    assert_eq!(gw.fixture.request_count(), calls, "no model call for a refused run");
}

impl Users {
    /// One A2A JSON-RPC call as `token`.
    async fn a2a(&self, token: &str, method: &str, params: Value) -> Value {
        let resp = self
            .gw
            .client
            .post(format!("{}/a2a/a", self.gw.base))
            .bearer_auth(token)
            .header("A2A-Version", "1.0")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        resp.json().await.unwrap()
    }
}

/// A2A tasks are their owner's: another user cannot read, list, cancel, subscribe to or push
/// from them (as absent as a task that does not exist); with auth on, the card names the bearer
/// scheme and an authenticated client gets the extended card.
#[tokio::test]
async fn a2a_tasks_belong_to_their_owner() {
    let tooled = r#"{"key":"a","mode":"ONESHOT","modelConfig":{"providerKey":"fixture","model":"m"},
        "toolConfig":{"backends":["mock_city_weather"]},"plain":{"systemPrompt":"s"}}"#;
    let users = gateway_with_users(&[], &[("a.json".into(), tooled.into())]).await;
    let message = json!({"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "alice's task"}]}});
    let sent = users.a2a(&users.alice, "SendMessage", message).await;
    let task_id = sent["result"]["task"]["id"].as_str().unwrap().to_owned();
    assert_eq!(sent["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{sent}");

    let got = users.a2a(&users.bob, "GetTask", json!({"id": task_id})).await;
    assert_eq!(got["error"]["code"], -32001, "{got}");
    let listed = users.a2a(&users.bob, "ListTasks", json!({})).await;
    assert_eq!(listed["result"]["totalSize"], 0, "{listed}");
    let cancel = users.a2a(&users.bob, "CancelTask", json!({"id": task_id})).await;
    assert_eq!(cancel["error"]["code"], -32001, "{cancel}");
    let push = users
        .a2a(&users.bob, "CreateTaskPushNotificationConfig", json!({"taskId": task_id, "url": "http://127.0.0.1:9/x"}))
        .await;
    assert_eq!(push["error"]["code"], -32001, "{push}");
    let mine = users.a2a(&users.alice, "ListTasks", json!({})).await;
    assert_eq!(mine["result"]["totalSize"], 1, "{mine}");
    let operator = users.a2a(&users.operator, "GetTask", json!({"id": task_id})).await;
    assert_eq!(operator["result"]["id"], task_id.as_str(), "the operator role sees every task: {operator}");

    let (status, card) = users.get(&users.bob, "/a2a/a/.well-known/agent-card.json").await;
    assert_eq!(status, 200);
    assert_eq!(card["capabilities"]["extendedAgentCard"], true);
    assert!(card["securitySchemes"]["bearer"].is_object(), "{card}");
    let extended = users.a2a(&users.bob, "GetExtendedAgentCard", json!({})).await;
    let skills: Vec<&str> =
        extended["result"]["skills"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(skills, ["a", "tool:mock_city_weather"], "{extended}");
    assert_eq!(card["skills"].as_array().unwrap().len(), 1, "the public card names no tools");
    let anonymous = users
        .gw
        .client
        .post(format!("{}/a2a/a", users.gw.base))
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard", "params": {}}))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401, "no token, no A2A");
}
