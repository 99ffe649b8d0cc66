use futures::StreamExt;
use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::{DeltaStream, LlmDelta, LlmError, ReasoningSetting};

/// What an answer amounted to: its content, and its calls as (name, arguments).
#[derive(Debug, Default, PartialEq, Eq)]
struct Parsed {
    content: String,
    calls: Vec<(String, String)>,
}

/// Feeds `pieces` one by one; also checks the per-piece rules (at most one content delta, and
/// it comes first) and returns the deltas of each piece.
fn parse_pieces(pieces: &[&str]) -> (Parsed, Vec<Vec<LlmDelta>>) {
    let mut parser = CallParser::new("call_");
    let mut per_piece = Vec::new();
    for piece in pieces {
        let mut out = Vec::new();
        parser.push(piece, &mut out);
        per_piece.push(out);
    }
    let mut out = Vec::new();
    parser.finish(&mut out);
    per_piece.push(out);
    let mut parsed = Parsed::default();
    let mut ids: Vec<String> = Vec::new();
    for out in &per_piece {
        let contents = out.iter().filter(|d| matches!(d, LlmDelta::Content { .. })).count();
        assert!(contents <= 1, "one piece, one content delta at most: {out:?}");
        if contents == 1 {
            assert!(matches!(out[0], LlmDelta::Content { .. }), "content comes first: {out:?}");
        }
        for delta in out {
            match delta {
                LlmDelta::Content { text } => {
                    assert!(!text.is_empty());
                    parsed.content.push_str(text);
                }
                LlmDelta::ToolCall(fragment) => {
                    let id = fragment.id.clone().expect("every fragment names its call");
                    let at = match ids.iter().position(|known| *known == id) {
                        Some(at) => at,
                        None => {
                            ids.push(id);
                            parsed.calls.push((
                                fragment.name.clone().expect("a call's first fragment names it"),
                                String::new(),
                            ));
                            parsed.calls.len() - 1
                        }
                    };
                    parsed.calls[at].1.push_str(&fragment.arguments);
                }
                other => panic!("the parser gives out content and calls only: {other:?}"),
            }
        }
    }
    (parsed, per_piece)
}

fn parse(answer: &str) -> Parsed {
    parse_pieces(&[answer]).0
}

fn calls(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(n, a)| (n.to_string(), a.to_string())).collect()
}

/// What a Qwen2.5 / Llama-3 sized model writes with agw's prompt, in many shapes.
const ANSWERS: &[&str] = &[
    "Let me check the weather.\n✿FUNCTION✿: get_weather\n✿ARGS✿: {\"city\": \"Tokyo\"}\n",
    "✿FUNCTION✿: get_weather\n✿ARGS✿: {\"city\": \"東京\", \"note\": \"晴れ ☀️ \\\"quoted\\\" {not} [a] ✿ bracket\"}\n✿RESULT✿: made up",
    "I'll call two tools.\n✿FUNCTION✿: get_weather\n✿ARGS✿: {\"city\": \"Paris\"}\n✿FUNCTION✿: city_time\n✿ARGS✿: {\"city\": \"Paris\", \"opts\": {\"tz\": [1, {\"x\": \"}]\"}]}}\n",
    "✿RETURN✿: The weather in Tokyo is 21 °C — sunny ✿ and warm.",
    "Plain answer with a flower ✿ and ✿FUNC-like text ✿ARG but no call.",
    "✿FUNCTION✿: get_weather\n✿ARGS✿: {city: Tokyo}\n",
    "✿FUNCTION✿: get_weather\n✿ARGS✿: ```json\n{\"city\": \"Oslo\"}\n```\nDone.",
    "✿FUNCTION✿: get_time\n",
    "✿ARGS✿: {\"city\": \"Rome\"}",
    "Calling.\n✿FUNCTION✿: get_weather\n✿ARGS✿: {\"city\": \"Rome\"\n✿RETURN✿: It is warm.",
];

#[test]
fn plain_text_passes_unchanged_and_at_once() {
    let (parsed, per_piece) = parse_pieces(&["Hello", " wörld 🌍", "\n\n", "  "]);
    assert_eq!(parsed, Parsed { content: "Hello wörld 🌍\n\n  ".into(), calls: vec![] });
    for (piece, out) in ["Hello", " wörld 🌍", "\n\n", "  "].iter().zip(&per_piece) {
        assert_eq!(out, &vec![LlmDelta::Content { text: piece.to_string() }], "released in the same push");
    }
}

