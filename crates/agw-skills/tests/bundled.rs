//! The skills shipped with agw: embedded files, materialisation, and every script computing real
//! results through `_skill_run_script_`.

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use agw_skills::SkillRegistry;
use agw_skills::bundled::{SKILL_FILES, SKILL_IDS, materialize};
use common::{run, temp, tool, write};
use serde_json::{Value, json};

fn stdout_json(result: &Value) -> Value {
    serde_json::from_str(result["stdout"].as_str().unwrap_or_else(|| panic!("{result}")))
        .unwrap_or_else(|e| panic!("{e}: {result}"))
}

fn files_under(dir: &Path, prefix: &str, out: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = format!("{prefix}{}", entry.file_name().to_str().unwrap());
        if entry.file_type().unwrap().is_dir() {
            files_under(&entry.path(), &format!("{name}/"), out);
        } else {
            out.insert(name);
        }
    }
}

#[test]
fn embedded_files_are_exactly_the_fixture_tree() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("bundled");
    let mut on_disk = BTreeSet::new();
    files_under(&fixtures, "", &mut on_disk);
    let embedded: BTreeSet<String> = SKILL_FILES.iter().map(|(path, _)| (*path).to_owned()).collect();
    assert_eq!(embedded, on_disk);
    for (path, contents) in SKILL_FILES {
        assert_eq!(std::fs::read_to_string(fixtures.join(path)).unwrap(), *contents, "{path}");
    }
}

#[test]
fn materialized_skills_load_cleanly() {
    let (_guard, dir) = temp();
    let root = dir.join("skills");
    materialize(&root).unwrap();
    let registry = SkillRegistry::load(&root);
    assert!(registry.problems().is_empty(), "{:?}", registry.problems());
    assert_eq!(registry.ids(), SKILL_IDS);
    for skill in registry.skills() {
        assert_eq!(skill.name, skill.id);
        assert!(!skill.description.is_empty(), "{}", skill.id);
        assert!(skill.body.contains("_skill_run_script_"), "{} must say how to call its script", skill.id);
        assert!(skill.body.contains(&format!("\"skill\": \"{}\"", skill.id)), "{}", skill.id);
        assert!(skill.body.chars().count() < agw_skills::DEFAULT_MAX_PROMPT_CHARS, "{} would be truncated", skill.id);
    }
}

#[test]
fn materialize_overwrites_its_files_and_keeps_others() {
    let (_guard, dir) = temp();
    let root = dir.join("skills");
    write(root.join("math_basic/SKILL.md"), "edited");
    write(root.join("math_basic/scripts/mine.py"), "print('mine')");
    write(root.join("custom/SKILL.md"), "custom skill");
    materialize(&root).unwrap();
    assert_eq!(std::fs::read_to_string(root.join("math_basic/SKILL.md")).unwrap(), SKILL_FILES[0].1);
    assert_eq!(std::fs::read_to_string(root.join("math_basic/scripts/mine.py")).unwrap(), "print('mine')");
    assert_eq!(std::fs::read_to_string(root.join("custom/SKILL.md")).unwrap(), "custom skill");
    // Idempotent.
    materialize(&root).unwrap();
}

async fn call(root: &Path, skill: &str, script: &str, args: &[&str]) -> Value {
    run(&tool(root), json!({"skill": skill, "script": script, "args": args})).await
}

