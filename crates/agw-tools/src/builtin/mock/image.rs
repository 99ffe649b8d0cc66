//! `mock_image_generate` (agw, issue 36): a tool that pauses the run for the user
//! (`docs/pausing-tools.md`). Its first call answers [`ToolOutput::NeedsUser`] — code -1002, "Not
//! enough credits to generate an image", data `{"balance":0,"price":10}` — and once the user
//! said "continue" ([`ToolContext::continued`] ≥ 1) it "generates" a fake image: a fixed URL made
//! from the prompt, so equal arguments give equal results. A real tool would look at the
//! balance again instead of counting.

use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::super::args::non_blank;
use super::super::meta;
use crate::tool::{NEEDS_USER_CODE, Tool, ToolContext, ToolError, ToolOutput, UserStatus};

pub(crate) const NAME: &str = "mock_image_generate";

/// The price of one image, in the demo's credits.
const PRICE: u32 = 10;

/// See the module docs.
pub(crate) struct ImageGenerate;

/// The status the first call answers.
pub(crate) fn credits_exhausted() -> UserStatus {
    UserStatus::new("Not enough credits to generate an image")
        .with_code(NEEDS_USER_CODE)
        .with_data(json!({"balance": 0, "price": PRICE}))
}

/// The fake image for `args` (after the user continued).
pub(crate) fn run(args: &Value) -> Value {
    let prompt = non_blank(args, "prompt").unwrap_or_default();
    // FNV-1a of the prompt: a stable, made-up image id.
    let id = prompt.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    json!({
        "imageUrl": format!("https://images.example.com/agw-demo/{id:016x}.png"),
        "prompt": prompt,
        "width": 1024,
        "height": 1024,
        "creditsCharged": PRICE,
    })
}

impl Tool for ImageGenerate {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        meta::description(NAME)
    }

    fn parameters(&self) -> Value {
        meta::parameters(NAME)
    }

    fn after_call_hint(&self) -> &str {
        meta::after_call_hint(NAME)
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        let output =
            if ctx.continued == 0 { ToolOutput::NeedsUser(credits_exhausted()) } else { ToolOutput::Json(run(&args)) };
        Box::pin(async move { Ok(output) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn pauses_first_then_generates_once_continued() {
        let args = json!({"prompt": "a red fox in the snow"});
        let first = ImageGenerate.call(args.clone(), &ToolContext::default()).await.unwrap();
        let ToolOutput::NeedsUser(status) = first else { panic!("{first:?}") };
        assert_eq!(status.code, -1002);
        assert_eq!(status.message, "Not enough credits to generate an image");
        assert_eq!(status.data, json!({"balance": 0, "price": 10}));

        let ctx = ToolContext::default().with_continued(1);
        let Ok(ToolOutput::Json(image)) = ImageGenerate.call(args.clone(), &ctx).await else { panic!() };
        assert_eq!(image["prompt"], "a red fox in the snow");
        assert_eq!((image["width"].as_u64(), image["height"].as_u64()), (Some(1024), Some(1024)));
        assert!(image["imageUrl"].as_str().unwrap().starts_with("https://images.example.com/agw-demo/"));
        assert_eq!(ImageGenerate.call(args, &ctx.with_continued(2)).await.unwrap(), ToolOutput::Json(image));
    }

    #[test]
    fn equal_prompts_give_equal_images() {
        assert_eq!(run(&json!({"prompt": " fox "})), run(&json!({"prompt": "fox"})));
        assert_ne!(run(&json!({"prompt": "fox"}))["imageUrl"], run(&json!({"prompt": "cat"}))["imageUrl"]);
        assert_eq!(run(&json!({}))["prompt"], "");
    }
}
