//! What a `_bash_` command text means: its program and arguments, read in exactly one way.
//!
//! `_bash_` runs what [`BashCommand::parse`] returns (after the checks of [`super::policy`]), and
//! agw-modes' approval rules match [`BashCommand::approval_text`] of the same parse, so a rule and
//! the command it is about can never be read differently (issue 32: `cat\tsecret.txt` ran past
//! `cat *: deny` because the rule saw a tab where `_bash_` saw a separator).
//!
//! The reading, in order:
//! 1. ASCII whitespace at both ends is trimmed; nothing is left: the command is missing;
//! 2. shell syntax (`; & | $ < > \` ' "`, line breaks, NUL) is refused — there is no shell;
//! 3. every other control character (C0, DEL, C1), every non-ASCII whitespace (U+00A0, U+2028,
//!    U+3000, …) and the invisible formatting characters (zero-width and bidirectional controls)
//!    are refused: they either separate words for some readers and not for others, or make the
//!    command look different from what runs when a person is asked to approve it;
//! 4. the words are separated by runs of ASCII spaces and tabs, and nothing else; the first word
//!    is the program (compared exactly: prefixes such as `command`, `env` or `exec` are programs
//!    the deny table refuses outright, so the first word is always what runs).

use serde_json::Value;

use super::super::java_random::java_to_string;

/// Options git takes before its subcommand that `_bash_` allows and that change nothing about
/// what the subcommand does (paging, optional index locks): approval rules ignore them, so
/// `git -P log` is the `git log` a rule names.
pub(crate) const GIT_NEUTRAL_OPTIONS: [&str; 3] = ["--no-pager", "-P", "--no-optional-locks"];

/// Characters that mean shell syntax, with how a refusal names them. Without a shell they would
/// be passed on literally, which is never what the model meant.
const SHELL_SYNTAX: [(char, &str); 12] = [
    (';', "';'"),
    ('&', "'&'"),
    ('|', "'|'"),
    ('`', "'`'"),
    ('$', "'$'"),
    ('>', "'>'"),
    ('<', "'<'"),
    ('\n', "a line break"),
    ('\r', "a line break"),
    ('\'', "quotes"),
    ('"', "quotes"),
    ('\0', "a NUL character"),
];

/// Why a command text is not a command `_bash_` runs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BashCommandError {
    /// No command, or only whitespace.
    #[error("Missing argument: command")]
    Missing,
    /// Shell syntax, which would be passed on literally.
    #[error(
        "Shell syntax is not supported: {0}. Commands run without a shell: one whitelisted command, \
         arguments separated by spaces, no pipes, chaining, redirection, substitution, variables or quotes"
    )]
    ShellSyntax(&'static str),
    /// A character that is neither part of a word nor an ASCII separator.
    #[error("Character not allowed in a command: U+{code:04X} ({what}). Separate arguments with ASCII spaces or tabs")]
    Character {
        /// The Unicode scalar value.
        code: u32,
        /// What kind of character it is.
        what: &'static str,
    },
}

/// A `_bash_` command as `_bash_` reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BashCommand {
    program: String,
    args: Vec<String>,
}

impl BashCommand {
    /// Reads the `command` argument of a `_bash_` call (docs/contract/tools-skills-viewports.md §4.1 step 1:
    /// absent → missing, JSON `null` → `"null"`, other values stringified).
    pub fn from_args(args: &Value) -> Result<Self, BashCommandError> {
        Self::parse(&command_text(args))
    }

    /// Reads a command text (see the module docs for the rules).
    pub fn parse(text: &str) -> Result<Self, BashCommandError> {
        let text = text.trim_ascii();
        if text.is_empty() {
            return Err(BashCommandError::Missing);
        }
        if let Some((_, what)) = SHELL_SYNTAX.iter().find(|(c, _)| text.contains(*c)) {
            return Err(BashCommandError::ShellSyntax(what));
        }
        if let Some((c, what)) = text.chars().find_map(|c| refused(c).map(|what| (c, what))) {
            return Err(BashCommandError::Character { code: u32::from(c), what });
        }
        let mut words = text.split([' ', '\t']).filter(|w| !w.is_empty()).map(str::to_owned);
        // Not empty after trimming, and every separator is ASCII: there is a first word.
        let program = words.next().ok_or(BashCommandError::Missing)?;
        Ok(Self { program, args: words.collect() })
    }

    /// The program, as the first word.
    pub fn program(&self) -> &str {
        &self.program
    }

    /// The arguments, in order.
    pub fn args(&self) -> &[String] {
        &self.args
    }

    /// The arguments, owned.
    pub(crate) fn into_parts(self) -> (String, Vec<String>) {
        (self.program, self.args)
    }

    /// What approval rules are matched against: the program and its arguments joined by one
    /// space, without git's neutral global options (`-P`, `--no-pager`, …) before the subcommand.
    pub fn approval_text(&self) -> String {
        let mut args = self.args.iter().map(String::as_str).peekable();
        if self.program == "git" {
            while args.next_if(|a| GIT_NEUTRAL_OPTIONS.contains(a)).is_some() {}
        }
        std::iter::once(self.program.as_str()).chain(args).collect::<Vec<_>>().join(" ")
    }
}

