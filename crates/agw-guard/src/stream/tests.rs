use proptest::prelude::*;

use super::*;
use crate::catalog::GuardCatalog;
use crate::scan::redact_all;

fn demo() -> Arc<RuleSet> {
    GuardCatalog::bundled().get("demo").expect("demo")
}

fn set(name: &str, json: &str) -> Arc<RuleSet> {
    Arc::new(RuleSet::parse(name, json).expect("test rule set"))
}

/// A second set whose redactions overlap each other and the demo's, with look-around.
fn tricky() -> Arc<RuleSet> {
    set(
        "tricky",
        r#"{"rules":[
            {"id":"nerve","keywords":["nerve","secret code"],"action":"redact","replacement":"<N>"},
            {"id":"code","regex":"\\bcode\\b","action":"redact","replacement":"<C>"},
            {"id":"digits","regex":"\\d+","action":"warn"},
            {"id":"xy","regex":"x+y","action":"block"},
            {"id":"end","regex":"done$","action":"warn"}
        ]}"#,
    )
}

/// Pushes the deltas and finishes; the released pieces (the last one from `finish`) and hits.
fn run(sets: &[Arc<RuleSet>], deltas: &[&str]) -> (Vec<String>, Vec<Hit>) {
    let mut guard = StreamGuard::new(sets.to_vec());
    let mut pieces = Vec::new();
    let mut hits = Vec::new();
    for delta in deltas {
        let out = guard.push(delta);
        pieces.push(out.text);
        hits.extend(out.hits);
    }
    let out = guard.finish();
    pieces.push(out.text);
    hits.extend(out.hits);
    (pieces, hits)
}

fn redact_hits(hits: &[Hit]) -> Vec<Hit> {
    let mut out: Vec<Hit> = hits.iter().filter(|h| h.action == Action::Redact).cloned().collect();
    out.sort_by(|a, b| (a.range.start, &a.set, &a.rule).cmp(&(b.range.start, &b.set, &b.rule)));
    out
}

