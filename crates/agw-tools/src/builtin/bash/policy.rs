//! Turning the model's command text into a program and arguments that are safe to run, or a
//! refusal (docs/contract/tools-skills-viewports.md §4.1 steps 1–6, hardened: README decision on symlinks).
//!
//! Nothing here runs anything. The rules, in order:
//! 1. no shell syntax at all (the command is never given to a shell, so it could only mislead),
//!    no control characters, no whitespace but ASCII spaces and tabs ([`super::command`], the
//!    reading the approval rules share);
//! 2. split on spaces and tabs; the first word must be in the allow-list, compared exactly;
//! 3. `git` is limited to read-only subcommands in their reading forms and may not be pointed
//!    elsewhere or reconfigured;
//! 4. for path-checked commands every operand, every `--opt=value` value and every value glued to
//!    a short option is resolved through symlinks and must lie inside an allowed root; globs are
//!    expanded first, inside allowed existing directories only;
//! 5. the per-command deny table ([`deny`]) refuses options that run programs or write files,
//!    whatever the allow-list says (after glob expansion, so a file named `-delete` cannot sneak in);
//! 6. `git` runs only in a repository whose `.git` directory is the working directory's own
//!    (it never looks above it: see [`super::process`] for the environment that enforces this).

use std::path::{Path, PathBuf};

use super::command::{BashCommand, BashCommandError, GIT_NEUTRAL_OPTIONS};
use super::config::BashConfig;
use super::paths::Roots;
use super::{deny, glob};

/// What will be run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Invocation {
    pub program: String,
    pub args: Vec<String>,
}

