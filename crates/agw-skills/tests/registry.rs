//! Loading a skills directory (docs/contract/tools-skills-viewports.md §9) and the prompt texts built from it
//! (docs/contract/modes.md §6.2–§6.3).

mod common;

use agw_skills::{DEFAULT_MAX_PROMPT_CHARS, SkillRegistry, truncate_body};
use common::{temp, write};

const SCREENSHOT: &str =
    "---\nname: screenshot\ndescription: capture screenshots\n---\n# Skill Prompt\nalways verify target window.\n";

fn ids(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn layout_rules() {
    let (_guard, root) = temp();
    write(root.join("Screenshot/SKILL.md"), SCREENSHOT);
    write(root.join("Screenshot/scripts/demo_echo.py"), "print(1)\n");
    write(root.join(" Spaced /SKILL.md"), "just a body");
    write(root.join("README.md"), "stray");
    write(root.join("no_skill_file/notes.txt"), "not a skill");
    write(root.join("lowercase_only/skill.md"), "wrong file name");
    write(root.join("broken/SKILL.md"), "---\nname: broken\ndescription: use it for: anything\n---\nbody");
    write(root.join("nested/deeper/SKILL.md"), "---\nname: too deep\n---\n");
    let registry = SkillRegistry::load(&root);

    assert_eq!(registry.ids(), ["screenshot", "spaced"]);
    assert_eq!(registry.root(), root);
    let screenshot = registry.get("  SCREENSHOT ").unwrap();
    assert_eq!(screenshot.id, "screenshot");
    assert_eq!(screenshot.name, "screenshot");
    assert_eq!(screenshot.description, "capture screenshots");
    assert_eq!(screenshot.body, "# Skill Prompt\nalways verify target window.");
    assert_eq!(screenshot.dir, root.join("Screenshot"));
    // Without frontmatter: name defaults to the id, description to "", the whole text is the body.
    let spaced = registry.get("spaced").unwrap();
    assert_eq!(
        (spaced.name.as_str(), spaced.description.as_str(), spaced.body.as_str()),
        ("spaced", "", "just a body")
    );
    assert!(registry.get("broken").is_none());
    assert!(registry.get("no_skill_file").is_none());

    let problems: Vec<(&str, &str)> =
        registry.problems().iter().map(|p| (p.file.as_str(), p.message.as_str())).collect();
    assert_eq!(problems.len(), 2, "{problems:?}");
    let stray = root.join("README.md");
    assert_eq!(
        problems[0],
        (
            stray.display().to_string().as_str(),
            format!(
                "Invalid skill layout entry '{}'. Skill files must be placed at skills/<skill-id>/SKILL.md",
                stray.display()
            )
            .as_str()
        )
    );
    assert_eq!(problems[1].0, root.join("broken/SKILL.md").display().to_string());
    assert!(problems[1].1.starts_with("invalid SKILL.md frontmatter: "), "{}", problems[1].1);
    assert!(problems[1].1.contains("line 3"), "{}", problems[1].1);
    assert!(registry.problems()[1].to_string().starts_with(&root.join("broken/SKILL.md").display().to_string()));
}

#[test]
fn duplicate_ids_first_in_name_order_wins() {
    let (_guard, root) = temp();
    write(root.join("Dup/SKILL.md"), "---\ndescription: first\n---\nA");
    write(root.join("dup/SKILL.md"), "---\ndescription: second\n---\nB");
    write(root.join("dup /SKILL.md"), "---\ndescription: third\n---\nC");
    let registry = SkillRegistry::load(&root);
    assert_eq!(registry.ids(), ["dup"]);
    assert_eq!(registry.get("dup").unwrap().description, "first");
    assert_eq!(registry.get("dup").unwrap().dir, root.join("Dup"));
    assert_eq!(registry.problems().len(), 2);
    assert_eq!(registry.problems()[0].file, root.join("dup").display().to_string());
    assert!(registry.problems()[0].message.starts_with("duplicate skill id 'dup'"));
}

#[test]
fn a_broken_first_copy_does_not_hide_a_good_one() {
    let (_guard, root) = temp();
    write(root.join("A/SKILL.md"), "---\nname: [broken\n---\n");
    write(root.join("a/SKILL.md"), "---\nname: good\n---\nbody");
    let registry = SkillRegistry::load(&root);
    assert_eq!(registry.get("a").unwrap().name, "good");
    assert_eq!(registry.problems().len(), 1);
}

#[test]
fn frontmatter_variants() {
    let (_guard, root) = temp();
    write(
        root.join("quoted/SKILL.md"),
        "---\r\n# comment line\r\nname: \"Quoted: Name\"\r\ndescription: 'single ''quoted'''  # trailing\r\nlicense: Apache-2.0\r\n---\r\n\r\nLine one\r\nLine two\r\n",
    );
    write(root.join("unclosed/SKILL.md"), "---\nname: x\nno closing line");
    let registry = SkillRegistry::load(&root);
    assert!(registry.problems().is_empty(), "{:?}", registry.problems());
    let quoted = registry.get("quoted").unwrap();
    assert_eq!(quoted.name, "Quoted: Name");
    assert_eq!(quoted.description, "single 'quoted'");
    assert_eq!(quoted.body, "Line one\nLine two");
    let unclosed = registry.get("unclosed").unwrap();
    assert_eq!((unclosed.name.as_str(), unclosed.body.as_str()), ("unclosed", "---\nname: x\nno closing line"));
}

#[test]
fn missing_root_is_empty() {
    let (_guard, root) = temp();
    let registry = SkillRegistry::load(&root.join("nope"));
    assert!(registry.is_empty());
    assert!(registry.ids().is_empty());
    assert!(registry.problems().is_empty());
    assert_eq!(registry.catalog_prompt(&ids(&["x"]), "H"), "");
}

#[test]
fn root_that_is_a_file_is_reported() {
    let (_guard, dir) = temp();
    write(dir.join("file"), "x");
    let registry = SkillRegistry::load(&dir.join("file"));
    assert!(registry.is_empty());
    assert_eq!(registry.problems().len(), 1);
}

#[cfg(unix)]
#[test]
fn symlinks_leaving_the_root_are_refused() {
    use std::os::unix::fs::symlink;
    let (_guard, dir) = temp();
    let root = dir.join("skills");
    write(dir.join("outside/SKILL.md"), "---\nname: outside\n---\nsecret instructions");
    write(dir.join("secret.txt"), "secret");
    write(root.join("inside/SKILL.md"), "---\nname: inside\n---\nbody");
    symlink(dir.join("outside"), root.join("escape")).unwrap();
    symlink(root.join("inside"), root.join("alias")).unwrap();
    std::fs::create_dir_all(root.join("leaky")).unwrap();
    symlink(dir.join("secret.txt"), root.join("leaky/SKILL.md")).unwrap();
    symlink(dir.join("missing"), root.join("dangling")).unwrap();
    let registry = SkillRegistry::load(&root);
    // A symlink to a directory inside the root is fine.
    assert_eq!(registry.ids(), ["alias", "inside"]);
    let mut refused: Vec<_> = registry.problems().iter().map(|p| std::path::PathBuf::from(&p.file)).collect();
    refused.sort();
    assert_eq!(refused, [root.join("dangling"), root.join("escape"), root.join("leaky/SKILL.md")]);
}

#[test]
fn catalog_text() {
    let (_guard, root) = temp();
    write(root.join("screenshot/SKILL.md"), SCREENSHOT);
    write(root.join("math/SKILL.md"), "---\nname: Math\n---\nDo math.");
    write(root.join("plain/SKILL.md"), "---\ndescription: only a description\n---\n");
    let registry = SkillRegistry::load(&root);
    let catalog = registry.catalog_prompt(&ids(&["math", "unknown_skill", "Screenshot", "plain", "math"]), "HEADER:");
    assert_eq!(
        catalog,
        "HEADER:\n\nskillId: math\nname: Math\n\n---\n\nskillId: screenshot\nname: screenshot\ndescription: capture screenshots\n\n---\n\nskillId: plain\nname: plain\ndescription: only a description"
    );
    // Reference DefinitionDrivenAgentTest 5: the catalog names the skill but never its body.
    let catalog = registry.catalog_prompt(&ids(&["screenshot"]), "Available skills:");
    assert!(catalog.contains("skillId: screenshot"));
    assert!(catalog.contains("description: capture screenshots"));
    assert!(!catalog.contains("instructions:"));
    assert!(!catalog.contains("always verify target window."));
    assert_eq!(registry.catalog_prompt(&ids(&["unknown_skill"]), "HEADER:"), "");
    assert_eq!(registry.catalog_prompt(&[], "HEADER:"), "");
}

#[test]
fn disclosure_text() {
    let (_guard, root) = temp();
    write(root.join("screenshot/SKILL.md"), SCREENSHOT);
    write(root.join("math/SKILL.md"), "---\nname: Math\ndescription: numbers\n---\nDo math.");
    write(root.join("empty/SKILL.md"), "---\nname: empty\n---\n\n");
    let registry = SkillRegistry::load(&root);
    let disclosure =
        registry.disclosure_prompt(&ids(&["screenshot", "empty", "unknown_skill", "math"]), "DISCLOSE", "steps:", 8000);
    assert_eq!(
        disclosure,
        "DISCLOSE\n\nskillId: screenshot\nname: screenshot\ndescription: capture screenshots\nsteps:\n# Skill Prompt\nalways verify target window.\n\n---\n\nskillId: math\nname: Math\ndescription: numbers\nsteps:\nDo math."
    );
    // A skill with an empty body gives no block; nothing left → "".
    assert_eq!(registry.disclosure_prompt(&ids(&["empty", "unknown_skill"]), "DISCLOSE", "steps:", 8000), "");
    // agw's default label already carries its colon and is printed as given.
    let default_label = registry.disclosure_prompt(&ids(&["math"]), "H", "instructions:", 0);
    assert_eq!(default_label, "H\n\nskillId: math\nname: Math\ndescription: numbers\ninstructions:\nDo math.");
}

#[test]
fn disclosure_truncates_bodies_on_a_character_boundary() {
    let (_guard, root) = temp();
    let body = "数".repeat(10) + "tail";
    write(root.join("long/SKILL.md"), &format!("---\nname: long\n---\n{body}"));
    let registry = SkillRegistry::load(&root);
    let disclosure = registry.disclosure_prompt(&ids(&["long"]), "H", "instructions:", 5);
    assert_eq!(
        disclosure,
        "H\n\nskillId: long\nname: long\ninstructions:\n数数数数数\n\n[TRUNCATED: skill prompt exceeds maxPromptChars=5]"
    );
    // 0 = unlimited.
    assert!(registry.disclosure_prompt(&ids(&["long"]), "H", "instructions:", 0).ends_with("数tail"));
    assert_eq!(DEFAULT_MAX_PROMPT_CHARS, 8000);
    let big = "é".repeat(8001);
    let cut = truncate_body(&big, DEFAULT_MAX_PROMPT_CHARS);
    assert_eq!(cut, format!("{}\n\n[TRUNCATED: skill prompt exceeds maxPromptChars=8000]", "é".repeat(8000)));
}