#[test]
fn only_a_tail_that_can_still_become_a_marker_waits() {
    let (_, per_piece) = parse_pieces(&["Sunny ✿", "FUNC", "TIONAL day ✿", "x"]);
    assert_eq!(per_piece[0], vec![LlmDelta::Content { text: "Sunny ".into() }], "`✿` may start a marker");
    assert_eq!(per_piece[1], vec![], "`✿FUNC` may still become `✿FUNCTION✿`");
    assert_eq!(per_piece[2], vec![LlmDelta::Content { text: "✿FUNCTIONAL day ".into() }], "it did not");
    assert_eq!(per_piece[3], vec![LlmDelta::Content { text: "✿x".into() }]);
    // A `✿` that cannot begin a marker is released at once.
    let (_, per_piece) = parse_pieces(&["a ✿ b ✿Z", "c"]);
    assert_eq!(per_piece[0], vec![LlmDelta::Content { text: "a ✿ b ✿Z".into() }]);
}

#[test]
fn a_call_with_text_before_it() {
    let parsed = parse(ANSWERS[0]);
    assert_eq!(parsed.content, "Let me check the weather.\n");
    assert_eq!(parsed.calls, calls(&[("get_weather", "{\"city\": \"Tokyo\"}")]));
}

#[test]
fn unicode_and_brackets_inside_strings_do_not_end_the_arguments() {
    let parsed = parse(ANSWERS[1]);
    assert_eq!(parsed.content, "");
    let args = &parsed.calls[0].1;
    let value: serde_json::Value = serde_json::from_str(args).unwrap();
    assert_eq!(value["note"], "晴れ ☀️ \"quoted\" {not} [a] ✿ bracket");
    assert_eq!(value["city"], "東京");
}

#[test]
fn several_calls_and_nested_arguments() {
    let parsed = parse(ANSWERS[2]);
    assert_eq!(parsed.content, "I'll call two tools.\n");
    assert_eq!(
        parsed.calls,
        calls(&[
            ("get_weather", "{\"city\": \"Paris\"}"),
            ("city_time", "{\"city\": \"Paris\", \"opts\": {\"tz\": [1, {\"x\": \"}]\"}]}}"),
        ])
    );
    assert!(check_call("city_time", &parsed.calls[1].1).is_ok());
}

#[test]
fn text_after_a_call_is_dropped() {
    let parsed = parse("✿FUNCTION✿: a\n✿ARGS✿: {}\nNow I wait for the result. {\"x\": 1}\n\n");
    assert_eq!(parsed, Parsed { content: String::new(), calls: calls(&[("a", "{}")]) });
}

#[test]
fn result_ends_the_answer() {
    let mut parser = CallParser::new("c");
    let mut out = Vec::new();
    parser.push("✿FUNCTION✿: a\n✿ARGS✿: {\"q\": 1}\n✿RESULT✿: {\"made\": \"up\"}", &mut out);
    assert!(parser.ended());
    parser.push("\n✿RETURN✿: the answer\n✿FUNCTION✿: b\n✿ARGS✿: {}", &mut out);
    parser.finish(&mut out);
    assert_eq!(parser.calls(), 1, "nothing after the made-up result is read");
    // A result made up without any call ends the answer too.
    let parsed = parse("Sure.\n✿RESULT✿: 42\nSo it is 42.");
    assert_eq!(parsed, Parsed { content: "Sure.\n".into(), calls: vec![] });
}

#[test]
fn return_before_any_call_is_dropped_after_one_it_ends_the_answer() {
    assert_eq!(parse(ANSWERS[3]).content, "The weather in Tokyo is 21 °C — sunny ✿ and warm.");
    let parsed = parse(ANSWERS[9]);
    assert_eq!(parsed.content, "Calling.\n");
    assert_eq!(parsed.calls, calls(&[("get_weather", "{\"city\": \"Rome\"\n")]));
    assert!(matches!(check_call("get_weather", &parsed.calls[0].1), Err(CallProblem::NotJson { .. })));
}

#[test]
fn marker_lookalikes_are_text() {
    assert_eq!(parse(ANSWERS[4]), Parsed { content: ANSWERS[4].into(), calls: vec![] });
}