/// Why a command is refused before it runs. The display text is what the model reads (the
/// `stderr` of the `_bash_` result).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refusal {
    /// The command text itself is unusable (empty, shell syntax, control characters).
    #[error(transparent)]
    Command(#[from] BashCommandError),
    /// The program is not in the allow-list.
    #[error("Command not allowed: {0}")]
    NotAllowed(String),
    /// A git option, global or of the subcommand, that reconfigures git, points it elsewhere,
    /// writes files or runs programs.
    #[error("git option not allowed: {0}")]
    GitOption(String),
    /// A git subcommand that is not read-only.
    #[error("git subcommand not allowed: {0} (read-only subcommands only: {list})", list = GIT_SUBCOMMANDS.join(", "))]
    GitSubcommand(String),
    /// A pathspec with magic (`:(top)`, `:/`), which re-roots paths.
    #[error("git pathspec magic not allowed: {0}")]
    GitPathspecMagic(String),
    /// `git branch` / `git tag` in a form that creates, renames, deletes or signs a ref.
    #[error(
        "git {subcommand} is allowed only for listing: {word} would create, rename, delete or sign a ref \
         (use `git {subcommand} --list [pattern]`)"
    )]
    GitNotListing { subcommand: &'static str, word: String },
    /// The working directory holds no repository of its own.
    #[error(
        "git: {} is not a git repository (git only works on a repository whose .git is in the working directory; it never looks above it)",
        .0.display()
    )]
    NotARepository(PathBuf),
    /// `.git` is a link or a `gitdir:` file.
    #[error("git: .git is not a directory inside the working directory (a link or a gitdir file points elsewhere)")]
    GitDirElsewhere,
    /// The repository borrows objects or refs from elsewhere (the file under `.git/` that does).
    #[error("git: the repository reads from elsewhere (.git/{0}); refused")]
    BorrowedRepository(&'static str),
    /// An option that reads file names from a file (`--files0-from`), which cannot be checked.
    #[error("Option not allowed: {0} (it reads file names from a file, which cannot be checked)")]
    PathListOption(String),
    /// A path argument (as the model wrote it, or as a glob expanded) outside the allowed roots.
    #[error("Path not allowed outside authorized directories: {0}")]
    PathOutsideRoots(String),
    /// The deny table refused the program or one of its options.
    #[error(transparent)]
    Denied(#[from] deny::Denied),
}

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

/// Options git accepts before the subcommand that we allow: the neutral ones approval rules
/// ignore, and `--version`. Every other one (`-C`, `-c`, `--git-dir`, `--work-tree`,
/// `--exec-path`, `--config-env`, `-p`, …) is refused.
fn git_global_option_allowed(word: &str) -> bool {
    word == "--version" || GIT_NEUTRAL_OPTIONS.contains(&word)
}

/// Subcommand options that write files or run other programs.
const GIT_FORBIDDEN_OPTIONS: [&str; 5] = ["--output", "-O", "--open-files-in-pager", "--edit-description", "--exec"];

pub(crate) fn plan(command: &str, config: &BashConfig, roots: &Roots) -> Result<Invocation, Refusal> {
    // The one reading of a command text, shared with the approval rules.
    let (program, args) = BashCommand::parse(command)?.into_parts();
    if !config.allowed_commands.contains(&program) {
        return Err(Refusal::NotAllowed(program));
    }
    if program == "git" {
        check_git(&args)?;
    }
    let args = if config.path_checked_commands.contains(&program) { check_paths(args, roots)? } else { args };
    deny::check(&program, &args)?;
    let args = if program == "git" {
        check_git_repository(&args, roots)?;
        harden_git(args)
    } else {
        args
    };
    Ok(platform_variant(program, args))
}

fn check_git(args: &[String]) -> Result<(), Refusal> {
    let mut words = args.iter();
    let subcommand = loop {
        match words.next() {
            None => return Ok(()),
            Some(word) if word.starts_with('-') => {
                if !git_global_option_allowed(word) {
                    return Err(Refusal::GitOption(word.clone()));
                }
            }
            Some(word) => break word,
        }
    };
    if !GIT_SUBCOMMANDS.contains(&subcommand.as_str()) {
        return Err(Refusal::GitSubcommand(subcommand.clone()));
    }
    let rest: Vec<&String> = words.collect();
    match subcommand.as_str() {
        "branch" => check_listing("branch", &rest, BRANCH_LISTING)?,
        "tag" => check_listing("tag", &rest, TAG_LISTING)?,
        _ => {}
    }
    let mut options_end = false;
    for word in rest {
        if word == "--" {
            options_end = true;
        } else if !options_end && word.starts_with('-') {
            if let Some(option) = GIT_FORBIDDEN_OPTIONS.iter().find(|option| git_option_matches(word, option)) {
                return Err(Refusal::GitOption((*option).to_owned()));
            }
        } else if word.starts_with(':') {
            // Pathspec magic (`:(top)`, `:/`) re-roots paths; keep paths plain so the checks hold.
            return Err(Refusal::GitPathspecMagic(word.clone()));
        }
    }
    Ok(())
}

/// The options of `git branch` / `git tag` that only list: `(spelling, takes a separate value)`.
/// Everything else (`-d`, `-D`, `-m`, `-M`, `-c`, `-C`, `-f`, `-a`, `-s`, `-u`, `-v` of tag, which
/// runs gpg, `--set-upstream-to`, `--edit-description`, …) creates, moves, deletes or signs refs.
const BRANCH_LISTING: &[(&str, bool)] = &[
    ("-l", false),
    ("--list", false),
    ("-a", false),
    ("--all", false),
    ("-r", false),
    ("--remotes", false),
    ("-v", false),
    ("-vv", false),
    ("--verbose", false),
    ("-i", false),
    ("--ignore-case", false),
    ("--show-current", false),
    ("--contains", true),
    ("--no-contains", true),
    ("--merged", true),
    ("--no-merged", true),
    ("--points-at", true),
    ("--sort", true),
    ("--format", true),
    ("--color", false),
    ("--no-color", false),
    ("--column", false),
    ("--no-column", false),
    ("--abbrev", false),
    ("--no-abbrev", false),
    ("--omit-empty", false),
];
const TAG_LISTING: &[(&str, bool)] = &[
    ("-l", false),
    ("--list", false),
    ("-n", false),
    ("-i", false),
    ("--ignore-case", false),
    ("--contains", true),
    ("--no-contains", true),
    ("--merged", true),
    ("--no-merged", true),
    ("--points-at", true),
    ("--sort", true),
    ("--format", true),
    ("--color", false),
    ("--no-color", false),
    ("--column", false),
    ("--no-column", false),
    ("--omit-empty", false),
];

/// `git branch` / `git tag` in their listing forms only: every option is a listing option, and a
/// name (which would create a ref) is only accepted as a pattern after `-l`/`--list`.
fn check_listing(subcommand: &'static str, args: &[&String], listing: &[(&str, bool)]) -> Result<(), Refusal> {
    let refused = |word: &str| Err(Refusal::GitNotListing { subcommand, word: word.to_owned() });
    let lists = args.iter().any(|w| *w == "-l" || *w == "--list");
    let mut words = args.iter();
    while let Some(word) = words.next() {
        let (name, glued) = word.split_once('=').map_or((word.as_str(), false), |(name, _)| (name, true));
        // `-n5` (tag: lines of the annotation) is `-n` with a glued count.
        let name = if name.starts_with("-n") && name[2..].chars().all(|c| c.is_ascii_digit()) { "-n" } else { name };
        if word.starts_with('-') && *word != "--" {
            match listing.iter().find(|(option, _)| *option == name) {
                Some((_, true)) if !glued => {
                    // The value may be the next word (a commit); it is not a ref name to create.
                    if words.clone().next().is_some_and(|next| !next.starts_with('-')) {
                        words.next();
                    }
                }
                Some(_) => {}
                None => return refused(word),
            }
        } else if *word != "--" && !lists {
            return refused(word);
        }
    }
    Ok(())
}

/// §4.1 hardening: `git` must work on the working directory's own repository. The environment
/// stops discovery at the root ([`super::process`]); here a `.git` that is not a plain directory
/// inside the root (a symlink, or a `gitdir:` file of a worktree or submodule) is refused, as are
/// repositories that borrow objects or refs from elsewhere (`objects/info/alternates`,
/// `commondir`): each would let git read outside the root.
fn check_git_repository(args: &[String], roots: &Roots) -> Result<(), Refusal> {
    let subcommand = args.iter().find(|a| !a.starts_with('-'));
    let needs_repository = subcommand.is_some_and(|s| s != "version") && !args.iter().any(|a| a == "--no-index");
    if !needs_repository {
        return Ok(());
    }
    let dot_git = roots.working_directory().join(".git");
    let Ok(meta) = dot_git.symlink_metadata() else {
        return Err(Refusal::NotARepository(roots.working_directory().to_path_buf()));
    };
    if !meta.is_dir() {
        return Err(Refusal::GitDirElsewhere);
    }
    for borrowed in ["objects/info/alternates", "commondir"] {
        if dot_git.join(borrowed).symlink_metadata().is_ok() {
            return Err(Refusal::BorrowedRepository(borrowed));
        }
    }
    Ok(())
}

/// Commands that show diffs never run external diff programs or text conversion filters a
/// repository's attributes name.
fn harden_git(mut args: Vec<String>) -> Vec<String> {
    let Some(at) = args.iter().position(|a| !a.starts_with('-')) else { return args };
    let extra: &[&str] = match args[at].as_str() {
        "log" | "show" | "diff" => &["--no-ext-diff", "--no-textconv"],
        "blame" | "grep" => &["--no-textconv"],
        _ => &[],
    };
    for (i, option) in extra.iter().enumerate() {
        args.insert(at + 1 + i, (*option).to_owned());
    }
    args
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
fn check_paths(args: Vec<String>, roots: &Roots) -> Result<Vec<String>, Refusal> {
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
                return Err(Refusal::PathListOption(arg));
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

fn require_allowed(roots: &Roots, path: &str, shown: &str) -> Result<(), Refusal> {
    if roots.allows(path) { Ok(()) } else { Err(Refusal::PathOutsideRoots(shown.to_owned())) }
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
        // GNU sed refuses its e/r/w commands in sandbox mode: a second line of defence behind
        // the script checks of the deny table.
        ("sed", _) if cfg!(target_os = "linux") => {
            (program, std::iter::once("--sandbox".to_owned()).chain(args).collect())
        }
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
        plan(command, &config, &roots).map_err(|refusal| refusal.to_string())
    }

    /// Passes every check that does not depend on a repository being there (`/` has none).
    fn passes(command: &str) -> bool {
        plan_in_root(command).map_or_else(|e| e.starts_with("git: / is not a git repository"), |_| true)
    }

    #[test]
    fn git_rules() {
        assert!(passes("git log --oneline -n 3"));
        assert!(passes("git --no-pager diff HEAD"));
        assert!(plan_in_root("git").is_ok());
        assert!(plan_in_root("git version").is_ok());
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
        assert!(passes("git diff --output-indicator-new=+"));
        assert!(plan_in_root("git grep -e x -- :(top)").unwrap_err().starts_with("git pathspec magic not allowed"));
        // `--` ends option parsing: what follows are paths, checked as such.
        assert!(passes("git log -- -O"));
    }

    #[test]
    fn refusal_texts() {
        assert_eq!(
            plan_in_root("git config x").unwrap_err(),
            "git subcommand not allowed: config (read-only subcommands only: status, log, show, diff, blame, \
             shortlog, describe, rev-parse, rev-list, ls-files, ls-tree, cat-file, grep, branch, tag, count-objects, \
             version)"
        );
        assert_eq!(
            plan_in_root("git branch new").unwrap_err(),
            "git branch is allowed only for listing: new would create, rename, delete or sign a ref \
             (use `git branch --list [pattern]`)"
        );
        assert_eq!(
            plan_in_root("git status").unwrap_err(),
            "git: / is not a git repository (git only works on a repository whose .git is in the working \
             directory; it never looks above it)"
        );
        assert_eq!(
            plan_in_root("ls --files0-from=x").unwrap_err(),
            "Option not allowed: --files0-from=x (it reads file names from a file, which cannot be checked)"
        );
        assert_eq!(plan_in_root("ls a;b").unwrap_err(), BashCommand::parse("ls a;b").unwrap_err().to_string());
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
