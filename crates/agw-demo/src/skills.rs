//! How the demo model uses skills: when `_skill_run_script_` is offered and no tool result is in
//! yet, it runs one script of a skill listed in the system prompt's skill catalog (lines
//! `skillId: <id>`), with arguments read from the question; once the result is back it answers
//! from the script's output.
//!
//! It knows the bundled skills' scripts (see `fixtures/skills/*/SKILL.md`):
//! * `math_basic` — a question with one binary operation (`12 * 7`, `what is 3 plus 4`) →
//!   `scripts/calc.py --op <op> --a <a> --b <b>`;
//! * `math_stats` — a statistic of two or more numbers (`mean of 1, 2, 3`) →
//!   `scripts/stats.py --values 1,2,3 --metric mean`;
//! * `text_utils` — anything else → `scripts/text_metrics.py --text <the question>`;
//! * `screenshot` — the smoke test, when it is the only one left → `scripts/demo_echo.py`.
//!
//! A skill is only used when the catalog lists it; other skills are never guessed at.

use serde_json::{Value, json};

use super::tools::{DemoToolCall, results};
use super::{DemoTurn, quote};
use agw_llm::request::{ChatMessage, ChatRequest};

/// The tool that runs skill scripts.
pub(super) use agw_skills::SKILL_RUN_SCRIPT as RUN_SCRIPT;
/// Catalog line naming a skill (docs/contract/modes.md §6.2).
const CATALOG_ID_PREFIX: &str = "skillId:";

/// The skill script to run now, if any: `_skill_run_script_` offered, no tool result since the
/// user spoke, and a catalogued skill that fits the question.
pub(super) fn next_call(request: &ChatRequest, question: &str) -> Option<DemoToolCall> {
    let offered = request.tool_choice.is_some() && request.tools.iter().any(|t| t.name == RUN_SCRIPT);
    if !offered || !results(request).is_empty() {
        return None;
    }
    let catalog = catalog_ids(request);
    let arguments = arguments_for(question, &catalog)?;
    let calls_so_far: usize = request
        .messages
        .iter()
        .map(|m| match m {
            ChatMessage::Assistant { tool_calls, .. } => tool_calls.len(),
            _ => 0,
        })
        .sum();
    Some(DemoToolCall {
        id: format!("call_demo_{}", calls_so_far + 1),
        name: RUN_SCRIPT.to_owned(),
        arguments: arguments.to_string(),
    })
}

/// The skill ids of the system prompt's catalog, in order.
fn catalog_ids(request: &ChatRequest) -> Vec<String> {
    request
        .messages
        .iter()
        .filter_map(|m| match m {
            ChatMessage::System { content } => Some(content.as_str()),
            _ => None,
        })
        .flat_map(str::lines)
        .filter_map(|line| line.trim().strip_prefix(CATALOG_ID_PREFIX))
        .map(|id| id.trim().to_lowercase())
        .filter(|id| !id.is_empty())
        .fold(Vec::new(), |mut ids, id| {
            if !ids.contains(&id) {
                ids.push(id);
            }
            ids
        })
}

/// `_skill_run_script_` arguments for the question, using only skills in `catalog`.
fn arguments_for(question: &str, catalog: &[String]) -> Option<Value> {
    let has = |id: &str| catalog.iter().any(|c| c == id);
    let tokens = tokenize(question);
    // An explicit operation wins over a statistic word (`12 * 7 in total`).
    if has("math_basic")
        && let Some((op, a, b)) = operation(&tokens)
    {
        return Some(json!({
            "skill": "math_basic",
            "script": "scripts/calc.py",
            "args": ["--op", op, "--a", a, "--b", b],
        }));
    }
    if has("math_stats")
        && let Some((metric, values)) = statistic(&tokens)
    {
        return Some(json!({
            "skill": "math_stats",
            "script": "scripts/stats.py",
            "args": ["--values", values.join(","), "--metric", metric],
        }));
    }
    if has("text_utils") {
        return Some(json!({
            "skill": "text_utils",
            "script": "scripts/text_metrics.py",
            "args": ["--text", question],
        }));
    }
    if has("screenshot") {
        let words: Vec<&str> = question.split_whitespace().take(8).collect();
        return Some(json!({"skill": "screenshot", "script": "scripts/demo_echo.py", "args": words}));
    }
    None
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Number(String),
    /// An operator symbol, or a lower-cased word.
    Word(String),
}