#[test]
fn malformed_calls_are_calls_with_a_problem() {
    let parsed = parse(ANSWERS[5]);
    assert_eq!(parsed.calls, calls(&[("get_weather", "{city: Tokyo}")]));
    assert!(matches!(check_call("get_weather", "{city: Tokyo}"), Err(CallProblem::NotJson { .. })));

    let parsed = parse(ANSWERS[8]);
    assert_eq!(parsed.calls, calls(&[(NO_NAME, "{\"city\": \"Rome\"}")]), "arguments without a name");
    assert_eq!(check_call(NO_NAME, "{}"), Err(CallProblem::NoName));

    let parsed = parse("✿FUNCTION✿: get_weather\n✿ARGS✿: city=Tokyo\nthanks");
    assert_eq!(parsed.calls, calls(&[("get_weather", "city=Tokyo")]), "non-JSON arguments end with their line");
    let parsed = parse("✿FUNCTION✿: get_weather\n✿ARGS✿: [\"Tokyo\"]");
    assert_eq!(check_call("get_weather", &parsed.calls[0].1), Err(CallProblem::NotObject { found: "an array" }));
    let parsed = parse("✿FUNCTION✿: \n✿ARGS✿: {}");
    assert_eq!(parsed.calls[0].0, NO_NAME, "an empty name");
    let message = CallProblem::NotJson { reason: "x".into() }.to_string();
    assert!(message.contains("✿ARGS✿") && message.contains("JSON object"), "{message}");
}

#[test]
fn lenient_shapes_small_models_write() {
    assert_eq!(parse(ANSWERS[6]).calls, calls(&[("get_weather", "{\"city\": \"Oslo\"}")]), "a code fence");
    assert_eq!(parse(ANSWERS[7]).calls, calls(&[("get_time", "")]), "no arguments line");
    assert!(check_call("get_time", "").is_ok());
    assert_eq!(
        parse("✿FUNCTION✿: `get_weather` {\"city\": \"Nice\"}").calls,
        calls(&[("get_weather", "{\"city\": \"Nice\"}")]),
        "arguments on the name's line, a quoted name"
    );
    assert_eq!(
        parse("✿FUNCTION✿:get_weather\n{\"city\": \"Lyon\"}").calls,
        calls(&[("get_weather", "{\"city\": \"Lyon\"}")]),
        "arguments on the line after the name, without ✿ARGS✿"
    );
    assert_eq!(
        parse("✿FUNCTION✿: get_weather\n✿ARGS✿: {\"city\": \"A\"}\n✿ARGS✿: {\"city\": \"B\"}").calls,
        calls(&[("get_weather", "{\"city\": \"A\"}"), ("get_weather", "{\"city\": \"B\"}")]),
        "a second ✿ARGS✿ calls the same tool again"
    );
    let long = format!("✿FUNCTION✿: {}\n", "x".repeat(10_000));
    assert!(parse(&long).calls[0].0.len() <= 256, "a name is bounded");
}

#[test]
fn call_ids_number_the_calls_of_the_answer() {
    let (_, per_piece) = parse_pieces(&[ANSWERS[2]]);
    let ids: Vec<String> = per_piece
        .concat()
        .into_iter()
        .filter_map(|d| match d {
            LlmDelta::ToolCall(f) if f.name.is_some() => f.id,
            _ => None,
        })
        .collect();
    assert_eq!(ids, ["call_1", "call_2"]);
}

/// Every way of cutting an answer in two, and in three, parses to the same content and calls:
/// markers split anywhere (inside `✿`'s bytes excepted — upstream text is always whole
/// characters) are found, and nothing else moves.
#[test]
fn every_split_position_parses_the_same() {
    for answer in ANSWERS {
        let whole = parse(answer);
        let cuts: Vec<usize> = (1..answer.len()).filter(|&i| answer.is_char_boundary(i)).collect();
        for &i in &cuts {
            let (parsed, _) = parse_pieces(&[&answer[..i], &answer[i..]]);
            assert_eq!(parsed, whole, "{answer:?} cut at {i}");
        }
        for (n, &i) in cuts.iter().enumerate() {
            for &j in &cuts[n + 1..] {
                let (parsed, _) = parse_pieces(&[&answer[..i], &answer[i..j], &answer[j..]]);
                assert_eq!(parsed, whole, "{answer:?} cut at {i} and {j}");
            }
        }
    }
}