#[tokio::test]
async fn math_basic_calculates() {
    let (_guard, dir) = temp();
    let root = dir.join("skills");
    materialize(&root).unwrap();
    let calc = |args: &'static [&'static str]| {
        let root = root.clone();
        async move { call(&root, "math_basic", "scripts/calc.py", args).await }
    };
    let result = calc(&["--op", "mul", "--a", "12", "--b", "7"]).await;
    assert_eq!((&result["ok"], &result["exitCode"]), (&json!(true), &json!(0)), "{result}");
    let out = stdout_json(&result);
    assert_eq!(out, json!({"ok": true, "op": "mul", "a": 12, "b": 7, "result": 84}));
    let keys: Vec<_> = out.as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys, ["ok", "op", "a", "b", "result"]);

    assert_eq!(stdout_json(&calc(&["--op", "add", "--a", "0.1", "--b", "0.2"]).await)["result"], json!(0.3));
    assert_eq!(stdout_json(&calc(&["--op", "sub", "--a", "-3", "--b=-4.5"]).await)["result"], json!(1.5));
    assert_eq!(
        stdout_json(&calc(&["--op", "div", "--a", "1", "--b", "3", "--precision", "4"]).await)["result"],
        json!(0.3333)
    );
    assert_eq!(stdout_json(&calc(&["--op", "pow", "--a", "2", "--b", "10"]).await)["result"], json!(1024));
    assert_eq!(stdout_json(&calc(&["--op", "mod", "--a", "-7", "--b", "3"]).await)["result"], json!(2));

    let result = calc(&["--op", "div", "--a", "1", "--b", "0"]).await;
    assert_eq!((&result["ok"], &result["exitCode"]), (&json!(false), &json!(2)));
    assert_eq!(stdout_json(&result), json!({"ok": false, "error": "division by zero"}));
    let result = calc(&["--op", "root", "--a", "1", "--b", "2"]).await;
    assert_eq!((stdout_json(&result)["ok"].clone(), result["exitCode"].clone()), (json!(false), json!(2)));
}

#[tokio::test]
async fn math_stats_calculates() {
    let (_guard, dir) = temp();
    let root = dir.join("skills");
    materialize(&root).unwrap();
    let values = "2,4,4,4,5,5,7,9";
    let stat = |metric: &'static str| {
        let root = root.clone();
        async move {
            stdout_json(&call(&root, "math_stats", "scripts/stats.py", &["--values", values, "--metric", metric]).await)
        }
    };
    assert_eq!(stat("mean").await, json!({"ok": true, "metric": "mean", "count": 8, "result": 5}));
    assert_eq!(stat("median").await["result"], json!(4.5));
    let stdev = stat("stdev").await["result"].as_f64().unwrap();
    assert!((stdev - (32.0f64 / 7.0).sqrt()).abs() < 1e-12, "{stdev}");
    assert_eq!(stat("mode").await["result"], json!(4));
    assert_eq!(
        stat("summary").await["result"],
        json!({"count": 8, "sum": 40, "min": 2, "max": 9, "mean": 5, "median": 4.5, "mode": 4, "stdev": stdev})
    );
    let result = call(&root, "math_stats", "scripts/stats.py", &["--values", "1,x", "--metric", "sum"]).await;
    assert_eq!(result["exitCode"], 2);
    assert_eq!(stdout_json(&result), json!({"ok": false, "error": "value 2 is not a number: 'x'"}));
}

#[tokio::test]
async fn text_utils_measures() {
    let (_guard, dir) = temp();
    let root = dir.join("skills");
    materialize(&root).unwrap();
    let text = "Hello  wörld\nsecond line\n";
    let result = call(&root, "text_utils", "scripts/text_metrics.py", &["--text", text]).await;
    assert_eq!(stdout_json(&result), json!({"ok": true, "chars": 25, "words": 4, "lines": 2, "normalizedText": text}));
    let result = call(&root, "text_utils", "scripts/text_metrics.py", &["--text", text, "--normalize-space"]).await;
    assert_eq!(
        stdout_json(&result),
        json!({"ok": true, "chars": 23, "words": 4, "lines": 1, "normalizedText": "Hello wörld second line"})
    );
    let result = call(&root, "text_utils", "scripts/text_metrics.py", &[]).await;
    assert_eq!(
        (stdout_json(&result), &result["exitCode"]),
        (json!({"ok": false, "error": "missing argument --text"}), &json!(2))
    );
}

#[tokio::test]
async fn screenshot_smoke_test_echoes() {
    let (_guard, dir) = temp();
    let root = dir.join("skills");
    materialize(&root).unwrap();
    let result = call(&root, "screenshot", "scripts/demo_echo.py", &["hello", "两 words"]).await;
    assert_eq!(result["ok"], true);
    assert_eq!(
        stdout_json(&result),
        json!({"ok": true, "skill": "screenshot", "script": "demo_echo.py", "argc": 2, "args": ["hello", "两 words"]})
    );
}