/// Numbers (`12`, `-3.5`, `.5`), operator symbols and lower-cased words; everything else separates.
fn tokenize(question: &str) -> Vec<Token> {
    let chars: Vec<char> = question.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let digit_at = |j: usize| chars.get(j).is_some_and(char::is_ascii_digit);
        // `10-4` and `10 - 4` subtract; `1, -2` and `of -2` are negative numbers.
        let after_number = chars[..i].iter().rev().find(|c| !c.is_whitespace()).is_some_and(|p| p.is_ascii_digit());
        let starts_number = c.is_ascii_digit()
            || (c == '.' && digit_at(i + 1))
            || (c == '-' && !after_number && (digit_at(i + 1) || (chars.get(i + 1) == Some(&'.') && digit_at(i + 2))));
        if starts_number {
            let start = i;
            i += 1;
            let mut seen_point = c == '.';
            while i < chars.len() && (chars[i].is_ascii_digit() || (chars[i] == '.' && !seen_point && digit_at(i + 1)))
            {
                seen_point |= chars[i] == '.';
                i += 1;
            }
            tokens.push(Token::Number(chars[start..i].iter().collect()));
        } else if c.is_alphabetic() {
            let start = i;
            while i < chars.len() && chars[i].is_alphabetic() {
                i += 1;
            }
            tokens.push(Token::Word(chars[start..i].iter().collect::<String>().to_lowercase()));
        } else if c == '*' && chars.get(i + 1) == Some(&'*') {
            tokens.push(Token::Word("^".into()));
            i += 2;
        } else {
            if "+-*/^%×÷".contains(c) {
                tokens.push(Token::Word(c.to_string()));
            }
            i += 1;
        }
    }
    tokens
}

/// The `calc.py` operation named by a symbol or word.
fn operator(word: &str) -> Option<&'static str> {
    Some(match word {
        "+" | "plus" | "add" | "added" => "add",
        "-" | "minus" | "subtract" | "less" => "sub",
        "*" | "×" | "x" | "times" | "multiplied" | "multiply" => "mul",
        "/" | "÷" | "over" | "divided" | "divide" => "div",
        "^" | "power" | "pow" => "pow",
        "%" | "mod" | "modulo" => "mod",
        _ => return None,
    })
}

/// Words allowed around an operator word (`multiplied by`, `to the power of`, `raised to`).
const FILLER: [&str; 5] = ["by", "to", "the", "of", "raised"];

/// The first `<number> <operator> <number>` of the question.
fn operation(tokens: &[Token]) -> Option<(&'static str, String, String)> {
    let is_filler = |t: &Token| matches!(t, Token::Word(w) if FILLER.contains(&w.as_str()));
    for (i, token) in tokens.iter().enumerate() {
        let Token::Number(a) = token else { continue };
        let mut j = i + 1;
        while tokens.get(j).is_some_and(is_filler) {
            j += 1;
        }
        let Some(Token::Word(word)) = tokens.get(j) else { continue };
        let Some(op) = operator(word) else { continue };
        let mut k = j + 1;
        while tokens.get(k).is_some_and(is_filler) {
            k += 1;
        }
        if let Some(Token::Number(b)) = tokens.get(k) {
            return Some((op, a.clone(), b.clone()));
        }
    }
    None
}

/// `(metric, values)` when the question asks for a statistic of two or more numbers.
fn statistic(tokens: &[Token]) -> Option<(&'static str, Vec<String>)> {
    let words: Vec<&str> = tokens
        .iter()
        .filter_map(|t| match t {
            Token::Word(w) => Some(w.as_str()),
            Token::Number(_) => None,
        })
        .collect();
    let said = |w: &str| words.contains(&w);
    let metric = if said("mean") || said("average") || said("avg") {
        "mean"
    } else if said("median") {
        "median"
    } else if said("mode") {
        "mode"
    } else if said("stdev") || said("deviation") {
        "stdev"
    } else if said("statistics") || said("stats") || said("summary") || said("summarize") {
        "summary"
    } else if said("minimum") || said("smallest") || said("min") {
        "min"
    } else if said("maximum") || said("largest") || said("max") {
        "max"
    } else if said("sum") || said("total") {
        "sum"
    } else {
        return None;
    };
    let values: Vec<String> = tokens
        .iter()
        .filter_map(|t| match t {
            Token::Number(n) => Some(n.clone()),
            Token::Word(_) => None,
        })
        .collect();
    (values.len() >= 2).then_some((metric, values))
}

