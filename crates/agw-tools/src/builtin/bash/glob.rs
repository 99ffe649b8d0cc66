//! Shell-style file-name patterns (`*`, `?`, `[abc]`, `[a-z]`, `[!x]`) for `_bash_` arguments.

/// Does the argument ask for expansion?
pub(crate) fn has_glob(text: &str) -> bool {
    text.contains(['*', '?', '['])
}

/// One matcher of a pattern.
#[derive(Debug)]
enum Token {
    Any,
    One,
    Literal(char),
    Class { negated: bool, ranges: Vec<(char, char)> },
}

/// Matches a whole file name against a pattern. An unclosed `[` is a literal `[`.
pub(crate) fn matches(pattern: &str, name: &str) -> bool {
    let tokens = tokenize(pattern);
    let name: Vec<char> = name.chars().collect();
    // Classic wildcard matching with one backtrack point for the last `*`: linear-ish, no recursion.
    let (mut t, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match tokens.get(t) {
            Some(Token::Any) => {
                star = Some((t, n));
                t += 1;
            }
            Some(token) if single_matches(token, name[n]) => {
                t += 1;
                n += 1;
            }
            _ => match star {
                Some((star_t, star_n)) => {
                    t = star_t + 1;
                    n = star_n + 1;
                    star = Some((star_t, star_n + 1));
                }
                None => return false,
            },
        }
    }
    tokens[t..].iter().all(|token| matches!(token, Token::Any))
}

fn single_matches(token: &Token, c: char) -> bool {
    match token {
        Token::Any => false,
        Token::One => true,
        Token::Literal(l) => *l == c,
        Token::Class { negated, ranges } => ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) != *negated,
    }
}

fn tokenize(pattern: &str) -> Vec<Token> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '*' => tokens.push(Token::Any),
            '?' => tokens.push(Token::One),
            '[' => match parse_class(&chars[i + 1..]) {
                Some((token, used)) => {
                    tokens.push(token);
                    i += used;
                }
                None => tokens.push(Token::Literal('[')),
            },
            c => tokens.push(Token::Literal(c)),
        }
        i += 1;
    }
    tokens
}

/// Parses the inside of `[...]`; returns the token and the number of chars consumed including `]`.
fn parse_class(chars: &[char]) -> Option<(Token, usize)> {
    let mut i = 0;
    let negated = matches!(chars.first(), Some('!' | '^'));
    if negated {
        i += 1;
    }
    let mut ranges = Vec::new();
    let mut first = true;
    loop {
        let c = *chars.get(i)?;
        // A `]` right after the opening bracket is a member, as in the shell.
        if c == ']' && !first {
            return Some((Token::Class { negated, ranges }, i + 1));
        }
        first = false;
        if chars.get(i + 1) == Some(&'-') && chars.get(i + 2).is_some_and(|&hi| hi != ']') {
            ranges.push((c, chars[i + 2]));
            i += 3;
        } else {
            ranges.push((c, c));
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards() {
        assert!(matches("*", "a.json"));
        assert!(matches("*.json", "a.json"));
        assert!(!matches("*.json", "a.jsonx"));
        assert!(matches("a*b*c", "aXXbYYc"));
        assert!(!matches("a*b*c", "aXXbYY"));
        assert!(matches("?.txt", "é.txt"));
        assert!(!matches("?.txt", "ab.txt"));
        assert!(matches("**", ""));
    }

    #[test]
    fn classes() {
        assert!(matches("[ab].txt", "b.txt"));
        assert!(!matches("[ab].txt", "c.txt"));
        assert!(matches("[a-c]1", "b1"));
        assert!(matches("[!a-c]1", "d1"));
        assert!(!matches("[^a-c]1", "a1"));
        assert!(matches("[]]", "]"));
        assert!(matches("[a-]", "-"));
        assert!(matches("x[", "x["), "unclosed bracket is literal");
    }

    #[test]
    fn detection() {
        assert!(has_glob("agents/*"));
        assert!(has_glob("a?"));
        assert!(has_glob("[ab]"));
        assert!(!has_glob("plain/path"));
    }
}
