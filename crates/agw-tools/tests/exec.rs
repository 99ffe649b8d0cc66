//! Backend execution under the tool budget: timeouts, retries, error results (§5.3–§5.4).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use agw_tools::{Tool, ToolContext, ToolError, ToolOutput, execute_backend};
use futures::future::BoxFuture;
use serde_json::{Value, json};

/// What a scripted attempt does.
#[derive(Clone)]
enum Step {
    Ok(ToolOutput),
    Fail(&'static str),
    Invalid(&'static str),
    Sleep(Duration),
}

/// A tool that plays `steps` in order (the last one repeats) and counts attempts.
struct Scripted {
    steps: Vec<Step>,
    attempts: AtomicUsize,
    seen_args: std::sync::Mutex<Vec<Value>>,
}

impl Scripted {
    fn new(steps: Vec<Step>) -> Scripted {
        Scripted { steps, attempts: AtomicUsize::new(0), seen_args: Default::default() }
    }
    fn attempts(&self) -> usize {
        self.attempts.load(Ordering::SeqCst)
    }
}

impl Tool for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }
    fn call<'a>(&'a self, args: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        let n = self.attempts.fetch_add(1, Ordering::SeqCst);
        self.seen_args.lock().unwrap().push(args);
        let step = self.steps[n.min(self.steps.len() - 1)].clone();
        Box::pin(async move {
            match step {
                Step::Ok(output) => Ok(output),
                Step::Fail(message) => Err(ToolError::Failed(message.to_owned())),
                Step::Invalid(message) => Err(ToolError::InvalidArguments(message.to_owned())),
                Step::Sleep(duration) => {
                    tokio::time::sleep(duration).await;
                    Ok(ToolOutput::Text("late".into()))
                }
            }
        })
    }
}

fn ctx() -> ToolContext {
    ToolContext::new("run_1", "chat_1")
}

#[tokio::test(start_paused = true)]
async fn failing_twice_then_ok_with_two_retries() {
    let tool = Scripted::new(vec![Step::Fail("boom"), Step::Fail("boom"), Step::Ok(ToolOutput::Text("OK".into()))]);
    let text = execute_backend(&tool, json!({}), &ctx(), Duration::from_millis(500), 2).await.into_text();
    assert_eq!(text, "OK");
    assert_eq!(tool.attempts(), 3);
}

