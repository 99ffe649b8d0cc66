//! Turning the model's command text into a program and arguments that are safe to run, or a
//! refusal (tools-skills-viewports.md §4.1 steps 1–6, hardened: README decision on symlinks).
//!
//! Nothing here runs anything. The rules, in order:
//! 1. no shell syntax at all (the command is never given to a shell, so it could only mislead);
//! 2. split on whitespace; the first word must be in the allow-list, compared exactly;
//! 3. `git` is limited to read-only subcommands and may not be pointed elsewhere or reconfigured;
//! 4. for path-checked commands every operand, every `--opt=value` value and every value glued to
//!    a short option is resolved through symlinks and must lie inside an allowed root; globs are
//!    expanded first, inside allowed existing directories only.

use std::path::Path;

use super::config::BashConfig;
use super::glob;
use super::paths::Roots;

/// What will be run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Invocation {
    pub program: String,
    pub args: Vec<String>,
}

/// Characters that mean shell syntax. Without a shell they would be passed on literally, which is
/// never what the model meant, so they are refused with an explanation instead.
const FORBIDDEN: [(char, &str); 12] = [
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

/// Read-only git subcommands. Everything else (config, checkout, commit, fetch, clone, submodule,
/// bisect, rebase, remote update, …) can write outside the working tree, reach the network, run
/// hooks or aliases, or execute configured commands.
const GIT_SUBCOMMANDS: [&str; 17] = [
    "status",
    "log",
    "show",
    "diff",
    "blame",
    "shortlog",
    "describe",
    "rev-parse",
    "rev-list",
    "ls-files",
    "ls-tree",
    "cat-file",
    "grep",
    "branch",
    "tag",
    "count-objects",
    "version",
];

/// Options git accepts before the subcommand that we allow; every other one (`-C`, `-c`,
/// `--git-dir`, `--work-tree`, `--exec-path`, `--config-env`, `-p`, …) is refused.
const GIT_GLOBAL_OPTIONS: [&str; 4] = ["--no-pager", "-P", "--version", "--no-optional-locks"];

/// Subcommand options that write files or run other programs.
const GIT_FORBIDDEN_OPTIONS: [&str; 5] = ["--output", "-O", "--open-files-in-pager", "--edit-description", "--exec"];

pub(crate) fn plan(command: &str, config: &BashConfig, roots: &Roots) -> Result<Invocation, String> {
    if command.is_empty() {
        return Err("Missing argument: command".to_owned());
    }
    if let Some((_, what)) = FORBIDDEN.iter().find(|(c, _)| command.contains(*c)) {
        return Err(format!(
            "Shell syntax is not supported: {what}. Commands run without a shell: one whitelisted command, \
             arguments separated by spaces, no pipes, chaining, redirection, substitution, variables or quotes"
        ));
    }
    let mut words = command.split_whitespace().map(str::to_owned);
    let Some(program) = words.next() else {
        return Err("Cannot parse command".to_owned());
    };
    if !config.allowed_commands.contains(&program) {
        return Err(format!("Command not allowed: {program}"));
    }
    let args: Vec<String> = words.collect();
    if program == "git" {
        check_git(&args)?;
    }
    let args = if config.path_checked_commands.contains(&program) { check_paths(args, roots)? } else { args };
    Ok(platform_variant(program, args))
}

fn check_git(args: &[String]) -> Result<(), String> {
    let mut words = args.iter();
    let subcommand = loop {
        match words.next() {
            None => return Ok(()),
            Some(word) if word.starts_with('-') => {
                if !GIT_GLOBAL_OPTIONS.contains(&word.as_str()) {
                    return Err(format!("git option not allowed: {word}"));
                }
            }
            Some(word) => break word,
        }
    };
    if !GIT_SUBCOMMANDS.contains(&subcommand.as_str()) {
        return Err(format!(
            "git subcommand not allowed: {subcommand} (read-only subcommands only: {})",
            GIT_SUBCOMMANDS.join(", ")
        ));
    }
    let mut options_end = false;
    for word in words {
        if word == "--" {
            options_end = true;
        } else if !options_end && word.starts_with('-') {
            if let Some(option) = GIT_FORBIDDEN_OPTIONS.iter().find(|option| git_option_matches(word, option)) {
                return Err(format!("git option not allowed: {option}"));
            }
        } else if word.starts_with(':') {
            // Pathspec magic (`:(top)`, `:/`) re-roots paths; keep paths plain so the checks hold.
            return Err(format!("git pathspec magic not allowed: {word}"));
        }
    }
    Ok(())
}

/// `--output`, `--output=x` and git's accepted abbreviations (`--out=x`); a short option anywhere in
/// a bundle (`-nOvim` is `-n -Ovim`).
fn git_option_matches(word: &str, option: &str) -> bool {
    if let Some(long) = option.strip_prefix("--") {
        let Some(given) = word.strip_prefix("--") else { return false };
        let name = given.split_once('=').map_or(given, |(name, _)| name);
        !name.is_empty() && long.starts_with(name)
    } else {
        !word.starts_with("--") && option.strip_prefix('-').is_some_and(|letter| word[1..].contains(letter))
    }
}

/// Path checks and glob expansion for one path-checked command (§4.1 steps 4–5).
fn check_paths(args: Vec<String>, roots: &Roots) -> Result<Vec<String>, String> {
    let mut checked = Vec::with_capacity(args.len());
    let mut operands_only = false;
    for arg in args {
        if !operands_only && arg == "--" {
            operands_only = true;
            checked.push(arg);
            continue;
        }
        if !operands_only && arg.starts_with('-') {
            if reads_a_path_list(&arg) {
                return Err(format!(
                    "Option not allowed: {arg} (it reads file names from a file, which cannot be checked)"
                ));
            }
            if let Some(value) = option_value(&arg) {
                require_allowed(roots, value, &arg)?;
            }
            checked.push(arg);
            continue;
        }
        for operand in expand(&arg, roots) {
            require_allowed(roots, &operand, &operand)?;
            checked.push(operand);
        }
    }
    Ok(checked)
}

/// GNU `--files0-from=F` (and its accepted abbreviations, down to `--f`): the paths it reads from
/// `F` would bypass the checks. None of the default commands has it; `wc`, `du` and `sort` do.
fn reads_a_path_list(option: &str) -> bool {
    let name = option.split_once('=').map_or(option, |(name, _)| name);
    name.len() >= "--f".len() && name.starts_with("--") && "--files0-from".starts_with(name)
}

/// The value an option carries in the same word: `--output=/x` → `/x`, `-f/x` → `/x`. Such values
/// are often paths (`--output=`, `--git-dir=`, `-o/file`), so they are checked like operands;
/// ordinary values (`--color=auto`, `-n5`) resolve inside the working directory and pass.
fn option_value(option: &str) -> Option<&str> {
    if let Some(long) = option.strip_prefix("--") {
        return long.split_once('=').map(|(_, value)| value).filter(|v| !v.is_empty());
    }
    option.get(2..).filter(|rest| !rest.is_empty())
}

fn require_allowed(roots: &Roots, path: &str, shown: &str) -> Result<(), String> {
    if roots.allows(path) { Ok(()) } else { Err(format!("Path not allowed outside authorized directories: {shown}")) }
}

/// Expands a glob in the last path component against an allowed, existing directory; returns the
/// argument unchanged when there is nothing to expand or nothing matches (§4.1 step 5).
fn expand(arg: &str, roots: &Roots) -> Vec<String> {
    if !glob::has_glob(arg) {
        return vec![arg.to_owned()];
    }
    let (parent, pattern) = match arg.rfind('/') {
        Some(i) => (&arg[..=i], &arg[i + 1..]),
        None => ("", arg),
    };
    if pattern.is_empty() || glob::has_glob(parent) {
        return vec![arg.to_owned()];
    }
    let Some(dir) = roots.resolve(if parent.is_empty() { "." } else { parent }) else {
        return vec![arg.to_owned()];
    };
    if !roots.contains(&dir) || !dir.is_dir() {
        return vec![arg.to_owned()];
    }
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return vec![arg.to_owned()];
    };
    // As in the shell, `*` does not match hidden files unless the pattern starts with a dot.
    let show_hidden = pattern.starts_with('.');
    let mut names: Vec<String> = entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str().map(str::to_owned))
        .filter(|name| (show_hidden || !name.starts_with('.')) && glob::matches(pattern, name))
        .collect();
    if names.is_empty() {
        return vec![arg.to_owned()];
    }
    names.sort();
    names.into_iter().map(|name| display(&dir.join(name), roots.working_directory())).collect()
}

