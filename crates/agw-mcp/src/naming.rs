//! The names MCP tools are offered to the model under: `mcp__<server>__<tool>`.
//!
//! Model APIs accept function names of `[A-Za-z0-9_-]{1,64}`, and agw's tool registry keys tools
//! case-insensitively ([`agw_tools::Tool::name`] is lower-case by contract), so every character
//! outside `[a-z0-9_-]` becomes `_` (ASCII capitals are lower-cased first) and the name is cut to
//! 64 characters. Of two tools that end up with the same name, one keeps it (deterministically)
//! and the other is skipped, never renamed.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

/// Longest tool name a model API accepts.
pub const MAX_TOOL_NAME_CHARS: usize = 64;
/// Prefix of every MCP tool name.
pub const PREFIX: &str = "mcp__";
/// Between the server and the tool part.
pub const SEPARATOR: &str = "__";

/// `text` with ASCII capitals lower-cased and every character outside `[a-z0-9_-]` replaced by
/// `_` (one `_` per character, so `é` and `😀` each become one `_`).
pub fn sanitize(text: &str) -> String {
    text.chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-' { c } else { '_' }
        })
        .collect()
}

/// The name `tool` of `server` gets when nothing collides with it: `mcp__<server>__<tool>`,
/// sanitised, cut to [`MAX_TOOL_NAME_CHARS`].
pub fn base_name(server: &str, tool: &str) -> String {
    let mut name = format!("{PREFIX}{}{SEPARATOR}{}", sanitize(server), sanitize(tool));
    // Sanitised text is ASCII: byte length is character count.
    name.truncate(MAX_TOOL_NAME_CHARS);
    name
}

/// A tool that was skipped because an earlier tool (in `(server, tool)` order) already has its
/// [`base_name`]. It is not renamed: a suffixed name would let a server steer a tool around an
/// approval rule written for the name it wanted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameCollision {
    /// The skipped tool's server, as declared.
    pub server: String,
    /// The skipped tool's MCP name.
    pub tool: String,
    /// The name both tools want.
    pub name: String,
    /// The server of the tool that has the name.
    pub kept_server: String,
    /// The MCP name of the tool that has the name.
    pub kept_tool: String,
}

impl NameCollision {
    /// The `warn` line naming both tools.
    pub(crate) fn log(&self) {
        tracing::warn!(
            server = %self.server,
            tool = %self.tool,
            name = %self.name,
            kept_server = %self.kept_server,
            kept_tool = %self.kept_tool,
            "MCP tool skipped: its name after sanitising is already another tool's"
        );
    }
}