/// Character by character, a marker's characters never reach the content, and the parser
/// never holds back more than a marker's length minus one.
#[test]
fn one_character_at_a_time() {
    for answer in ANSWERS {
        let pieces: Vec<String> = answer.chars().map(String::from).collect();
        let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
        let (parsed, _) = parse_pieces(&refs);
        assert_eq!(parsed, parse(answer), "{answer:?}");
        let mut parser = CallParser::new("c");
        for piece in &refs {
            parser.push(piece, &mut Vec::new());
            // `✿FUNCTION` at most: upstream text is whole characters.
            assert!(parser.held_len() <= FUNCTION.len() - '✿'.len_utf8(), "held {} bytes", parser.held_len());
        }
    }
}

proptest! {
    /// Random answers of text, calls and stray `✿`s, cut at random points: the same result as
    /// the whole answer.
    #[test]
    fn random_cuts_parse_the_same(
        parts in proptest::collection::vec(
            prop_oneof![
                "[a-z ✿\n{}\"]{0,12}",
                Just(FUNCTION.to_string()),
                Just(ARGS.to_string()),
                Just(": get_weather\n".to_string()),
                Just(" {\"a\": [\"}✿\", {\"b\": \"\\\"\"}]}\n".to_string()),
                Just("✿FUNC".to_string()),
            ],
            0..10,
        ),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..6),
    ) {
        let answer: String = parts.concat();
        let whole = parse(&answer);
        let bounds: Vec<usize> = (0..=answer.len()).filter(|&i| answer.is_char_boundary(i)).collect();
        let mut at: Vec<usize> = cuts.iter().map(|c| bounds[c.index(bounds.len())]).collect();
        at.sort_unstable();
        at.dedup();
        let mut pieces = Vec::new();
        let mut from = 0;
        for cut in at {
            pieces.push(&answer[from..cut]);
            from = cut;
        }
        pieces.push(&answer[from..]);
        let (parsed, _) = parse_pieces(&pieces);
        prop_assert_eq!(parsed, whole);
    }
}

fn weather_tool() -> ToolSpec {
    ToolSpec {
        name: "get_weather".into(),
        description: "Weather of a city.".into(),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    }
}

fn request(messages: Vec<ChatMessage>, tools: Vec<ToolSpec>, choice: Option<ToolChoice>) -> ChatRequest {
    ChatRequest {
        provider_key: "local".into(),
        model: "qwen2.5:1.5b".into(),
        messages,
        tools,
        tool_choice: choice,
        reasoning: ReasoningSetting::default(),
        temperature: None,
        top_p: None,
        max_tokens: None,
        prompt_cache: Default::default(),
        response_format: None,
    }
}

fn text_of(message: &ChatMessage) -> (&'static str, &str) {
    match message {
        ChatMessage::System { content } => ("system", content),
        ChatMessage::User { content, .. } => ("user", content),
        ChatMessage::Assistant { content, tool_calls } => {
            assert!(tool_calls.is_empty(), "no native calls are left");
            ("assistant", content)
        }
        ChatMessage::Tool { .. } => panic!("no tool role is left"),
    }
}

#[test]
fn the_tools_go_into_the_system_prompt() {
    let other = ToolSpec { name: "city_time".into(), description: String::new(), parameters: serde_json::Value::Null };
    let sent = prompt_request(request(
        vec![ChatMessage::System { content: "You are helpful.".into() }, ChatMessage::user("Weather?")],
        vec![weather_tool(), other],
        Some(ToolChoice::Auto),
    ));
    assert!(sent.tools.is_empty() && sent.tool_choice.is_none());
    let (role, system) = text_of(&sent.messages[0]);
    assert_eq!(role, "system");
    assert!(system.starts_with("You are helpful.\n\n# Tools\n"), "{system}");
    let time = system.find("## city_time").unwrap();
    let weather = system.find("## get_weather\nWeather of a city.\nArguments: {\"type\":\"object\"").unwrap();
    assert!(time < weather, "sorted by name");
    assert!(system.contains("## city_time\nArguments: {\"type\":\"object\",\"properties\":{}}"), "{system}");
    assert!(system.contains("✿FUNCTION✿: the tool's name, one of [city_time, get_weather]\n✿ARGS✿: "), "{system}");
    assert!(system.contains("✿RESULT✿: what the tool returned"));
    assert!(!system.contains("must call"), "AUTO adds no instruction");
    assert_eq!(text_of(&sent.messages[1]), ("user", "Weather?"));

    // No system message: one is made; a required choice becomes an instruction.
    let sent =
        prompt_request(request(vec![ChatMessage::user("Plan it.")], vec![weather_tool()], Some(ToolChoice::Required)));
    let (role, system) = text_of(&sent.messages[0]);
    assert_eq!(role, "system");
    assert!(system.starts_with("# Tools\n") && system.ends_with("In this reply you must call the tool get_weather."));
    let sent = prompt_request(request(
        vec![ChatMessage::user("x")],
        vec![weather_tool(), ToolSpec { name: "b".into(), ..weather_tool() }],
        Some(ToolChoice::Required),
    ));
    assert!(text_of(&sent.messages[0]).1.ends_with("In this reply you must call at least one tool."));
}