#[tokio::test(start_paused = true)]
async fn failures_exhaust_the_retries() {
    let tool = Scripted::new(vec![Step::Fail("first"), Step::Fail("disk \"full\"")]);
    let text = execute_backend(&tool, json!({}), &ctx(), Duration::from_millis(500), 1).await.into_text();
    assert_eq!(text, r#"{"tool":"scripted","ok":false,"error":"disk \"full\""}"#);
    assert_eq!(tool.attempts(), 2);
}

#[tokio::test(start_paused = true)]
async fn invalid_arguments_are_never_retried() {
    let tool = Scripted::new(vec![Step::Invalid("city must be a string")]);
    let text = execute_backend(&tool, json!({}), &ctx(), Duration::from_millis(500), 3).await.into_text();
    assert_eq!(tool.attempts(), 1);
    assert_eq!(text, r#"{"tool":"scripted","ok":false,"error":"invalid arguments: city must be a string"}"#);
}

#[tokio::test(start_paused = true)]
async fn each_attempt_times_out() {
    let tool = Scripted::new(vec![Step::Sleep(Duration::from_millis(80))]);
    let started = tokio::time::Instant::now();
    let text = execute_backend(&tool, json!({}), &ctx(), Duration::from_millis(20), 2).await.into_text();
    assert_eq!(tool.attempts(), 3);
    assert_eq!(text, r#"{"tool":"scripted","ok":false,"error":"Backend tool timeout: tool=scripted, timeoutMs=20"}"#);
    assert_eq!(started.elapsed(), Duration::from_millis(60), "three attempts of 20 ms, nothing waited longer");
}

#[tokio::test(start_paused = true)]
async fn a_timeout_then_a_success() {
    let tool =
        Scripted::new(vec![Step::Sleep(Duration::from_secs(10)), Step::Ok(ToolOutput::Json(json!({"b":1,"a":null})))]);
    let text = execute_backend(&tool, json!({}), &ctx(), Duration::from_millis(20), 1).await.into_text();
    assert_eq!(text, r#"{"b":1,"a":null}"#, "compact JSON, key order kept");
}

#[tokio::test]
async fn result_texts() {
    let null = Scripted::new(vec![Step::Ok(ToolOutput::Json(Value::Null))]);
    assert_eq!(execute_backend(&null, json!({}), &ctx(), Duration::from_secs(1), 0).await.into_text(), "null");
    let text = Scripted::new(vec![Step::Ok(ToolOutput::Text("plain \"text\"".into()))]);
    assert_eq!(
        execute_backend(&text, json!({}), &ctx(), Duration::from_secs(1), 0).await.into_text(),
        "plain \"text\""
    );
}

#[tokio::test]
async fn non_object_arguments_become_an_empty_object() {
    let tool = Scripted::new(vec![Step::Ok(ToolOutput::Text("ok".into()))]);
    for args in [json!(null), json!([1]), json!("text"), json!(3)] {
        execute_backend(&tool, args, &ctx(), Duration::from_secs(1), 0).await.into_text();
    }
    execute_backend(&tool, json!({"k":"v"}), &ctx(), Duration::from_secs(1), 0).await.into_text();
    let seen = tool.seen_args.lock().unwrap().clone();
    assert_eq!(seen, [json!({}), json!({}), json!({}), json!({}), json!({"k":"v"})]);
}

/// A tool whose future records whether it was dropped before finishing.
struct Hanging {
    dropped: Arc<AtomicBool>,
}

struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

impl Tool for Hanging {
    fn name(&self) -> &str {
        "hanging"
    }
    fn call<'a>(&'a self, _args: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        let guard = SetOnDrop(Arc::clone(&self.dropped));
        Box::pin(async move {
            let _guard = guard;
            std::future::pending::<()>().await;
            Ok(ToolOutput::Text("never".into()))
        })
    }
}

#[tokio::test(start_paused = true)]
async fn dropping_the_execution_drops_the_tool_future() {
    let dropped = Arc::new(AtomicBool::new(false));
    let tool = Hanging { dropped: Arc::clone(&dropped) };
    let context = ctx();
    let execution = execute_backend(&tool, json!({}), &context, Duration::from_secs(3600), 0);
    let cancelled = tokio::time::timeout(Duration::from_millis(10), execution).await;
    assert!(cancelled.is_err());
    assert!(dropped.load(Ordering::SeqCst), "the in-flight attempt was cancelled");
}

#[tokio::test(start_paused = true)]
async fn a_timed_out_attempt_is_dropped_before_the_retry() {
    let dropped = Arc::new(AtomicBool::new(false));
    let tool = Hanging { dropped: Arc::clone(&dropped) };
    let text = execute_backend(&tool, json!({}), &ctx(), Duration::from_millis(5), 0).await.into_text();
    assert!(text.contains("Backend tool timeout: tool=hanging, timeoutMs=5"));
    assert!(dropped.load(Ordering::SeqCst));
}

#[tokio::test(start_paused = true)]
async fn needing_the_user_is_an_outcome_of_its_own_never_retried() {
    use agw_tools::{BackendOutcome, UserStatus};
    let status = UserStatus::new("Not enough credits").with_data(json!({"balance": 0}));
    let tool =
        Scripted::new(vec![Step::Ok(ToolOutput::NeedsUser(status.clone())), Step::Ok(ToolOutput::Text("ok".into()))]);
    let outcome = execute_backend(&tool, json!({}), &ctx(), Duration::from_millis(500), 3).await;
    assert_eq!(outcome, BackendOutcome::NeedsUser(status));
    assert_eq!(outcome.as_result(), None);
    assert_eq!(tool.attempts(), 1, "a pause is not a failure");

    // A status built field by field is bounded on its way out.
    let raw = UserStatus { code: -1002, message: "x".repeat(5000), data: json!([1]) };
    let tool = Scripted::new(vec![Step::Ok(ToolOutput::NeedsUser(raw))]);
    let BackendOutcome::NeedsUser(bounded) = execute_backend(&tool, json!({}), &ctx(), Duration::from_secs(1), 0).await
    else {
        panic!("a pause")
    };
    assert_eq!(bounded.message.chars().count(), agw_tools::USER_STATUS_MESSAGE_MAX_CHARS);
    assert_eq!(bounded.data, json!({}));
}

#[tokio::test]
async fn the_context_says_how_often_the_user_continued() {
    struct Counting;
    impl Tool for Counting {
        fn name(&self) -> &str {
            "counting"
        }
        fn call<'a>(&'a self, _args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
            Box::pin(async move { Ok(ToolOutput::Text(ctx.continued.to_string())) })
        }
    }
    assert_eq!(ctx().continued, 0);
    let outcome = execute_backend(&Counting, json!({}), &ctx().with_continued(2), Duration::from_secs(1), 0).await;
    assert_eq!(outcome.as_result(), Some("2"));
}
