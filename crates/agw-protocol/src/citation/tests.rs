use super::*;

fn text(s: &str) -> Piece {
    Piece::Text(s.into())
}

/// A marker with these ids (offsets are zeroed by [`run`]; `offsets_…` checks them).
fn cite(ids: &[&str]) -> Piece {
    Piece::Cite(Marker { ids: ids.iter().map(|s| s.to_string()).collect(), offset: 0 })
}

/// Feeds `chunks` to a fresh filter; returns the pieces, merged text runs, and the most it held.
fn run(marker: &CiteMarker, chunks: &[&str]) -> (Vec<Piece>, usize) {
    let mut filter = CiteFilter::new(marker.clone());
    let mut out = Vec::new();
    let mut most = 0;
    for chunk in chunks {
        filter.push(chunk, &mut out);
        most = most.max(filter.held.len());
    }
    filter.finish(&mut out);
    (merge(out), most)
}

fn merge(pieces: Vec<Piece>) -> Vec<Piece> {
    let mut merged: Vec<Piece> = Vec::new();
    for piece in pieces {
        match (merged.last_mut(), piece) {
            (_, Piece::Text(t)) if t.is_empty() => {}
            (_, Piece::Cite(m)) => merged.push(Piece::Cite(Marker { offset: 0, ..m })),
            (Some(Piece::Text(last)), Piece::Text(t)) => last.push_str(&t),
            (_, piece) => merged.push(piece),
        }
    }
    merged
}

#[test]
fn markers_leave_the_text_and_become_citations() {
    let m = CiteMarker::default();
    let (out, _) = run(&m, &["Mason suggested changes[cite:431], and asked about Monday.[cite:432, 433]"]);
    assert_eq!(
        out,
        [text("Mason suggested changes"), cite(&["431"]), text(", and asked about Monday."), cite(&["432", "433"])]
    );
}

#[test]
fn what_is_not_a_marker_stays_text_byte_for_byte() {
    let m = CiteMarker::default();
    for plain in [
        "a [link](x) and [cite: and more",
        "[cite:line\nbreak] stays",
        "ends with [ci",
        "ends with [cite:unfinished",
        "[[cite]] [cite] cite:1]",
        "nested [cite:[cite:1]",
    ] {
        let (out, _) = run(&m, &[plain]);
        let shown: String = out
            .iter()
            .map(|p| match p {
                Piece::Text(t) => t.clone(),
                Piece::Cite(_) => String::new(),
            })
            .collect();
        if plain.starts_with("nested") {
            assert_eq!(out, [text("nested [cite:"), cite(&["1"])], "{plain}");
        } else {
            assert_eq!(out, [text(plain)], "{plain}");
            assert_eq!(shown, plain);
        }
    }
    let long = format!("[cite:{}]", "x".repeat(MAX_MARKER_IDS_LEN + 1));
    assert_eq!(run(&m, &[&long]).0, [text(&long)], "too long to be a marker");
}

#[test]
fn an_empty_marker_is_dropped() {
    let (out, _) = run(&CiteMarker::default(), &["a[cite:]b[cite: , ]c"]);
    assert_eq!(out, [text("abc")]);
}

/// The evidence: a marker split at every byte (every char boundary: chunks are text)
/// across two and three chunks gives the same pieces, and nothing is held longer than a marker.
#[test]
fn a_marker_split_anywhere_gives_the_same_pieces() {
    for marker in [CiteMarker::default(), CiteMarker::parse("【ref:{id}】").unwrap()] {
        let whole = format!(
            "报告：Coral{}，and [not one] then{}{} end [",
            marker.of("361"),
            marker.of("362"),
            marker.of("msg-7, msg-8")
        );
        let (expected, _) = run(&marker, &[&whole]);
        assert_eq!(expected.iter().filter(|p| matches!(p, Piece::Cite(_))).count(), 3, "{expected:?}");
        let cuts: Vec<usize> = (0..=whole.len()).filter(|&i| whole.is_char_boundary(i)).collect();
        for &a in &cuts {
            let (out, most) = run(&marker, &[&whole[..a], &whole[a..]]);
            assert_eq!(out, expected, "split at {a}");
            assert!(most <= marker.max_held(), "held {most} bytes");
            for &b in cuts.iter().filter(|&&b| b >= a).step_by(3) {
                let (out, _) = run(&marker, &[&whole[..a], &whole[a..b], &whole[b..]]);
                assert_eq!(out, expected, "split at {a} and {b}");
            }
        }
        // One character at a time.
        let chars: Vec<String> = whole.chars().map(String::from).collect();
        let chunks: Vec<&str> = chars.iter().map(String::as_str).collect();
        assert_eq!(run(&marker, &chunks).0, expected);
    }
}

#[test]
fn text_is_released_as_soon_as_it_cannot_be_a_marker() {
    let mut filter = CiteFilter::new(CiteMarker::default());
    let mut out = Vec::new();
    filter.push("Hello [c", &mut out);
    assert_eq!(out, [text("Hello ")], "only the possible opening waits");
    out.clear();
    filter.push("at] world", &mut out);
    assert_eq!(out, [text("[cat] world")], "not a marker after all");
    out.clear();
    filter.push(" [cite:4", &mut out);
    assert_eq!(out, [text(" ")]);
    out.clear();
    filter.push("2] done", &mut out);
    let at = "Hello [cat] world ".len() as u64;
    assert_eq!(out, [Piece::Cite(Marker { ids: vec!["42".into()], offset: at }), text(" done")]);
}

#[test]
fn offsets_count_utf16_units_of_the_released_text() {
    let mut filter = CiteFilter::new(CiteMarker::default());
    let mut out = Vec::new();
    filter.push("é😀 ab", &mut out);
    assert_eq!(filter.offset(), 1 + 2 + 3);
    filter.push("[cite:1]", &mut out);
    assert_eq!(filter.offset(), 6, "a marker adds nothing");
    filter.push("c[cite:2]", &mut out);
    let offsets: Vec<u64> = out
        .iter()
        .filter_map(|p| match p {
            Piece::Cite(m) => Some(m.offset),
            Piece::Text(_) => None,
        })
        .collect();
    assert_eq!(offsets, [6, 7]);
}

#[test]
fn marker_formats() {
    assert_eq!(CiteMarker::parse("[cite:{id}]").unwrap(), CiteMarker::default());
    assert_eq!(CiteMarker::parse("<<{id}>>").unwrap().of("9"), "<<9>>");
    for bad in ["[cite:]", "{id}]", "[cite:{id}", "{id}{id}", "[{id}{id}]"] {
        assert!(CiteMarker::parse(bad).is_err(), "{bad}");
    }
}