#[test]
fn the_transcript_becomes_text_in_the_same_format() {
    let call = |id: &str, args: &str| ToolCallMessage {
        id: id.into(),
        call_type: "function".into(),
        name: "get_weather".into(),
        arguments: args.into(),
    };
    let messages = vec![
        ChatMessage::System { content: "Be brief.".into() },
        ChatMessage::user("Weather in Tokyo and Paris?"),
        ChatMessage::Assistant { content: "Checking.".into(), tool_calls: vec![] },
        ChatMessage::Assistant { content: String::new(), tool_calls: vec![call("c1", "{\"city\":\"Tokyo\"}")] },
        ChatMessage::Tool { tool_call_id: "c1".into(), name: "get_weather".into(), content: "{\"temp\":21}".into() },
        ChatMessage::Assistant { content: String::new(), tool_calls: vec![call("c2", "{\"city\":\"Paris\"}")] },
        ChatMessage::Tool { tool_call_id: "c2".into(), name: "get_weather".into(), content: "{\"temp\":17}".into() },
        ChatMessage::user("And now?"),
    ];
    let sent = prompt_request(request(messages.clone(), vec![weather_tool()], Some(ToolChoice::Auto)));
    let texts: Vec<(&str, &str)> = sent.messages.iter().map(text_of).collect();
    assert_eq!(texts[1], ("user", "Weather in Tokyo and Paris?"));
    assert_eq!(
        texts[2],
        ("assistant", "Checking.\n✿FUNCTION✿: get_weather\n✿ARGS✿: {\"city\":\"Tokyo\"}"),
        "consecutive assistant messages are one"
    );
    assert_eq!(texts[3], ("user", "✿RESULT✿: {\"temp\":21}"), "a result is user text");
    assert_eq!(texts[4], ("assistant", "✿FUNCTION✿: get_weather\n✿ARGS✿: {\"city\":\"Paris\"}"));
    assert_eq!(texts[5], ("user", "✿RESULT✿: {\"temp\":17}\n\nAnd now?"), "consecutive user messages are one");
    assert_eq!(texts.len(), 6);
    // What the model wrote parses back to the call it was.
    assert_eq!(parse(texts[4].1).calls, calls(&[("get_weather", "{\"city\":\"Paris\"}")]));

    // A reply that may call nothing is told so when the transcript has calls …
    let sent = prompt_request(request(messages, vec![weather_tool()], None));
    let system = text_of(&sent.messages[0]).1;
    assert!(system.starts_with("Be brief.\n\n# Tools\n\nYou cannot call tools in this reply."), "{system}");
    assert!(!system.contains("## get_weather"));
    // … and a conversation without calls or tools is left as it is.
    let plain = vec![ChatMessage::System { content: "S".into() }, ChatMessage::user("U")];
    assert_eq!(prompt_request(request(plain.clone(), vec![], Some(ToolChoice::Auto))).messages, plain);
}

fn upstream(items: Vec<Result<LlmDelta, LlmError>>) -> DeltaStream {
    Box::pin(futures::stream::iter(items))
}

fn content(text: &str) -> Result<LlmDelta, LlmError> {
    Ok(LlmDelta::Content { text: text.into() })
}

async fn drain(stream: DeltaStream) -> Vec<Result<LlmDelta, LlmError>> {
    stream.collect().await
}

