use super::*;

fn parse(json: &str) -> Result<RuleSet, RuleError> {
    RuleSet::parse("t", json)
}

fn problem(json: &str) -> String {
    match parse(json) {
        Ok(_) => panic!("accepted: {json}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_rule_file_parses_into_compiled_rules() {
    let set = parse(
        r#"{"description":"d","rules":[
            {"id":"b","keywords":["nerve agent","x"],"action":"block"},
            {"id":"r.1","regex":"\\d{4}","caseSensitive":true,"action":"redact","message":"m"},
            {"id":"r-2","regex":"abc","action":"redact","replacement":"<>"}
        ]}"#,
    )
    .expect("valid");
    assert_eq!((set.name(), set.description()), ("t", Some("d")));
    let rules = set.rules();
    assert_eq!(rules.len(), 3);
    assert_eq!((rules[0].id(), rules[0].action(), rules[0].replacement()), ("b", Action::Block, None));
    assert_eq!(rules[0].pattern(), "nerve agent|x");
    assert_eq!(rules[0].message(), "blocked by guard rule b");
    assert_eq!((rules[1].message(), rules[1].replacement()), ("m", Some(DEFAULT_REPLACEMENT)));
    assert_eq!(rules[2].replacement(), Some("<>"));
    assert!(set.redacts());
    assert_eq!(rules[0].matcher.max_len, Some(11));
    assert!(!rules[0].matcher.looks);
}

