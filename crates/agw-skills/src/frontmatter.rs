//! Reading one `SKILL.md` (docs/contract/tools-skills-viewports.md §9): the frontmatter block between two `---`
//! lines is YAML (parsed with `serde-saphyr`); only `name` and `description` are used.
//!
//! Delimiting follows the contract exactly: after CRLF→LF, when the first line (trimmed) is `---`
//! and a later line (trimmed) is `---`, the lines between are the frontmatter and the lines after
//! the closing `---` (joined by `\n`, trimmed) the body. Without such a block the whole text
//! (trimmed) is the body. Unlike the reference's line splitter, the block is real YAML: quoting,
//! comments, block scalars (`>`/`|`) work as YAML says, and a block that is not valid YAML (e.g. an
//! unquoted `description: use it for: x`) is an error — the loader reports the skill and skips it.

use std::fmt;

use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};

/// What a `SKILL.md` says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SkillText {
    /// Trimmed; `None` when absent, null or blank.
    pub name: Option<String>,
    /// Trimmed; `None` when absent, null or blank.
    pub description: Option<String>,
    /// Trimmed instructions.
    pub body: String,
}

/// A frontmatter block that is not valid YAML, or not a mapping with scalar `name`/`description`.
/// Its display is a one-line message naming the line (counted in the file) and column of the
/// problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct FrontmatterError {
    message: String,
}

/// Parses the text of a `SKILL.md`. Pure (no I/O): public as
/// [`parse_skill_md`](crate::parse_skill_md) for the fuzz targets.
pub fn parse(text: &str) -> Result<SkillText, FrontmatterError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text).replace("\r\n", "\n");
    let lines: Vec<&str> = text.split('\n').collect();
    let closing = match lines.first() {
        Some(first) if first.trim() == "---" => {
            lines.iter().skip(1).position(|line| line.trim() == "---").map(|i| i + 1)
        }
        _ => None,
    };
    let Some(closing) = closing else {
        return Ok(SkillText { name: None, description: None, body: text.trim().to_owned() });
    };
    let yaml = lines[1..closing].join("\n");
    let fields = serde_saphyr::from_str::<Fields>(&yaml).map_err(|e| {
        // The YAML starts on line 2 of the file.
        let options = serde_saphyr::render_options! { snippets: serde_saphyr::SnippetMode::Off, line_offset: 1 };
        FrontmatterError { message: e.render_with_options(options).replace('\n', " ") }
    })?;
    Ok(SkillText {
        name: non_blank(fields.name),
        description: non_blank(fields.description),
        body: lines[closing + 1..].join("\n").trim().to_owned(),
    })
}

fn non_blank(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

/// The frontmatter mapping. Keys are matched trimmed and case-insensitively; values of other keys
/// (`license`, `metadata`, …) may be anything and are ignored. An empty block (or one holding only
/// comments) has no fields. `name`/`description` must be scalars (plain scalars keep their
/// spelling: `007` stays `"007"`).
#[derive(Debug, Default)]
struct Fields {
    name: Option<String>,
    description: Option<String>,
}

impl<'de> Deserialize<'de> for Fields {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FieldsVisitor;

        impl<'de> Visitor<'de> for FieldsVisitor {
            type Value = Fields;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping of frontmatter keys")
            }

            fn visit_unit<E>(self) -> Result<Fields, E> {
                Ok(Fields::default())
            }

            fn visit_none<E>(self) -> Result<Fields, E> {
                Ok(Fields::default())
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields, A::Error> {
                let mut fields = Fields::default();
                while let Some(key) = map.next_key::<String>()? {
                    match key.trim().to_lowercase().as_str() {
                        "name" => fields.name = map.next_value()?,
                        "description" => fields.description = map.next_value()?,
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(fields)
            }
        }

        deserializer.deserialize_map(FieldsVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> SkillText {
        parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
    }

    fn skill(name: Option<&str>, description: Option<&str>, body: &str) -> SkillText {
        SkillText { name: name.map(str::to_owned), description: description.map(str::to_owned), body: body.to_owned() }
    }

    #[test]
    fn plain_frontmatter() {
        assert_eq!(
            ok(
                "---\nname: screenshot\ndescription: capture screenshots\n---\n# Skill Prompt\nalways verify target window.\n"
            ),
            skill(Some("screenshot"), Some("capture screenshots"), "# Skill Prompt\nalways verify target window.")
        );
    }

    #[test]
    fn quotes_comments_and_ignored_keys() {
        let text = "---\n# a comment\n\nname: \"Quoted Name\"  # trailing comment\ndescription: 'it''s: fine'\nlicense: MIT\nmetadata:\n  tags: [a, b]\n---\nbody";
        assert_eq!(ok(text), skill(Some("Quoted Name"), Some("it's: fine"), "body"));
    }

    #[test]
    fn keys_are_case_insensitive_and_values_trimmed() {
        assert_eq!(ok("---\nName:   x  \nDESCRIPTION: \"  y  \"\n---\nb"), skill(Some("x"), Some("y"), "b"));
    }

    #[test]
    fn plain_scalars_keep_their_spelling() {
        assert_eq!(ok("---\nname: 007\ndescription: yes\n---\n"), skill(Some("007"), Some("yes"), ""));
        assert_eq!(ok("---\nname: 1e3\ndescription: 12.50\n---\n"), skill(Some("1e3"), Some("12.50"), ""));
    }

    #[test]
    fn block_scalars() {
        let text = "---\ndescription: >\n  folded\n  text\nname: |\n  literal\n---\nbody";
        assert_eq!(ok(text), skill(Some("literal"), Some("folded text"), "body"));
    }

    #[test]
    fn null_blank_and_empty() {
        assert_eq!(ok("---\nname: ~\ndescription: \"  \"\n---\nbody"), skill(None, None, "body"));
        assert_eq!(ok("---\n---\nbody"), skill(None, None, "body"));
        assert_eq!(ok("---\n# only a comment\n---\n\n body \n"), skill(None, None, "body"));
    }

    #[test]
    fn missing_frontmatter_is_all_body() {
        assert_eq!(ok("  # Title\nname: x\n"), skill(None, None, "# Title\nname: x"));
        // An opening `---` without a closing one is not frontmatter.
        assert_eq!(ok("---\nname: x\nbody"), skill(None, None, "---\nname: x\nbody"));
        // The opening line must be the first line.
        assert_eq!(ok("\n---\nname: x\n---\nb"), skill(None, None, "---\nname: x\n---\nb"));
        assert_eq!(ok(""), skill(None, None, ""));
    }

    #[test]
    fn crlf_bom_and_padded_delimiters() {
        let text = "\u{feff} --- \r\nname: n\r\ndescription: d\r\n---  \r\nline 1\r\nline 2\r\n";
        assert_eq!(ok(text), skill(Some("n"), Some("d"), "line 1\nline 2"));
    }

    #[test]
    fn body_keeps_later_delimiters() {
        assert_eq!(ok("---\nname: n\n---\na\n---\nb"), skill(Some("n"), None, "a\n---\nb"));
    }

    #[test]
    fn broken_yaml_is_an_error_with_its_file_line() {
        let err = parse("---\nname: n\ndescription: use it for: x\n---\nbody").unwrap_err().to_string();
        assert!(err.contains("line 3"), "{err}");
        assert!(!err.contains('\n'), "{err}");
        assert!(parse("---\nname: [a, b]\n---\n").is_err());
        assert!(parse("---\njust a string\n---\n").is_err());
        assert!(parse("---\nname: a\nname: b\n---\n").is_err());
        assert!(parse("---\nname: \"unterminated\n---\n").is_err());
    }
}