#[tokio::test]
async fn the_stream_turns_calls_into_fragments_and_says_tool_calls() {
    let usage = json!({"prompt_tokens": 10, "completion_tokens": 5});
    let items = drain(parse_calls(
        upstream(vec![
            Ok(LlmDelta::Reasoning { text: "think".into() }),
            content("On it.\n✿FUNC"),
            content("TION✿: get_weather\n✿ARGS✿: {\"city\":"),
            content(" \"Tokyo\"}\n"),
            Ok(LlmDelta::Finish { reason: "stop".into() }),
            Ok(LlmDelta::Usage { usage: usage.clone() }),
        ]),
        "call_p1_",
    ))
    .await;
    let items: Vec<LlmDelta> = items.into_iter().map(Result::unwrap).collect();
    let fragment = |id: &str, name: Option<&str>, args: &str| {
        LlmDelta::ToolCall(crate::ToolCallFragment {
            index: Some(0),
            id: Some(id.into()),
            call_type: None,
            name: name.map(str::to_owned),
            arguments: args.into(),
        })
    };
    assert_eq!(
        items,
        vec![
            LlmDelta::Reasoning { text: "think".into() },
            LlmDelta::Content { text: "On it.\n".into() },
            fragment("call_p1_1", Some("get_weather"), ""),
            fragment("call_p1_1", None, "{\"city\":"),
            fragment("call_p1_1", None, " \"Tokyo\"}"),
            LlmDelta::Finish { reason: "tool_calls".into() },
            LlmDelta::Usage { usage },
        ]
    );
}

#[tokio::test]
async fn a_made_up_result_drops_the_upstream_stream() {
    // The upstream would go on forever: the stream must end without reading it.
    let endless = futures::stream::iter(vec![content("✿FUNCTION✿: a\n✿ARGS✿: {}\n"), content("✿RESULT✿: invented")])
        .chain(futures::stream::repeat_with(|| content("more invented text")));
    let items = drain(parse_calls(Box::pin(endless), "c")).await;
    let last = items.last().unwrap().as_ref().unwrap();
    assert_eq!(last, &LlmDelta::Finish { reason: "tool_calls".into() });
    assert_eq!(items.len(), 3, "start, finish: {items:?}");

    // Without a call, a made-up result ends the answer as `stop`.
    let items = drain(parse_calls(upstream(vec![content("Hi.\n✿RESULT✿"), content("x")]), "c")).await;
    let items: Vec<LlmDelta> = items.into_iter().map(Result::unwrap).collect();
    assert_eq!(items, vec![LlmDelta::Content { text: "Hi.\n".into() }, LlmDelta::Finish { reason: "stop".into() }]);
}

#[tokio::test]
async fn held_text_is_released_at_the_end_and_errors_pass() {
    let items = drain(parse_calls(upstream(vec![content("a flower ✿FUNC")]), "c")).await;
    let items: Vec<LlmDelta> = items.into_iter().map(Result::unwrap).collect();
    assert_eq!(
        items,
        vec![LlmDelta::Content { text: "a flower ".into() }, LlmDelta::Content { text: "✿FUNC".into() }],
        "an upstream without a finish keeps its last text"
    );
    let items = drain(parse_calls(upstream(vec![content("✿FUNCTION✿: a\n✿ARGS✿: {")]), "c")).await;
    assert_eq!(items.last().unwrap().as_ref().unwrap(), &LlmDelta::Finish { reason: "tool_calls".into() });

    let items = drain(parse_calls(
        upstream(vec![content("x"), Err(LlmError::Upstream { excerpt: "boom".into() }), content("never")]),
        "c",
    ))
    .await;
    assert_eq!(items.len(), 2);
    assert!(matches!(items[1], Err(LlmError::Upstream { .. })), "an error ends the stream");
}

#[tokio::test]
async fn a_reply_without_tools_ends_where_a_call_begins() {
    let items = drain(strip_calls(upstream(vec![
        content("It is 21 °C ✿ in Tokyo.\n✿FUNC"),
        content("TION✿: get_weather\n✿ARGS✿: {}"),
        Ok(LlmDelta::Finish { reason: "stop".into() }),
    ])))
    .await;
    let items: Vec<LlmDelta> = items.into_iter().map(Result::unwrap).collect();
    assert_eq!(
        items,
        vec![
            LlmDelta::Content { text: "It is 21 °C ✿ in Tokyo.\n".into() },
            LlmDelta::Finish { reason: "stop".into() }
        ]
    );
    let items = drain(strip_calls(upstream(vec![content("✿RETURN✿: Sunny."), content(" Warm.")]))).await;
    let text: String = items
        .into_iter()
        .filter_map(|d| match d.unwrap() {
            LlmDelta::Content { text } => Some(text),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Sunny. Warm.");
}