#[test]
fn keywords_are_escaped_and_sorted_longest_first() {
    let set = parse(r#"{"rules":[{"id":"k","keywords":["a.b","a.b.c","(x)","a.b"],"action":"warn"}]}"#).expect("valid");
    assert_eq!(set.rules()[0].pattern(), r"a\.b\.c|\(x\)|a\.b");
}

#[test]
fn unknown_keys_are_refused_with_their_name() {
    let e = problem(r#"{"rules":[],"extra":1}"#);
    assert!(e.contains("unknown field `extra`"), "{e}");
    let e = problem(r#"{"rules":[{"id":"r1","keyword":["x"],"action":"block"}]}"#);
    assert!(e.starts_with(r#"rule "r1": unknown field `keyword`"#), "{e}");
    let e = problem(r#"{"rules":[{"keywords":["x"],"action":"block"}]}"#);
    assert!(e.starts_with("rule #1: missing field `id`"), "{e}");
    let e = problem(r#"{"rules":[{"id":"r","keywords":["x"],"action":"deny"}]}"#);
    assert!(e.contains("unknown variant `deny`"), "{e}");
    let e = problem(r#"{"rules":[{"id":"r","keywords":"x","action":"warn"}]}"#);
    assert!(e.contains("invalid type"), "{e}");
    assert!(matches!(parse("[]"), Err(RuleError::Syntax(_))));
    assert!(matches!(parse(r#"{"description":"no rules"}"#), Err(RuleError::Syntax(_))));
}

#[test]
fn each_rule_needs_exactly_one_pattern() {
    assert_eq!(
        problem(r#"{"rules":[{"id":"r1","keywords":["x"],"regex":"y","action":"block"}]}"#),
        r#"rule "r1": has both `keywords` and `regex`; give one"#
    );
    assert_eq!(
        problem(r#"{"rules":[{"id":"r1","action":"block"}]}"#),
        r#"rule "r1": has neither `keywords` nor `regex`"#
    );
}

#[test]
fn keywords_are_checked() {
    assert_eq!(problem(r#"{"rules":[{"id":"k","keywords":[],"action":"warn"}]}"#), r#"rule "k": `keywords` is empty"#);
    assert_eq!(
        problem(r#"{"rules":[{"id":"k","keywords":["a"," "],"action":"warn"}]}"#),
        r#"rule "k": `keywords[1]` is empty"#
    );
    let many: Vec<String> = (0..=MAX_KEYWORDS).map(|i| format!("k{i}")).collect();
    let json = serde_json::json!({"rules":[{"id":"k","keywords":many,"action":"warn"}]}).to_string();
    assert!(matches!(parse(&json), Err(RuleError::Rule { problem: RuleProblem::TooManyKeywords { .. }, .. })));
    let long = "x".repeat(MAX_KEYWORD_BYTES + 1);
    let json = serde_json::json!({"rules":[{"id":"k","keywords":[long],"action":"warn"}]}).to_string();
    assert!(matches!(parse(&json), Err(RuleError::Rule { problem: RuleProblem::LongKeyword { index: 0, .. }, .. })));
}

#[test]
fn regexes_are_checked() {
    let e = problem(r#"{"rules":[{"id":"re","regex":"(unclosed","action":"block"}]}"#);
    assert!(e.starts_with(r#"rule "re": `regex` is invalid"#), "{e}");
    for empty in ["a*", "\\b", "(?:x|)", "^"] {
        let json = serde_json::json!({"rules":[{"id":"re","regex":empty,"action":"block"}]}).to_string();
        assert!(matches!(parse(&json), Err(RuleError::Rule { problem: RuleProblem::EmptyMatch, .. })), "{empty}");
    }
    let e = problem(r#"{"rules":[{"id":"big","regex":"\\w{100}","action":"block"}]}"#);
    assert!(e.starts_with(r#"rule "big": `regex` is invalid"#), "{e}");
}

#[test]
fn actions_ids_and_replacements_are_checked() {
    assert_eq!(
        problem(r#"{"rules":[{"id":"a","keywords":["x"],"action":"allow"}]}"#),
        r#"rule "a": `action` must be "block", "warn" or "redact""#
    );
    assert_eq!(
        problem(r#"{"rules":[{"id":"a","keywords":["x"],"action":"warn","replacement":"y"}]}"#),
        r#"rule "a": `replacement` is only for action "redact""#
    );
    assert!(problem(r#"{"rules":[{"id":"a b","keywords":["x"],"action":"warn"}]}"#).contains("`id` must be"));
    assert!(problem(r#"{"rules":[{"id":"","keywords":["x"],"action":"warn"}]}"#).contains("`id` must be"));
    assert_eq!(
        problem(
            r#"{"rules":[{"id":"a","keywords":["x"],"action":"warn"},{"id":"a","keywords":["y"],"action":"warn"}]}"#
        ),
        r#"rule "a": `id` is used by an earlier rule of the file"#
    );
}

#[test]
fn names_and_sizes_are_bounded() {
    for bad in ["", "a.b", "a b", "é", &"x".repeat(65)] {
        assert!(matches!(RuleSet::parse(bad, r#"{"rules":[]}"#), Err(RuleError::BadName(_))), "{bad:?}");
    }
    assert!(RuleSet::parse(&"x".repeat(64), r#"{"rules":[]}"#).is_ok());
    let rules: Vec<serde_json::Value> = (0..=MAX_RULES)
        .map(|i| serde_json::json!({"id": format!("r{i}"), "keywords": ["x"], "action": "warn"}))
        .collect();
    let json = serde_json::json!({ "rules": rules }).to_string();
    assert!(matches!(parse(&json), Err(RuleError::TooManyRules { count: 1001, .. })));
    let padded = format!(r#"{{"description":"{}","rules":[]}}"#, "x".repeat(MAX_FILE_BYTES as usize));
    assert!(matches!(parse(&padded), Err(RuleError::TooLarge { .. })));
}

#[test]
fn many_large_patterns_together_are_refused() {
    // Each rule is under the per-rule limits; together they pass the per-file budget.
    let rules: Vec<serde_json::Value> = (0..100)
        .map(|i| serde_json::json!({"id": format!("r{i}"), "regex": format!("\\w{{20}}{i}"), "action": "warn"}))
        .collect();
    let json = serde_json::json!({ "rules": rules }).to_string();
    assert!(matches!(parse(&json), Err(RuleError::TooComplex { .. })), "{:?}", parse(&json).err());
}

#[test]
fn a_thousand_keywords_fit() {
    let keywords: Vec<String> = (0..MAX_KEYWORDS).map(|i| format!("keyword number {i} with some text")).collect();
    let json = serde_json::json!({"rules":[{"id":"k","keywords":keywords,"action":"redact"}]}).to_string();
    let set = parse(&json).expect("valid");
    assert!(set.rules()[0].matcher.regex.is_match("a KEYWORD NUMBER 999 with some text"));
}

#[test]
fn case_sensitivity_applies_to_keywords_and_regexes() {
    let set = parse(
        r#"{"rules":[
            {"id":"k","keywords":["Bad"],"action":"warn"},
            {"id":"ks","keywords":["Bad"],"caseSensitive":true,"action":"warn"},
            {"id":"r","regex":"b[a]d","action":"warn"}
        ]}"#,
    )
    .expect("valid");
    let m = |i: usize, t: &str| set.rules()[i].matcher.regex.is_match(t);
    assert!(m(0, "BAD") && m(0, "bad"));
    assert!(m(1, "Bad") && !m(1, "bad"));
    assert!(m(2, "BAD"));
}

#[test]
fn the_liveness_automaton_ignores_look_around() {
    let set = parse(r#"{"rules":[{"id":"w","regex":"\\bcat\\b","action":"redact"}]}"#).expect("valid");
    let matcher = &set.rules()[0].matcher;
    assert!(matcher.looks);
    // Built without `\b`: it accepts "cat" anywhere, and never gives up on non-ASCII text.
    let input = regex_automata::Input::new("é cat").anchored(regex_automata::Anchored::No);
    let mut cache = matcher.live.create_cache();
    assert!(matcher.live.try_search_fwd(&mut cache, &input).expect("no quit").is_some());
}
