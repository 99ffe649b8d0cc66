//! How often a streamed answer is judged: [`Granularity`] (a setting) and [`Boundaries`], which
//! tells, as the text grows, when the next judging point has been passed.

use std::fmt;
use std::str::FromStr;

use crate::error::GranularityError;

/// When a streamed text is checked again: after each sentence, or after every `n` characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Granularity {
    /// After each sentence end (see [`Boundaries::crossed`]); the default.
    #[default]
    Sentence,
    /// After at least this many more characters (Unicode scalar values); 0 counts as 1.
    Chars(usize),
}

impl FromStr for Granularity {
    type Err = GranularityError;

    /// `"sentence"` or a positive integer (a number of characters).
    fn from_str(s: &str) -> Result<Granularity, GranularityError> {
        if s == "sentence" {
            return Ok(Granularity::Sentence);
        }
        match s.parse::<usize>() {
            Ok(n) if n > 0 && s.bytes().all(|b| b.is_ascii_digit()) => Ok(Granularity::Chars(n)),
            _ => Err(GranularityError(s.to_owned())),
        }
    }
}

impl fmt::Display for Granularity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Granularity::Sentence => f.write_str("sentence"),
            Granularity::Chars(n) => write!(f, "{n}"),
        }
    }
}

/// Follows a growing text and says when a judging point of its [`Granularity`] was passed.
#[derive(Debug, Clone)]
pub struct Boundaries {
    granularity: Granularity,
    /// How far (bytes) the text has been looked at.
    seen: usize,
    /// Characters arrived since the last `true` (for `Chars`).
    pending: usize,
}

/// Characters that may stand between a sentence's final mark and the space after it.
fn closes(c: char) -> bool {
    matches!(c, '"' | '\'' | ')' | ']' | '”' | '’' | '»' | '*' | '_')
}

impl Boundaries {
    /// A tracker that has seen no text yet.
    pub fn new(granularity: Granularity) -> Boundaries {
        Boundaries { granularity, seen: 0, pending: 0 }
    }

    /// Takes the whole text so far (each call a continuation of the last); true when, since
    /// the last `true`, a sentence ended (`Sentence`: `.`, `!` or `?` followed — after any
    /// closing quotes or brackets — by whitespace or the end of the text so far; `。`, `！`,
    /// `？` anywhere; a newline) or at least `n` more characters arrived (`Chars(n)`).
    ///
    /// A text that is not a continuation (shorter, or cut inside a character) starts over.
    pub fn crossed(&mut self, text_so_far: &str) -> bool {
        let new = match text_so_far.get(self.seen..) {
            Some(new) => new,
            None => {
                self.pending = 0;
                text_so_far
            }
        };
        self.seen = text_so_far.len();
        match self.granularity {
            Granularity::Chars(n) => {
                self.pending += new.chars().count();
                let crossed = self.pending >= n.max(1);
                if crossed {
                    self.pending = 0;
                }
                crossed
            }
            Granularity::Sentence => {
                let mut chars = new.chars().peekable();
                while let Some(c) = chars.next() {
                    match c {
                        '\n' | '。' | '！' | '？' => return true,
                        '.' | '!' | '?' => {
                            while chars.next_if(|&c| closes(c)).is_some() {}
                            if chars.peek().is_none_or(|c| c.is_whitespace()) {
                                return true;
                            }
                        }
                        _ => {}
                    }
                }
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn granularity_parses_and_prints() {
        assert_eq!("sentence".parse(), Ok(Granularity::Sentence));
        assert_eq!("40".parse(), Ok(Granularity::Chars(40)));
        for bad in ["0", "-3", "+3", "", "Sentence", " 5", "1.5", "words"] {
            assert_eq!(bad.parse::<Granularity>(), Err(GranularityError(bad.to_owned())), "{bad:?}");
        }
        assert_eq!(Granularity::Sentence.to_string(), "sentence");
        assert_eq!(Granularity::Chars(12).to_string(), "12");
    }

    /// Feeds the deltas one by one; the positions (delta index) where `crossed` said true.
    fn trues(g: Granularity, deltas: &[&str]) -> Vec<usize> {
        let mut b = Boundaries::new(g);
        let mut text = String::new();
        let mut out = Vec::new();
        for (i, d) in deltas.iter().enumerate() {
            text.push_str(d);
            if b.crossed(&text) {
                out.push(i);
            }
        }
        out
    }

    #[test]
    fn sentence_ends_are_marks_before_whitespace_or_the_end_and_newlines() {
        let g = Granularity::Sentence;
        assert_eq!(trues(g, &["Hello", " world", ". Next", " one", "!", " And"]), [2, 4]);
        assert_eq!(trues(g, &["pi is 3", ".14 today"]), Vec::<usize>::new());
        assert_eq!(trues(g, &["a list\n", "- b"]), [0]);
        assert_eq!(trues(g, &["你好。", "再见"]), [0]);
        assert_eq!(trues(g, &["你好", "！再见"]), [1]);
        assert_eq!(trues(g, &["He said \"stop.\" Then", " left"]), [0]);
        assert_eq!(trues(g, &["Why?"]), [0]);
    }

    #[test]
    fn chars_count_characters_since_the_last_true() {
        let g = Granularity::Chars(5);
        assert_eq!(trues(g, &["abc", "dé", "f", "ghijklmno", "p"]), [1, 3]);
        assert_eq!(trues(Granularity::Chars(0), &["", "a", "b"]), [1, 2]);
    }

    #[test]
    fn a_text_that_is_no_continuation_starts_over() {
        let mut b = Boundaries::new(Granularity::Chars(3));
        assert!(!b.crossed("ab"));
        assert!(b.crossed("abé"));
        assert!(!b.crossed("x"));
        assert!(b.crossed("xyz"));
    }
}