/// Relative to the working directory when inside it, absolute otherwise.
fn display(path: &Path, working_directory: &Path) -> String {
    match path.strip_prefix(working_directory) {
        Ok(relative) => relative.display().to_string(),
        Err(_) => path.display().to_string(),
    }
}

/// §4.1 step 6: `top` needs batch mode without a terminal; macOS spells things differently.
fn platform_variant(program: String, args: Vec<String>) -> Invocation {
    let macos = cfg!(target_os = "macos");
    let (program, args) = match (program.as_str(), args.is_empty()) {
        ("top", true) if macos => (program, vec!["-l".to_owned(), "1".to_owned()]),
        ("top", true) => (program, vec!["-b".to_owned(), "-n".to_owned(), "1".to_owned()]),
        ("free", true) if macos => ("vm_stat".to_owned(), args),
        _ => (program, args),
    };
    Invocation { program, args }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> BashConfig {
        BashConfig::from_lists(Some("/"), [""; 0], [""; 0], [""; 0])
    }

    fn plan_in_root(command: &str) -> Result<Invocation, String> {
        let config = config();
        let roots = Roots::new(&config.working_directory, &config.allowed_paths);
        plan(command, &config, &roots)
    }

    #[test]
    fn git_rules() {
        assert!(plan_in_root("git log --oneline -n 3").is_ok());
        assert!(plan_in_root("git --no-pager diff HEAD").is_ok());
        assert!(plan_in_root("git").is_ok());
        for (command, refusal) in [
            ("git -C /tmp status", "git option not allowed: -C"),
            ("git -c core.pager=x log", "git option not allowed: -c"),
            ("git --git-dir=/x log", "git option not allowed: --git-dir=/x"),
            ("git --work-tree /x status", "git option not allowed: --work-tree"),
            ("git --exec-path=/x log", "git option not allowed: --exec-path=/x"),
            ("git config alias.x !sh", "git subcommand not allowed: config"),
            ("git checkout main", "git subcommand not allowed: checkout"),
            ("git log --output=x.txt", "git option not allowed: --output"),
            ("git grep -Ovim x", "git option not allowed: -O"),
            ("git grep -nOvim x", "git option not allowed: -O"),
            ("git grep --open-files-in-pager=vi x", "git option not allowed: --open-files-in-pager"),
        ] {
            let error = plan_in_root(command).unwrap_err();
            assert!(error.starts_with(refusal), "{command}: {error}");
        }
        assert!(plan_in_root("git log --out=x.txt").unwrap_err().starts_with("git option not allowed: --output"));
        assert!(plan_in_root("git diff --output-indicator-new=+").is_ok());
        assert!(plan_in_root("git grep -e x -- :(top)").unwrap_err().starts_with("git pathspec magic not allowed"));
        // `--` ends option parsing: what follows are paths, checked as such.
        assert!(plan_in_root("git log -- -O").is_ok());
    }

    #[test]
    fn option_values() {
        assert_eq!(option_value("--output=/x"), Some("/x"));
        assert_eq!(option_value("--color"), None);
        assert_eq!(option_value("--x="), None);
        assert_eq!(option_value("-f/etc/passwd"), Some("/etc/passwd"));
        assert_eq!(option_value("-n"), None);
        assert_eq!(option_value("-"), None);
    }

    #[test]
    fn path_list_options() {
        assert!(reads_a_path_list("--files0-from=list"));
        assert!(reads_a_path_list("--files0"));
        assert!(reads_a_path_list("--f=list"));
        assert!(!reads_a_path_list("--file-type"));
        assert!(!reads_a_path_list("--follow"));
        assert!(!reads_a_path_list("-f"));
        assert!(!reads_a_path_list("--"));
    }

    #[test]
    fn top_runs_in_batch_mode() {
        let invocation = plan_in_root("top").unwrap();
        assert_eq!(invocation.program, "top");
        assert!(!invocation.args.is_empty());
        assert_eq!(plan_in_root("top -H").unwrap().args, ["-H"]);
    }
}
