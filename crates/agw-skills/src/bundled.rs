//! The skills shipped with agw (`bundled/`, also at `fixtures/skills/`), embedded so a binary without that directory
//! still has them. Scripts must exist on disk to run, so [`materialize`] writes them into a skills
//! directory (the caller decides which one and when).

use std::fs;
use std::io;
use std::path::{Component, Path};

/// `(path relative to the skills directory, contents)` of every bundled skill file; paths use `/`.
pub const SKILL_FILES: &[(&str, &str)] = &[
    ("math_basic/SKILL.md", include_str!("../bundled/math_basic/SKILL.md")),
    ("math_basic/scripts/calc.py", include_str!("../bundled/math_basic/scripts/calc.py")),
    ("math_stats/SKILL.md", include_str!("../bundled/math_stats/SKILL.md")),
    ("math_stats/scripts/stats.py", include_str!("../bundled/math_stats/scripts/stats.py")),
    ("screenshot/SKILL.md", include_str!("../bundled/screenshot/SKILL.md")),
    ("screenshot/scripts/demo_echo.py", include_str!("../bundled/screenshot/scripts/demo_echo.py")),
    ("text_utils/SKILL.md", include_str!("../bundled/text_utils/SKILL.md")),
    ("text_utils/scripts/text_metrics.py", include_str!("../bundled/text_utils/scripts/text_metrics.py")),
];

/// Ids of the bundled skills.
pub const SKILL_IDS: &[&str] = &["math_basic", "math_stats", "screenshot", "text_utils"];

/// Writes every bundled file under `dir` (created if missing, sub-directories too), overwriting
/// files of the same path and leaving every other file alone.
pub fn materialize(dir: &Path) -> io::Result<()> {
    for (relative, contents) in SKILL_FILES {
        let relative = Path::new(relative);
        // The table is ours, but a path that could leave `dir` is refused all the same.
        if !relative.components().all(|c| matches!(c, Component::Normal(_))) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("bad bundled path {}", relative.display()),
            ));
        }
        let target = dir.join(relative);
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::write(&target, contents)?;
    }
    Ok(())
}
