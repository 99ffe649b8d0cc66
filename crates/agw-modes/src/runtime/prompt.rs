//! Effective system prompt of one turn (contract `modes.md` §6).

/// Joins the non-blank parts with a blank line and trims the result. The parts are, in order:
/// stage prompt, skill catalog, deferred skill disclosure, tool descriptions, after-call hints.
/// Tool and skill sections are added by their issues; the join rule is shared.
pub fn assemble(parts: &[&str]) -> String {
    let joined: Vec<&str> = parts.iter().copied().filter(|p| !p.trim().is_empty()).collect();
    joined.join("\n\n").trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_parts_are_skipped_and_result_trimmed() {
        assert_eq!(assemble(&["  You are A.", "", "  ", "tools:\n- x: y\n"]), "You are A.\n\ntools:\n- x: y");
        assert_eq!(assemble(&["", " "]), "");
    }
}
