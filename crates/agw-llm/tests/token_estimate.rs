//! agw's token estimate against real tokenizers: it decides when a run compacts, so it must stay
//! within a known band of what providers count, for every kind of text a chat holds.

use agw_llm::tokens::estimate_text;

const ENGLISH: &str = "The gateway loads agent definitions from JSON files, runs them against OpenAI-compatible \
and Anthropic providers with native function calling, and streams every step to the client as Server-Sent \
Events. When a conversation grows past what the model can read, older tool outputs are pruned first, and \
only then are the older turns summarised by the model itself, so that the run keeps working instead of \
failing at the provider with a context-length error. Every threshold is configurable per agent.";

const CODE: &str = r#"pub fn estimate_text(text: &str) -> u64 {
    let mut twentieths: u64 = 0;
    for c in text.chars() {
        twentieths += match c {
            c if c.is_ascii_alphanumeric() => 5,
            c if c.is_ascii_whitespace() => 1,
            _ => 10,
        };
    }
    twentieths.div_ceil(20)
}
fn main() { println!("{}", estimate_text("hello world")); }"#;

const JSON: &str = r#"{"city":"Shanghai","timezone":"UTC+8","date":"2026-02-13","weekday":"Friday","time":"10:15:30","iso":"2026-02-13T10:15:30.123456+08:00","source":"system-clock","forecast":[{"day":"Sat","high":12,"low":4,"condition":"cloudy"},{"day":"Sun","high":9,"low":2,"condition":"light rain"},{"day":"Mon","high":11,"low":3,"condition":"sunny"}],"ok":true}"#;

const CHINESE: &str = "网关从 JSON 文件加载智能体定义，使用原生函数调用在兼容 OpenAI 的提供方和 Anthropic 上运行它们，\
并以服务器发送事件的形式把每一步实时推送给客户端。当对话长度超过模型能够读取的范围时，先裁剪较早的工具输出，\
然后才由模型本身对较早的轮次进行总结，这样运行就能继续，而不是在提供方那里因为上下文过长而失败。";

const JAPANESE: &str = "ゲートウェイはエージェントの定義を読み込み、各ステップをクライアントにストリーミングします。\
会話が長くなりすぎると、古いツール出力から順に整理し、それでも足りなければ古いやり取りを要約します。";

fn check(name: &str, text: &str, bpe: &tiktoken_rs::CoreBPE, band: f64) -> (u64, usize) {
    let real = bpe.encode_with_special_tokens(text).len();
    let estimate = estimate_text(text);
    let error = (estimate as f64 - real as f64) / real as f64;
    assert!(error.abs() <= band, "{name}: estimate {estimate}, real {real} ({:+.0} %)", error * 100.0);
    (estimate, real)
}

const SAMPLES: [(&str, &str); 5] =
    [("english", ENGLISH), ("code", CODE), ("json", JSON), ("chinese", CHINESE), ("japanese", JAPANESE)];

#[test]
fn the_estimate_stays_within_30_percent_of_o200k_and_cl100k_for_prose_code_json_and_cjk() {
    for bpe in [tiktoken_rs::o200k_base().expect("o200k"), tiktoken_rs::cl100k_base().expect("cl100k")] {
        for (name, text) in SAMPLES {
            check(name, text, &bpe, 0.30);
        }
    }
}

#[test]
fn cjk_is_not_estimated_like_latin_bytes() {
    // A byte-length heuristic (bytes / 4) would see three times fewer tokens than there are.
    let bpe = tiktoken_rs::o200k_base().expect("o200k vocabulary");
    let (estimate, real) = check("chinese", CHINESE, &bpe, 0.30);
    let by_bytes = CHINESE.len() as u64 / 4;
    assert!(by_bytes.abs_diff(real as u64) > estimate.abs_diff(real as u64));
}