/// §4.1 step 1: absent → `""`, JSON `null` → `"null"`, other values stringified. Trimming and
/// everything else is [`BashCommand::parse`]'s.
pub(super) fn command_text(args: &Value) -> String {
    match args.get("command") {
        None => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => java_to_string(other),
    }
}

/// What a refused character is, or `None` for one that may be part of a word.
fn refused(c: char) -> Option<&'static str> {
    match c {
        ' ' | '\t' => None,
        '\u{a0}' => Some("no-break space"),
        '\u{2028}' => Some("line separator"),
        '\u{2029}' => Some("paragraph separator"),
        '\u{3000}' => Some("ideographic space"),
        c if c.is_control() => Some("a control character"),
        c if c.is_whitespace() => Some("non-ASCII whitespace"),
        '\u{ad}'
        | '\u{61c}'
        | '\u{180e}'
        | '\u{200b}'..='\u{200f}'
        | '\u{202a}'..='\u{202e}'
        | '\u{2060}'..='\u{2064}'
        | '\u{2066}'..='\u{2069}'
        | '\u{feff}'
        | '\u{fff9}'..='\u{fffb}'
        | '\u{e0000}'..='\u{e007f}' => Some("an invisible formatting character"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn text(command: &str) -> Result<String, BashCommandError> {
        BashCommand::parse(command).map(|c| c.approval_text())
    }

    #[test]
    fn ascii_spaces_and_tabs_separate_and_are_collapsed() {
        for spelling in ["cat secret.txt", "cat\tsecret.txt", "cat  secret.txt", " \tcat secret.txt\t\n"] {
            assert_eq!(text(spelling).unwrap(), "cat secret.txt", "{spelling:?}");
        }
        let parsed = BashCommand::parse("head\t-n 1  x").unwrap();
        assert_eq!((parsed.program(), parsed.args()), ("head", &["-n".to_owned(), "1".into(), "x".into()][..]));
    }

    #[test]
    fn other_whitespace_and_control_characters_are_refused() {
        for (spelling, code) in [
            ("cat\u{a0}secret.txt", 0xa0),
            ("cat\u{3000}secret.txt", 0x3000),
            ("cat\u{2028}secret.txt", 0x2028),
            ("cat\u{2009}secret.txt", 0x2009),
            ("cat\u{85}secret.txt", 0x85),
            ("cat\u{b}secret.txt", 0xb),
            ("cat\u{c}secret.txt", 0xc),
            ("cat\u{1}secret.txt", 0x1),
            ("cat\u{7f}secret.txt", 0x7f),
            ("cat secret\u{200b}.txt", 0x200b),
            ("cat \u{202e}txt.terces", 0x202e),
            ("\u{a0}cat secret.txt", 0xa0),
        ] {
            match BashCommand::parse(spelling) {
                Err(BashCommandError::Character { code: found, .. }) => assert_eq!(found, code, "{spelling:?}"),
                other => panic!("{spelling:?}: {other:?}"),
            }
        }
        let message = BashCommand::parse("cat\u{a0}x").unwrap_err().to_string();
        assert!(message.contains("U+00A0 (no-break space)"), "{message}");
    }

    #[test]
    fn shell_syntax_and_missing_commands_are_refused_first() {
        assert_eq!(BashCommand::parse(" \t "), Err(BashCommandError::Missing));
        assert_eq!(BashCommand::parse("ls; rm x"), Err(BashCommandError::ShellSyntax("';'")));
        assert_eq!(BashCommand::parse("ls\nrm"), Err(BashCommandError::ShellSyntax("a line break")));
        assert_eq!(BashCommand::parse("ls\u{a0}|x"), Err(BashCommandError::ShellSyntax("'|'")));
        assert_eq!(BashCommand::from_args(&json!({})), Err(BashCommandError::Missing));
        assert_eq!(BashCommand::from_args(&json!({"command": null})).unwrap().program(), "null");
        assert_eq!(BashCommand::from_args(&json!({"command": 5})).unwrap().program(), "5");
    }

    #[test]
    fn git_neutral_options_before_the_subcommand_are_not_matched() {
        for spelling in
            ["git log", "git  log", "git\tlog", "git --no-pager log", "git -P log", "git -P --no-optional-locks log"]
        {
            assert_eq!(text(spelling).unwrap(), "git log", "{spelling:?}");
        }
        // After the subcommand `-P` is the subcommand's own option; other globals stay.
        assert_eq!(text("git log -P x").unwrap(), "git log -P x");
        assert_eq!(text("git --version log").unwrap(), "git --version log");
        assert_eq!(text("gitx -P log").unwrap(), "gitx -P log");
        assert_eq!(text("git -P").unwrap(), "git");
    }
}