#[test]
fn without_redact_rules_nothing_is_held() {
    let sets = vec![set("w", r#"{"rules":[{"id":"w","keywords":["dosage"],"action":"warn"}]}"#)];
    let mut guard = StreamGuard::new(sets);
    let out = guard.push("the dos");
    assert_eq!(out.text, "the dos");
    assert!(out.hits.is_empty());
    let out = guard.push("age is");
    assert_eq!(out.text, "age is");
    assert_eq!(out.hits.len(), 1);
    assert_eq!(out.hits[0].range, 4..10);
    assert_eq!(guard.held(), "");
    assert_eq!(guard.finish(), Released::default());

    let mut none = StreamGuard::new(Vec::new());
    assert_eq!(none.push("anything").text, "anything");
}

#[test]
fn only_a_tail_that_could_still_match_is_held() {
    let sets = vec![set("k", r#"{"rules":[{"id":"k","keywords":["secret code"],"action":"redact"}]}"#)];
    let mut guard = StreamGuard::new(sets);
    assert_eq!(guard.push("a sec").text, "a ");
    assert_eq!(guard.held(), "sec");
    assert_eq!(guard.push("ret").text, "");
    let out = guard.push(" cod");
    assert_eq!(out.text, "");
    assert_eq!(guard.held(), "secret cod");
    let out = guard.push("e! bye");
    assert_eq!(out.text, "[redacted]! bye");
    assert_eq!(out.hits.len(), 1);
    assert_eq!(out.hits[0].range, 2..13);
    // A near miss is released as soon as it cannot match any more.
    assert_eq!(guard.push(" secret cat").text, " secret cat");
    assert_eq!(guard.finish(), Released::default());
}

#[test]
fn an_email_is_held_until_it_ends_and_never_shown() {
    let mut guard = StreamGuard::new(vec![demo()]);
    let mut shown = String::new();
    for delta in ["Mail ", "ann", ".lee@exa", "mple.co", "m now", "."] {
        shown.push_str(&guard.push(delta).text);
        assert!(!shown.contains("ann") && !shown.contains("example"), "{shown:?}");
    }
    shown.push_str(&guard.finish().text);
    assert_eq!(shown, "Mail [email] now.");
}

#[test]
fn a_match_that_could_still_grow_is_held_until_it_cannot() {
    let sets = vec![set("d", r##"{"rules":[{"id":"d","regex":"\\d+","action":"redact","replacement":"#"}]}"##)];
    let mut guard = StreamGuard::new(sets);
    assert_eq!(guard.push("pin 12").text, "pin ");
    assert_eq!(guard.push("34").text, "");
    assert_eq!(guard.push(" ok").text, "# ok");
    assert_eq!(guard.push(" 5").text, " ");
    assert_eq!(guard.finish().text, "#");
}

#[test]
fn a_hold_never_exceeds_max_hold() {
    let sets = vec![set("d", r#"{"rules":[{"id":"a","regex":"a[^!]*!","action":"redact"}]}"#)];
    let mut guard = StreamGuard::new(sets);
    let mut shown = String::new();
    for _ in 0..100 {
        shown.push_str(&guard.push("ab ").text);
        assert!(guard.held().len() <= MAX_HOLD + 3, "{}", guard.held().len());
    }
    assert!(shown.starts_with("ab ab "));
    assert!(!guard.finish().text.is_empty());
}

#[test]
fn block_and_warn_hits_across_deltas_are_reported_once() {
    let (pieces, hits) = run(&[demo()], &["the dos", "age of a nerve ", "agent", ", the dosage, the DIAG", "NOSIS"]);
    assert_eq!(pieces.concat(), "the dosage of a nerve agent, the dosage, the DIAGNOSIS");
    let got: Vec<(&str, Range<usize>)> = hits.iter().map(|h| (h.rule.as_str(), h.range.clone())).collect();
    assert_eq!(
        got,
        [
            ("medical-advice", 4..10),
            ("forbidden-topic", 16..27),
            ("medical-advice", 33..39),
            ("medical-advice", 45..54)
        ]
    );
}

#[test]
fn a_look_around_match_at_the_end_waits_for_what_follows() {
    let sets = vec![set("e", r#"{"rules":[{"id":"e","regex":"\\bdone\\b","action":"warn"}]}"#)];
    let mut guard = StreamGuard::new(sets);
    assert!(guard.push("not done").hits.is_empty());
    assert!(guard.push("ne").hits.is_empty());
    assert!(guard.push(" but done").hits.is_empty());
    let out = guard.push(".");
    assert_eq!(out.hits.len(), 1);
    assert_eq!(out.hits[0].range, 15..19);
    assert!(guard.finish().hits.is_empty());
}

#[test]
fn a_growing_warn_match_is_reported_once_when_first_seen() {
    let (_, hits) = run(&[tricky()], &["call 12", "34", "5 now"]);
    let digits: Vec<Range<usize>> = hits.iter().filter(|h| h.rule == "digits").map(|h| h.range.clone()).collect();
    assert_eq!(digits.len(), 1);
    assert_eq!(digits[0], 5..7);
}

#[test]
fn finish_reports_matches_longer_than_the_lookback() {
    let sets = vec![set("l", r#"{"rules":[{"id":"l","regex":"<[^>]*>","action":"warn"}]}"#)];
    let long = "y".repeat(MAX_HOLD * 2);
    let mut guard = StreamGuard::new(sets);
    assert!(guard.push("<").hits.is_empty());
    for chunk in long.as_bytes().chunks(10) {
        assert!(guard.push(std::str::from_utf8(chunk).expect("ascii")).hits.is_empty());
    }
    let mut hits = guard.push(">").hits;
    hits.extend(guard.finish().hits);
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].range, 0..MAX_HOLD * 2 + 2);
}

#[test]
fn the_guard_starts_over_after_finish() {
    let mut guard = StreamGuard::new(vec![demo()]);
    let first = run(&[demo()], &["a@b.co", " dosage"]);
    for _ in 0..2 {
        let mut pieces = vec![guard.push("a@b.co").text, guard.push(" dosage").text];
        let out = guard.finish();
        pieces.push(out.text);
        assert_eq!(pieces.concat(), first.0.concat());
    }
}

#[test]
fn non_ascii_text_is_released_and_ranges_fall_on_char_boundaries() {
    let (pieces, hits) = run(&[demo(), tricky()], &["漢字 ", "é", "t", "é nerve ", "ça 😀 secret", " code"]);
    assert_eq!(pieces.concat(), "漢字 été <N> ça 😀 <N>");
    let text = "漢字 été nerve ça 😀 secret code";
    for h in &hits {
        assert!(text.is_char_boundary(h.range.start) && text.is_char_boundary(h.range.end));
    }
    // Nothing that cannot become a match waits: "漢字 " is out with the first delta.
    let mut guard = StreamGuard::new(vec![demo(), tricky()]);
    assert_eq!(guard.push("漢字 ").text, "漢字 ");
}

/// Tokens a text is made of: words, separators, parts of emails, card numbers and keywords.
fn token() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "a",
        "the ",
        " ",
        ".",
        "\n",
        "@",
        "-",
        "ann",
        "b.co",
        "x@y.org",
        "ann.lee@example.com",
        "1234",
        "4111 1111 1111 1111",
        "5",
        "nerve",
        " agent",
        "nerve agent",
        "dosage",
        "DIAG",
        "nosis",
        "secret",
        " code",
        "code",
        "xxy",
        "x",
        "y",
        "done",
        "é",
        "漢字",
        "😀",
        "_",
    ])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// Streaming in any split releases exactly the whole-text redaction, with the same redact
    /// hits, and reports every block/warn hit of the whole text once.
    #[test]
    fn streaming_equals_redacting_the_whole_text(tokens in prop::collection::vec(token(), 0..24), cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12)) {
        let text: String = tokens.concat();
        prop_assume!(text.len() < MAX_HOLD);
        let mut at: Vec<usize> = cuts.iter().map(|i| text.floor_char_boundary(i.index(text.len() + 1))).collect();
        at.push(0);
        at.push(text.len());
        at.sort_unstable();
        at.dedup();
        let deltas: Vec<&str> = at.windows(2).map(|w| &text[w[0]..w[1]]).collect();
        let sets = vec![demo(), tricky()];
        let whole = redact_all(&sets, &text);
        let (pieces, hits) = run(&sets, &deltas);
        prop_assert_eq!(pieces.concat(), whole.text.clone());
        prop_assert_eq!(redact_hits(&hits), redact_hits(&whole.hits));
        // Every block/warn hit of the whole text overlaps one reported for its rule…
        for h in whole.hits.iter().filter(|h| h.action != Action::Redact) {
            prop_assert!(
                hits.iter().any(|g| g.rule == h.rule && g.set == h.set && g.range.start < h.range.end && h.range.start < g.range.end),
                "{:?} not reported in {:?}", h, hits
            );
        }
        // …and none is reported twice.
        let mut starts: Vec<(&str, usize)> = hits.iter().filter(|h| h.action != Action::Redact).map(|h| (h.rule.as_str(), h.range.start)).collect();
        let n = starts.len();
        starts.sort_unstable();
        starts.dedup();
        prop_assert_eq!(starts.len(), n);
    }
}

/// Redact rules on a small alphabet whose matches overlap, grow, shrink and depend on what
/// follows: the cases where deciding too early would differ from the whole text.
fn dense() -> Arc<RuleSet> {
    set(
        "dense",
        r#"{"rules":[
            {"id":"r1","regex":"a|ab","action":"redact","replacement":"1"},
            {"id":"r2","regex":"b+c","action":"redact","replacement":"2"},
            {"id":"r3","regex":"\\bca\\b","action":"redact","replacement":"3"},
            {"id":"r4","regex":"(?m)^c","action":"redact","replacement":"4"},
            {"id":"r5","regex":"cc$","action":"redact","replacement":"5"},
            {"id":"r6","regex":"c[ .]?b{2,3}","action":"redact","replacement":"6"},
            {"id":"r7","regex":"\\Bé","action":"redact","replacement":"7"},
            {"id":"w1","regex":"abc|b","action":"warn"},
            {"id":"w2","regex":"c+\\b","action":"block"}
        ]}"#,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn streaming_equals_redacting_on_a_dense_alphabet(chars in prop::collection::vec(prop::sample::select(vec!['a', 'b', 'c', ' ', '.', '\n', 'é']), 0..60), cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..20)) {
        let text: String = chars.into_iter().collect();
        let mut at: Vec<usize> = cuts.iter().map(|i| text.floor_char_boundary(i.index(text.len() + 1))).collect();
        at.push(0);
        at.push(text.len());
        at.sort_unstable();
        at.dedup();
        let deltas: Vec<&str> = at.windows(2).map(|w| &text[w[0]..w[1]]).collect();
        let sets = vec![dense()];
        let whole = redact_all(&sets, &text);
        let (pieces, hits) = run(&sets, &deltas);
        prop_assert_eq!(pieces.concat(), whole.text.clone());
        prop_assert_eq!(redact_hits(&hits), redact_hits(&whole.hits));
        for h in whole.hits.iter().filter(|h| h.action != Action::Redact) {
            prop_assert!(hits.iter().any(|g| g.rule == h.rule && g.range.start < h.range.end && h.range.start < g.range.end), "{:?} not reported in {:?}", h, hits);
        }
    }
}
