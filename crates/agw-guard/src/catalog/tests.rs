use super::*;
use crate::rules::Action;

const GOOD: &str = r#"{"rules":[{"id":"k","keywords":["x"],"action":"warn"}]}"#;

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).expect("write a test file");
}

#[test]
fn the_bundled_demo_set_loads() {
    let catalog = GuardCatalog::bundled();
    assert_eq!(catalog.names().collect::<Vec<_>>(), ["demo"]);
    let demo = catalog.get("demo").expect("demo");
    let actions: Vec<(&str, Action)> = demo.rules().iter().map(|r| (r.id(), r.action())).collect();
    assert_eq!(
        actions,
        [
            ("forbidden-topic", Action::Block),
            ("medical-advice", Action::Warn),
            ("email", Action::Redact),
            ("card-number", Action::Redact)
        ]
    );
    let out = demo.redact("Write to Ann.Lee@example.co.uk, card 4111 1111 1111 1111; the dosage of a Nerve Agent.");
    assert_eq!(out.text, "Write to [email], card [card number]; the dosage of a Nerve Agent.");
    let rules: Vec<&str> = out.hits.iter().map(|h| h.rule.as_str()).collect();
    assert_eq!(rules, ["email", "card-number", "medical-advice", "forbidden-topic"]);
    // Not a card number: 17 digits in a row, or 15.
    assert_eq!(demo.redact("41111111111111111 and 411111111111111").text, "41111111111111111 and 411111111111111");
}

#[test]
fn a_broken_file_is_skipped_and_the_others_load() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "b.json", GOOD);
    write(dir.path(), "a.json", r#"{"rules":[{"id":"r1","keywords":["x"],"regex":"y","action":"block"}]}"#);
    write(dir.path(), "c.json", "{not json");
    write(dir.path(), "d.json", GOOD);
    write(dir.path(), "notes.txt", "ignored");
    write(dir.path(), ".hidden.json", "ignored");
    write(dir.path(), "bad name.json", GOOD);
    std::fs::create_dir(dir.path().join("sub.json")).expect("mkdir");
    let (catalog, errors) = GuardCatalog::load_dir(dir.path());
    assert_eq!(catalog.names().collect::<Vec<_>>(), ["b", "d"]);
    assert_eq!((catalog.len(), catalog.is_empty()), (2, false));
    assert_eq!(catalog.get("b").expect("b").name(), "b");
    assert!(catalog.get("a").is_none());
    let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(messages.len(), 4, "{messages:#?}");
    assert!(
        messages[0].ends_with(r#"a.json: rule "r1": has both `keywords` and `regex`; give one"#),
        "{}",
        messages[0]
    );
    assert!(matches!(&errors[1], CatalogError::Rules { source: RuleError::BadName(n), .. } if n == "bad name"));
    assert!(matches!(&errors[2], CatalogError::Rules { source: RuleError::Syntax(_), .. }));
    assert!(matches!(&errors[3], CatalogError::NotAFile { path } if path.ends_with("sub.json")));
}

#[cfg(unix)]
#[test]
fn symbolic_links_are_refused() {
    let outside = tempfile::tempdir().expect("tempdir");
    write(outside.path(), "secret.json", GOOD);
    let dir = tempfile::tempdir().expect("tempdir");
    std::os::unix::fs::symlink(outside.path().join("secret.json"), dir.path().join("link.json")).expect("symlink");
    write(dir.path(), "ok.json", GOOD);
    let (catalog, errors) = GuardCatalog::load_dir(dir.path());
    assert_eq!(catalog.names().collect::<Vec<_>>(), ["ok"]);
    assert!(matches!(&errors[..], [CatalogError::Symlink { path }] if path.ends_with("link.json")));
}

#[test]
fn a_file_too_large_is_refused_before_it_is_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = std::fs::File::create(dir.path().join("big.json")).expect("create");
    file.set_len(MAX_FILE_BYTES + 1).expect("a sparse file");
    let (catalog, errors) = GuardCatalog::load_dir(dir.path());
    assert!(catalog.is_empty());
    assert!(matches!(&errors[..], [CatalogError::Rules { source: RuleError::TooLarge { .. }, .. }]));
}

#[test]
fn a_missing_directory_is_one_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (catalog, errors) = GuardCatalog::load_dir(dir.path().join("none"));
    assert!(catalog.is_empty());
    assert!(
        matches!(&errors[..], [CatalogError::ReadDir { source, .. }] if source.kind() == std::io::ErrorKind::NotFound)
    );
}

#[test]
fn from_sets_refuses_two_sets_with_one_name() {
    let a = RuleSet::parse("a", GOOD).expect("valid");
    let b = Arc::new(RuleSet::parse("b", GOOD).expect("valid"));
    let catalog = GuardCatalog::from_sets([Arc::new(a), b.clone()]).expect("distinct");
    assert_eq!(catalog.names().collect::<Vec<_>>(), ["a", "b"]);
    assert!(Arc::ptr_eq(&catalog.get("b").expect("b"), &b));
    let twice =
        GuardCatalog::from_sets([RuleSet::parse("a", GOOD).expect("valid"), RuleSet::parse("a", GOOD).expect("valid")]);
    assert!(matches!(twice, Err(CatalogError::Duplicate { name }) if name == "a"));
}

#[test]
fn a_reload_keeps_the_last_good_set_of_a_file_that_broke_and_drops_deleted_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "kept.json", GOOD);
    write(dir.path(), "gone.json", GOOD);
    let (first, errors) = GuardCatalog::load_dir(dir.path());
    assert!(errors.is_empty() && first.len() == 2);
    write(dir.path(), "kept.json", "{\"rules\": [{\"id\": \"x\"}]}");
    std::fs::remove_file(dir.path().join("gone.json")).expect("remove");
    write(dir.path(), "new.json", "{\"rules\": []");
    let (second, errors) = first.reload_dir(dir.path());
    assert_eq!(second.names().collect::<Vec<_>>(), ["kept"], "the typo keeps the set; a never-good file stays out");
    assert!(Arc::ptr_eq(&second.get("kept").expect("kept"), &first.get("kept").expect("kept")));
    assert_eq!(errors.len(), 2);
}

#[test]
fn the_bundled_sets_fill_names_a_directory_does_not_have() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "demo.json", GOOD);
    write(dir.path(), "mine.json", GOOD);
    let (loaded, _) = GuardCatalog::load_dir(dir.path());
    let own_demo = loaded.get("demo").expect("demo");
    let merged = loaded.or_sets_of(&GuardCatalog::bundled());
    assert_eq!(merged.names().collect::<Vec<_>>(), ["demo", "mine"]);
    assert!(Arc::ptr_eq(&merged.get("demo").expect("demo"), &own_demo), "the directory's file wins");
    let only_bundled = GuardCatalog::default().or_sets_of(&GuardCatalog::bundled());
    assert_eq!(only_bundled.names().collect::<Vec<_>>(), ["demo"]);
}