/// The answer once skill script results are in (and only those): what each script said.
pub(super) fn answer(request: &ChatRequest, question: &str) -> Option<DemoTurn> {
    let results = results(request);
    if results.is_empty() || results.iter().any(|(name, _)| *name != RUN_SCRIPT) {
        return None;
    }
    let lines: Vec<String> = results.iter().map(|(_, result)| describe(result)).collect();
    let content =
        format!("{}\n\n(Offline demo model: this answer comes from the skill script's output.)", lines.join("\n\n"));
    let reasoning = request
        .reasoning
        .enabled
        .then(|| format!("The skill script answered \"{question}\"; I will report its result."));
    Some(DemoTurn { reasoning, content, tool_call: None, finish_reason: "stop" })
}

/// One sentence about one `_skill_run_script_` result.
fn describe(result: &str) -> String {
    let Ok(outer) = serde_json::from_str::<Value>(result) else {
        return format!("The skill script returned: {}", quote(result));
    };
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
    let skill = text(&outer, "skill");
    if outer.get("timedOut") == Some(&Value::Bool(true)) {
        return format!("The `{skill}` script did not finish in time, so I have no result.");
    }
    let stdout = text(&outer, "stdout");
    let Ok(out) = serde_json::from_str::<Value>(stdout.trim()) else {
        let error = text(&outer, "error");
        return if !error.is_empty() {
            format!("The skill script could not run: {error}")
        } else if !stdout.trim().is_empty() {
            format!("The `{skill}` script printed: {}", quote(&stdout))
        } else {
            format!("The `{skill}` script failed: {}", quote(&text(&outer, "stderr")))
        };
    };
    if out.get("ok") != Some(&Value::Bool(true)) {
        return format!("The `{skill}` script reported an error: {}", text(&out, "error"));
    }
    let num = |key: &str| out.get(key).map(Value::to_string).unwrap_or_default();
    match skill.as_str() {
        "math_basic" => {
            let symbol = match text(&out, "op").as_str() {
                "add" => "+",
                "sub" => "−",
                "mul" => "×",
                "div" => "÷",
                "pow" => "^",
                "mod" => "mod",
                other => return format!("{other}({}, {}) = {}.", num("a"), num("b"), num("result")),
            };
            format!("{} {symbol} {} = {}.", num("a"), num("b"), num("result"))
        }
        "math_stats" => match out.get("result") {
            Some(Value::Object(all)) => {
                let parts: Vec<String> = all.iter().map(|(k, v)| format!("{k} {v}")).collect();
                format!("Statistics of the numbers: {}.", parts.join(", "))
            }
            _ => format!("The {} of the {} numbers is {}.", text(&out, "metric"), num("count"), num("result")),
        },
        "text_utils" => {
            format!("Your text has {} characters, {} words and {} line(s).", num("chars"), num("words"), num("lines"))
        }
        _ => format!("The `{skill}` script answered: {}", quote(stdout.trim())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agw_llm::request::{ReasoningSetting, ToolChoice, ToolSpec};

    const CATALOG: &str = "Available skills:\n\nskillId: math_basic\nname: math_basic\ndescription: d\n\n---\n\n\
                           skillId: math_stats\n\n---\n\nskillId: text_utils";

    fn request(system: &str, messages: Vec<ChatMessage>) -> ChatRequest {
        let mut all = vec![ChatMessage::System { content: system.into() }];
        all.extend(messages);
        ChatRequest {
            provider_key: "demo".into(),
            model: "agw-demo".into(),
            messages: all,
            tools: vec![ToolSpec {
                name: RUN_SCRIPT.into(),
                description: "run a skill script".into(),
                parameters: json!({"type":"object","properties":{"skill":{"type":"string"}}}),
            }],
            tool_choice: Some(ToolChoice::Auto),
            reasoning: ReasoningSetting::default(),
            temperature: None,
            top_p: None,
            max_tokens: None,
            prompt_cache: Default::default(),
            response_format: None,
        }
    }

    fn args_for(system: &str, question: &str) -> Option<Value> {
        let req = request(system, vec![ChatMessage::user(question)]);
        next_call(&req, question).map(|c| serde_json::from_str(&c.arguments).unwrap())
    }

    #[test]
    fn arithmetic_runs_calc() {
        let calc = |op: &str, a: &str, b: &str| json!({"skill":"math_basic","script":"scripts/calc.py","args":["--op",op,"--a",a,"--b",b]});
        assert_eq!(args_for(CATALOG, "What is 12 * 7?"), Some(calc("mul", "12", "7")));
        assert_eq!(args_for(CATALOG, "what is 3 plus 4"), Some(calc("add", "3", "4")));
        assert_eq!(args_for(CATALOG, "-3.5 minus 2"), Some(calc("sub", "-3.5", "2")));
        assert_eq!(args_for(CATALOG, "10-4"), Some(calc("sub", "10", "4")));
        assert_eq!(args_for(CATALOG, "2 to the power of 10"), Some(calc("pow", "2", "10")));
        assert_eq!(args_for(CATALOG, "9 divided by 3"), Some(calc("div", "9", "3")));
        assert_eq!(args_for(CATALOG, "2 ** 8"), Some(calc("pow", "2", "8")));
        assert_eq!(args_for(CATALOG, "17 mod 5"), Some(calc("mod", "17", "5")));
        assert_eq!(args_for(CATALOG, "6 × 7"), Some(calc("mul", "6", "7")));
    }

    #[test]
    fn statistics_run_stats() {
        let stats = |values: &str, metric: &str| json!({"skill":"math_stats","script":"scripts/stats.py","args":["--values",values,"--metric",metric]});
        assert_eq!(args_for(CATALOG, "mean of 1, 2, 3"), Some(stats("1,2,3", "mean")));
        assert_eq!(args_for(CATALOG, "What is the median of 4 1 7 2?"), Some(stats("4,1,7,2", "median")));
        assert_eq!(args_for(CATALOG, "average of 2.5 and -1"), Some(stats("2.5,-1", "mean")));
        assert_eq!(args_for(CATALOG, "sum of 3, -4, 5"), Some(stats("3,-4,5", "sum")));
        assert_eq!(args_for(CATALOG, "12 * 7 in total").unwrap()["skill"], "math_basic");
    }

    #[test]
    fn anything_else_measures_the_text() {
        assert_eq!(
            args_for(CATALOG, "How long is this sentence?"),
            Some(
                json!({"skill":"text_utils","script":"scripts/text_metrics.py","args":["--text","How long is this sentence?"]})
            )
        );
    }

    #[test]
    fn only_catalogued_skills_are_used() {
        let only_text = "skillId: text_utils";
        assert_eq!(args_for(only_text, "12 * 7").unwrap()["skill"], "text_utils");
        assert_eq!(args_for("skillId: math_basic", "mean of 1, 2"), None);
        assert_eq!(args_for("no catalog here", "12 * 7"), None);
        assert_eq!(args_for("skillId: screenshot", "hello there").unwrap()["script"], "scripts/demo_echo.py");
    }

    #[test]
    fn no_call_once_a_result_is_in_or_when_the_tool_is_not_offered() {
        let req = request(
            CATALOG,
            vec![
                ChatMessage::user("12 * 7"),
                ChatMessage::Tool { tool_call_id: "c".into(), name: RUN_SCRIPT.into(), content: "{}".into() },
            ],
        );
        assert!(next_call(&req, "12 * 7").is_none());
        let mut req = request(CATALOG, vec![ChatMessage::user("12 * 7")]);
        req.tool_choice = None;
        assert!(next_call(&req, "12 * 7").is_none());
    }

    #[test]
    fn answers_from_the_script_output() {
        let result = |skill: &str, stdout: &str| {
            json!({"tool": RUN_SCRIPT, "skill": skill, "ok": true, "timedOut": false, "exitCode": 0, "stdout": stdout, "stderr": ""})
                .to_string()
        };
        let answer_to = |content: String| {
            let req = request(
                CATALOG,
                vec![
                    ChatMessage::user("q"),
                    ChatMessage::Tool { tool_call_id: "c".into(), name: RUN_SCRIPT.into(), content },
                ],
            );
            answer(&req, "q").unwrap().content
        };
        let content =
            answer_to(result("math_basic", "{\"ok\": true, \"op\": \"mul\", \"a\": 12, \"b\": 7, \"result\": 84}\n"));
        assert!(content.starts_with("12 × 7 = 84."), "{content}");
        let content =
            answer_to(result("math_stats", "{\"ok\": true, \"metric\": \"mean\", \"count\": 3, \"result\": 2}"));
        assert!(content.starts_with("The mean of the 3 numbers is 2."), "{content}");
        let content = answer_to(result(
            "text_utils",
            "{\"ok\": true, \"chars\": 11, \"words\": 2, \"lines\": 1, \"normalizedText\": \"hello world\"}",
        ));
        assert!(content.starts_with("Your text has 11 characters, 2 words and 1 line(s)."), "{content}");
        let content = answer_to(result("math_basic", "{\"ok\": false, \"error\": \"division by zero\"}"));
        assert!(content.contains("reported an error: division by zero"), "{content}");
        let refused = json!({"tool": RUN_SCRIPT, "ok": false, "error": "Illegal script path"}).to_string();
        assert!(answer_to(refused).starts_with("The skill script could not run: Illegal script path"));
    }
}