/// Gives every `(server, tool)` pair its [`base_name`], unless an earlier pair has it already:
/// the result is in input order, `None` for a skipped pair.
///
/// Pairs are visited sorted by `(server, tool)`, so the outcome does not depend on listing order:
/// the first pair that wants a name keeps it, every later one is skipped and reported as a
/// [`NameCollision`] (an exact duplicate pair too).
pub fn assign_names<S: AsRef<str>, T: AsRef<str>>(pairs: &[(S, T)]) -> (Vec<Option<String>>, Vec<NameCollision>) {
    let mut order: Vec<usize> = (0..pairs.len()).collect();
    order.sort_by(|&a, &b| {
        (pairs[a].0.as_ref(), pairs[a].1.as_ref()).cmp(&(pairs[b].0.as_ref(), pairs[b].1.as_ref())).then(a.cmp(&b))
    });
    let mut owners: HashMap<String, usize> = HashMap::new();
    let mut assigned: Vec<Option<String>> = vec![None; pairs.len()];
    let mut collisions = Vec::new();
    for index in order {
        let (server, tool) = (pairs[index].0.as_ref(), pairs[index].1.as_ref());
        match owners.entry(base_name(server, tool)) {
            Entry::Vacant(free) => {
                assigned[index] = Some(free.key().clone());
                free.insert(index);
            }
            Entry::Occupied(taken) => {
                let kept = *taken.get();
                collisions.push(NameCollision {
                    server: server.to_owned(),
                    tool: tool.to_owned(),
                    name: taken.key().clone(),
                    kept_server: pairs[kept].0.as_ref().to_owned(),
                    kept_tool: pairs[kept].1.as_ref().to_owned(),
                });
            }
        }
    }
    (assigned, collisions)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_keep_their_shape() {
        assert_eq!(base_name("github", "create_issue"), "mcp__github__create_issue");
        assert_eq!(base_name("my-server", "get-2"), "mcp__my-server__get-2");
    }

    #[test]
    fn other_characters_become_underscores_and_capitals_lower_case() {
        assert_eq!(sanitize("weird.name/with spaces"), "weird_name_with_spaces");
        assert_eq!(base_name("Git Hub", "Create.Issue"), "mcp__git_hub__create_issue");
        // One underscore per character, whatever its UTF-8 length.
        assert_eq!(sanitize("café😀ß"), "caf___");
        assert_eq!(sanitize("ÄB"), "_b");
        assert_eq!(sanitize(""), "");
    }

    #[test]
    fn long_names_are_cut_to_64_characters() {
        let long = "t".repeat(200);
        let name = base_name("server", &long);
        assert_eq!(name.len(), MAX_TOOL_NAME_CHARS);
        assert!(name.starts_with("mcp__server__ttt"));
        let unicode = "é".repeat(100);
        assert_eq!(base_name(&unicode, "x").len(), MAX_TOOL_NAME_CHARS);
    }

    #[test]
    fn every_assigned_name_is_valid() {
        let pairs = [("a b", "ü"), ("😀", "😀"), (&*"x".repeat(80), "y"), ("s", "-_-")];
        let (names, _) = assign_names(&pairs);
        for name in names.into_iter().flatten() {
            assert!(!name.is_empty() && name.len() <= MAX_TOOL_NAME_CHARS, "{name}");
            assert!(
                name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-'),
                "{name}"
            );
        }
    }

    #[test]
    fn the_first_in_sorted_order_keeps_a_colliding_name_and_the_others_are_skipped() {
        // Byte order: "A B" < "a.b" < "a_b", whatever order the server listed them in.
        let pairs = [("s", "a_b"), ("s", "a.b"), ("s", "A B"), ("s", "other")];
        let (names, collisions) = assign_names(&pairs);
        assert_eq!(names, [None, None, Some("mcp__s__a_b".to_owned()), Some("mcp__s__other".to_owned())]);
        let note = |tool: &str| NameCollision {
            server: "s".into(),
            tool: tool.into(),
            name: "mcp__s__a_b".into(),
            kept_server: "s".into(),
            kept_tool: "A B".into(),
        };
        assert_eq!(collisions, [note("a.b"), note("a_b")]);
        let (reversed, _) = assign_names(&[pairs[3], pairs[2], pairs[1], pairs[0]]);
        assert_eq!(reversed, [Some("mcp__s__other".to_owned()), Some("mcp__s__a_b".to_owned()), None, None]);
    }

    #[test]
    fn servers_that_sanitise_alike_collide_too() {
        let (names, collisions) = assign_names(&[("a.b", "t"), ("a_b", "t")]);
        assert_eq!(names, [Some("mcp__a_b__t".to_owned()), None]);
        assert_eq!(collisions.len(), 1);
        assert_eq!((collisions[0].server.as_str(), collisions[0].kept_server.as_str()), ("a_b", "a.b"));
    }

    #[test]
    fn a_name_that_looks_suffixed_is_just_a_name() {
        // No tool is ever renamed, so "a_b_2" keeps its own name and cannot be taken from it.
        let (names, collisions) = assign_names(&[("s", "a_b_2"), ("s", "a_b"), ("s", "a.b"), ("s", "a.b")]);
        // "a.b" < "a_b" in byte order: the first "a.b" keeps the name.
        assert_eq!(names, [Some("mcp__s__a_b_2".to_owned()), None, Some("mcp__s__a_b".to_owned()), None]);
        assert_eq!(collisions.len(), 2);
        assert!(collisions.iter().all(|c| c.kept_tool == "a.b"));
    }

    #[test]
    fn names_cut_to_64_characters_collide() {
        let long = "x".repeat(100);
        let pairs: Vec<(&str, String)> = (0..12).map(|i| ("server", format!("{long}{i}"))).collect();
        let (names, collisions) = assign_names(&pairs);
        assert_eq!(collisions.len(), 11);
        assert_eq!(names.iter().flatten().count(), 1);
        assert!(names.iter().flatten().all(|name| name.len() == MAX_TOOL_NAME_CHARS));
    }
}
