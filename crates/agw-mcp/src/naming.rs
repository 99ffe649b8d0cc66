//! The names MCP tools are offered to the model under: `mcp__<server>__<tool>`.
//!
//! Model APIs accept function names of `[A-Za-z0-9_-]{1,64}`, and agw's tool registry keys tools
//! case-insensitively ([`agw_tools::Tool::name`] is lower-case by contract), so every character
//! outside `[a-z0-9_-]` becomes `_` (ASCII capitals are lower-cased first) and the name is cut to
//! 64 characters. Two tools that end up with the same name are told apart deterministically.

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

/// A tool that could not get its [`base_name`] because an earlier tool (in `(server, tool)`
/// order) already had it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameCollision {
    /// The server, as declared.
    pub server: String,
    /// The tool's MCP name.
    pub tool: String,
    /// The name it would have had.
    pub wanted: String,
    /// The name it got.
    pub assigned: String,
}

/// Assigns every `(server, tool)` pair a unique model-facing name; the result is in input order.
///
/// Pairs are visited sorted by `(server, tool)`, so the outcome does not depend on listing order.
/// First every [`base_name`] goes to the first pair that wants it; then each remaining pair takes
/// the first free `<base>_2`, `<base>_3`, … (the base cut so the whole name stays within
/// [`MAX_TOOL_NAME_CHARS`]). A suffixed name never displaces a tool whose own base name it is.
/// Each renamed pair is reported as a [`NameCollision`]; an exact duplicate pair is renamed too.
pub fn assign_names<S: AsRef<str>, T: AsRef<str>>(pairs: &[(S, T)]) -> (Vec<String>, Vec<NameCollision>) {
    let mut order: Vec<usize> = (0..pairs.len()).collect();
    order.sort_by(|&a, &b| {
        (pairs[a].0.as_ref(), pairs[a].1.as_ref()).cmp(&(pairs[b].0.as_ref(), pairs[b].1.as_ref())).then(a.cmp(&b))
    });
    let bases: Vec<String> = pairs.iter().map(|(s, t)| base_name(s.as_ref(), t.as_ref())).collect();
    let mut taken = std::collections::HashSet::new();
    let mut assigned: Vec<Option<String>> = vec![None; pairs.len()];
    for &index in &order {
        if taken.insert(bases[index].clone()) {
            assigned[index] = Some(bases[index].clone());
        }
    }
    let mut collisions = Vec::new();
    for &index in &order {
        if assigned[index].is_some() {
            continue;
        }
        let base = &bases[index];
        let name = (2usize..)
            .map(|n| {
                let suffix = format!("_{n}");
                let mut stem = base.clone();
                stem.truncate(MAX_TOOL_NAME_CHARS - suffix.len());
                stem + &suffix
            })
            .find(|candidate| !taken.contains(candidate))
            .unwrap_or_default();
        taken.insert(name.clone());
        collisions.push(NameCollision {
            server: pairs[index].0.as_ref().to_owned(),
            tool: pairs[index].1.as_ref().to_owned(),
            wanted: base.clone(),
            assigned: name.clone(),
        });
        assigned[index] = Some(name);
    }
    (assigned.into_iter().map(Option::unwrap_or_default).collect(), collisions)
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
        for name in names {
            assert!(!name.is_empty() && name.len() <= MAX_TOOL_NAME_CHARS, "{name}");
            assert!(
                name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-'),
                "{name}"
            );
        }
    }

    #[test]
    fn collisions_get_suffixes_in_sorted_order_and_are_reported() {
        // Byte order: "A B" < "a.b" < "a_b", whatever order the server listed them in.
        let pairs = [("s", "a_b"), ("s", "a.b"), ("s", "A B"), ("s", "other")];
        let (names, collisions) = assign_names(&pairs);
        assert_eq!(names, ["mcp__s__a_b_3", "mcp__s__a_b_2", "mcp__s__a_b", "mcp__s__other"]);
        let note = |tool: &str, assigned: &str| NameCollision {
            server: "s".into(),
            tool: tool.into(),
            wanted: "mcp__s__a_b".into(),
            assigned: assigned.into(),
        };
        assert_eq!(collisions, [note("a.b", "mcp__s__a_b_2"), note("a_b", "mcp__s__a_b_3")]);
        let (reversed, _) = assign_names(&[pairs[3], pairs[2], pairs[1], pairs[0]]);
        assert_eq!(reversed, ["mcp__s__other", "mcp__s__a_b", "mcp__s__a_b_2", "mcp__s__a_b_3"]);
    }

    #[test]
    fn servers_that_sanitise_alike_collide_too() {
        let (names, collisions) = assign_names(&[("a.b", "t"), ("a_b", "t")]);
        assert_eq!(names, ["mcp__a_b__t", "mcp__a_b__t_2"]);
        assert_eq!(collisions.len(), 1);
        assert_eq!(collisions[0].server, "a_b");
    }

    #[test]
    fn a_suffix_never_takes_an_existing_name() {
        // "a_b_2" is a real tool: it keeps its own name, and the second of "a.b"/"a_b" skips it.
        let (names, collisions) = assign_names(&[("s", "a_b_2"), ("s", "a_b"), ("s", "a.b"), ("s", "a.b")]);
        assert_eq!(names, ["mcp__s__a_b_2", "mcp__s__a_b_4", "mcp__s__a_b", "mcp__s__a_b_3"]);
        assert_eq!(collisions.len(), 2);
    }

    #[test]
    fn suffixes_stay_within_64_characters() {
        let long = "x".repeat(100);
        let pairs: Vec<(&str, String)> = (0..12).map(|i| ("server", format!("{long}{i}"))).collect();
        let (names, collisions) = assign_names(&pairs);
        assert_eq!(collisions.len(), 11);
        let unique: std::collections::HashSet<_> = names.iter().collect();
        assert_eq!(unique.len(), 12);
        for name in &names {
            assert!(name.len() <= MAX_TOOL_NAME_CHARS, "{name}");
        }
        // The 10th and later suffixes are longer and cut one more character of the base.
        assert!(names.iter().any(|n| n.ends_with("_12") && n.len() == MAX_TOOL_NAME_CHARS));
    }
}
