//! Stream one chat completion with agw-llm and print each delta as it arrives.
//!
//! ```sh
//! # offline: against agw-testkit's scripted OpenAI-compatible server on loopback
//! cargo run -p agw-llm --example stream
//! # a real provider (any OpenAI-compatible endpoint):
//! AGW_EXAMPLE_BASE_URL=https://api.deepseek.com AGW_EXAMPLE_API_KEY=sk-… AGW_EXAMPLE_MODEL=deepseek-chat \
//!   cargo run -p agw-llm --example stream -- "Why is the sky blue?"
//! ```
//!
//! Every upstream chunk becomes its deltas the moment it is parsed: nothing is buffered, so the
//! timestamps below follow the provider's pacing.

use std::io::Write;
use std::time::{Duration, Instant};

use agw_llm::{
    CallOptions, ChatMessage, ChatProvider, ChatRequest, LlmDelta, OpenAiCompatibleProvider, ReasoningSetting,
};
use agw_testkit::{FixtureServer, Transcript};
use futures::StreamExt;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let question = std::env::args().nth(1).unwrap_or_else(|| "Why is the sky blue?".to_owned());
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());

    // Kept alive for the whole call when used.
    let mut _fixture = None;
    let provider = match (env("AGW_EXAMPLE_BASE_URL"), env("AGW_EXAMPLE_API_KEY"), env("AGW_EXAMPLE_MODEL")) {
        (Some(url), Some(key), Some(model)) => OpenAiCompatibleProvider::new("example", &url, &key, &model)?,
        _ => {
            // A scripted model with reasoning, 80 ms between chunks.
            let transcript = Transcript::openai_reasoning_text(
                &["Sunlight scatters ", "off air molecules…"],
                &["Rayleigh scattering: ", "blue light scatters ", "more than red."],
            )
            .with_chunk_delay_ms(80);
            let server = FixtureServer::with_default(transcript).await?;
            let provider = server.provider("example");
            _fixture = Some(server);
            provider
        }
    };

    let request = ChatRequest {
        provider_key: "example".into(),
        model: String::new(), // the provider's default model
        messages: vec![ChatMessage::user(question)],
        tools: vec![],
        tool_choice: None,
        reasoning: ReasoningSetting { enabled: true, ..Default::default() },
        temperature: None,
        top_p: None,
        max_tokens: Some(512),
        prompt_cache: Default::default(),
        response_format: None,
    };
    let options = CallOptions { inactivity_timeout: Duration::from_secs(60), ..Default::default() };

    let started = Instant::now();
    let mut stream = provider.stream(request, options).await?;
    let mut deltas = 0;
    while let Some(item) = stream.next().await {
        let at = started.elapsed().as_millis();
        match item? {
            LlmDelta::Reasoning { text } => println!("{at:>6} ms  reasoning  {text:?}"),
            LlmDelta::Content { text } => println!("{at:>6} ms  content    {text:?}"),
            LlmDelta::ToolCall(fragment) => println!("{at:>6} ms  tool call  {fragment:?}"),
            LlmDelta::Finish { reason } => println!("{at:>6} ms  finish     {reason}"),
            LlmDelta::Usage { usage } => println!("{at:>6} ms  usage      {usage}"),
        }
        std::io::stdout().flush()?;
        deltas += 1;
    }
    assert!(deltas > 0, "the provider streamed nothing");
    Ok(())
}
