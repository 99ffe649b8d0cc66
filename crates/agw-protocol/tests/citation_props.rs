//! Property tests of the citation marker filter (`docs/citations.md`): for any text and any way
//! of cutting it into chunks, the filter never panics, gives the same text and markers as the
//! whole text at once, shows no part of a marker, and never holds more than one marker's length.

use agw_protocol::citation::{CiteFilter, CiteMarker, Piece};
use proptest::prelude::*;

/// Text that often contains markers, parts of markers and multi-byte characters.
fn text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        4 => "[a-z ]{0,8}",
        2 => prop::sample::select(vec!["[cite:", "[cite:1]", "[cite:a, b]", "]", "[", "[ci", "\n", "é", "😀", "【", "】"])
            .prop_map(str::to_owned),
        1 => "\\PC{1,4}",
    ];
    prop::collection::vec(piece, 0..24).prop_map(|parts| parts.concat())
}

/// Text and markers, with adjacent text merged and offsets dropped (compared separately).
fn shape(pieces: Vec<Piece>) -> (String, Vec<Vec<String>>, Vec<u64>) {
    let (mut shown, mut ids, mut offsets) = (String::new(), Vec::new(), Vec::new());
    for piece in pieces {
        match piece {
            Piece::Text(t) => shown.push_str(&t),
            Piece::Cite(m) => {
                ids.push(m.ids);
                offsets.push(m.offset);
            }
        }
    }
    (shown, ids, offsets)
}

fn run(marker: &CiteMarker, chunks: &[&str]) -> (String, Vec<Vec<String>>, Vec<u64>) {
    let mut filter = CiteFilter::new(marker.clone());
    let mut out = Vec::new();
    for chunk in chunks {
        filter.push(chunk, &mut out);
    }
    filter.finish(&mut out);
    shape(out)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(512)
    ))]

    #[test]
    fn any_cut_gives_the_same_result(text in text(), cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..6)) {
        let marker = CiteMarker::default();
        let whole = run(&marker, &[&text]);
        let mut at: Vec<usize> = cuts.iter().map(|i| i.index(text.len() + 1)).collect();
        at.push(0);
        at.push(text.len());
        at.sort_unstable();
        at.dedup();
        let at: Vec<usize> = at.into_iter().filter(|&i| text.is_char_boundary(i)).collect();
        let chunks: Vec<&str> = at.windows(2).map(|w| &text[w[0]..w[1]]).collect();
        let cut = run(&marker, &chunks);
        prop_assert_eq!(&cut, &whole);
        // What is shown never has a whole marker in it, and what was taken out was a marker.
        let (shown, ids, _) = whole;
        for id in ids.iter().flatten() {
            prop_assert!(!id.is_empty() && !id.contains(','));
        }
        prop_assert!(ids.is_empty() || shown.len() < text.len(), "a marker's text left the stream");
        prop_assert!(!shown.contains("[cite:1]") && !shown.contains("[cite:a, b]"), "a whole marker was shown: {:?}", shown);
    }

    #[test]
    fn the_filter_holds_at_most_one_marker(text in text()) {
        let marker = CiteMarker::default();
        let mut filter = CiteFilter::new(marker.clone());
        let mut out = Vec::new();
        for c in text.chars() {
            let mut buf = [0u8; 4];
            filter.push(c.encode_utf8(&mut buf), &mut out);
            prop_assert!(filter.pending() <= marker.max_held(), "holds {} bytes", filter.pending());
        }
        filter.finish(&mut out);
        prop_assert_eq!(filter.pending(), 0);
    }
}
