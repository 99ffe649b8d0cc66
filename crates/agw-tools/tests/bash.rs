//! `_bash_` as a security boundary (docs/contract/tools-skills-viewports.md §4.1 + README decisions): every
//! attack is refused with a clear result text, and nothing outside the allowed roots is read,
//! created or changed. Plus the ordinary behaviour: listing, reading, globs, caps, timeouts.

#![cfg(unix)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use agw_testkit::TempDir;
use agw_tools::{BashConfig, BashTool, Tool, ToolContext, ToolOutput};
use serde_json::json;

const SECRET: &str = "TOP-SECRET-3141";

/// `root/work` is the working directory; `root/outside` holds a secret that must stay unread.
struct Sandbox {
    root: TempDir,
    work: PathBuf,
    outside: PathBuf,
}

fn sandbox() -> Sandbox {
    let root = TempDir::new("bash");
    let work = root.mkdir("work");
    let outside = root.mkdir("outside");
    root.write("outside/secret.txt", SECRET);
    root.write("work/notes.txt", "hello notes\n");
    root.symlink("../outside/secret.txt", "work/link_file");
    root.symlink(&outside, "work/link_out");
    root.symlink("notes.txt", "work/link_in");
    root.symlink("../outside/created_by_attack.txt", "work/dangling");
    Sandbox { root, work, outside }
}

impl Sandbox {
    fn tool(&self, commands: &[&str], checked: &[&str]) -> BashTool {
        BashTool::new(self.config(commands, checked))
    }

    fn config(&self, commands: &[&str], checked: &[&str]) -> BashConfig {
        BashConfig::from_lists(self.work.to_str(), [""; 0], commands.iter().copied(), checked.iter().copied())
    }

    /// The default command set.
    async fn run(&self, command: &str) -> String {
        self.tool(&[], &[]).run_command(command).await
    }

    /// Nothing outside the working directory was created or changed, and no attack left a file.
    fn assert_untouched(&self) {
        let mut outside: Vec<String> =
            std::fs::read_dir(&self.outside).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        outside.sort();
        assert_eq!(outside, ["secret.txt"], "files appeared outside the allowed root");
        assert_eq!(std::fs::read_to_string(self.outside.join("secret.txt")).unwrap(), SECRET);
        let mut root: Vec<String> = std::fs::read_dir(self.root.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        root.sort();
        assert_eq!(root, ["outside", "work"]);
        assert!(!self.work.join("pwned").exists(), "an injected command ran");
    }
}

/// The result of a refused command: exit code -1, the message as stderr, no secret.
#[track_caller]
fn assert_refused(out: &str, message: &str) {
    assert!(out.starts_with("exitCode: -1\n\"workingDirectory\": \""), "{out}");
    assert!(out.contains("\nstdout:\n\nstderr:\n"), "{out}");
    assert!(out.contains(message), "expected {message:?} in {out}");
    assert!(!out.contains(SECRET), "secret leaked: {out}");
}

async fn attack(command: &str, message: &str) {
    let sandbox = sandbox();
    let out = sandbox.run(command).await;
    assert_refused(&out, message);
    sandbox.assert_untouched();
}

const PATH_REFUSED: &str = "Path not allowed outside authorized directories: ";
const SHELL_REFUSED: &str = "Shell syntax is not supported";

// ---- separators: only ASCII spaces and tabs (issue 32) ----

#[tokio::test]
async fn whitespace_other_than_spaces_and_tabs_and_control_characters_are_refused() {
    // Each of these used to be split like a space (or passed into a word), so a command looked
    // different to an approval rule than to `_bash_`. The reading is now one, and refuses them.
    for (command, code) in [
        ("cat\u{a0}notes.txt", "U+00A0"),
        ("cat\u{3000}notes.txt", "U+3000"),
        ("cat\u{2028}notes.txt", "U+2028"),
        ("cat\u{85}notes.txt", "U+0085"),
        ("cat\u{b}notes.txt", "U+000B"),
        ("cat notes\u{200b}.txt", "U+200B"),
    ] {
        attack(command, &format!("Character not allowed in a command: {code}")).await;
    }
    let sandbox = sandbox();
    let out = sandbox.run("cat\tnotes.txt").await;
    assert!(out.contains("hello notes"), "a tab separates words: {out}");
}

// ---- path escapes ----

#[tokio::test]
async fn dot_dot_escape() {
    attack("cat ../outside/secret.txt", &format!("{PATH_REFUSED}../outside/secret.txt")).await;
}

#[tokio::test]
async fn deep_dot_dot_escape() {
    attack("cat ../../../../../../../../etc/passwd", PATH_REFUSED).await;
}

#[tokio::test]
async fn absolute_path_outside_the_roots() {
    let sandbox = sandbox();
    let secret = sandbox.outside.join("secret.txt");
    let out = sandbox.run(&format!("cat {}", secret.display())).await;
    assert_refused(&out, &format!("{PATH_REFUSED}{}", secret.display()));
    sandbox.assert_untouched();
}

#[tokio::test]
async fn reference_cat_etc_passwd() {
    attack("cat /etc/passwd", &format!("{PATH_REFUSED}/etc/passwd")).await;
}

#[tokio::test]
async fn symlink_inside_the_root_pointing_to_a_file_outside() {
    attack("cat link_file", &format!("{PATH_REFUSED}link_file")).await;
}

#[tokio::test]
async fn symlink_inside_the_root_pointing_to_a_directory_outside() {
    attack("cat link_out/secret.txt", &format!("{PATH_REFUSED}link_out/secret.txt")).await;
    attack("ls link_out", &format!("{PATH_REFUSED}link_out")).await;
}

#[tokio::test]
async fn symlink_then_dot_dot_is_resolved_like_the_kernel_does() {
    // Lexically this is work/outside/secret.txt (inside); physically it is root/outside/secret.txt.
    attack("cat link_out/../outside/secret.txt", PATH_REFUSED).await;
}

#[tokio::test]
async fn dangling_symlink_cannot_create_a_file_outside() {
    let sandbox = sandbox();
    let out = sandbox.tool(&["sort"], &["sort"]).run_command("sort -o dangling notes.txt").await;
    assert_refused(&out, &format!("{PATH_REFUSED}dangling"));
    sandbox.assert_untouched();
}

#[tokio::test]
async fn glob_does_not_smuggle_symlinks_out() {
    // `link*` expands to link_file, link_in, link_out; the outward links are still refused.
    attack("cat link*", &format!("{PATH_REFUSED}link_file")).await;
}

#[tokio::test]
async fn glob_in_a_directory_outside_is_not_expanded() {
    attack("cat ../outside/*", &format!("{PATH_REFUSED}../outside/*")).await;
    attack("cat link_out/*", &format!("{PATH_REFUSED}link_out/*")).await;
}

#[tokio::test]
async fn operands_after_double_dash_are_checked() {
    attack("cat -- ../outside/secret.txt", &format!("{PATH_REFUSED}../outside/secret.txt")).await;
}

#[tokio::test]
async fn option_value_pointing_outside() {
    let sandbox = sandbox();
    let tool = sandbox.tool(&["sort"], &["sort"]);
    for command in [
        "sort --output=../outside/pwned notes.txt",
        "sort -o ../outside/pwned notes.txt",
        "sort -o../outside/pwned notes.txt",
        "sort --output=/tmp/agw-should-not-exist notes.txt",
    ] {
        assert_refused(&tool.run_command(command).await, PATH_REFUSED);
    }
    assert!(!std::path::Path::new("/tmp/agw-should-not-exist").exists());
    sandbox.assert_untouched();
}

#[tokio::test]
async fn file_name_lists_cannot_bypass_the_checks() {
    let sandbox = sandbox();
    // A list inside the root that names a file outside it.
    sandbox.root.write("work/list", &format!("{}\0", sandbox.outside.join("secret.txt").display()));
    let tool = sandbox.tool(&["wc"], &["wc"]);
    for command in ["wc --files0-from=list", "wc --files0-from list", "wc --files0 list"] {
        assert_refused(&tool.run_command(command).await, "Option not allowed: --files0");
    }
    sandbox.assert_untouched();
}

#[tokio::test]
async fn glued_short_option_value_pointing_outside() {
    attack("git grep -f../outside/secret.txt x", &format!("{PATH_REFUSED}-f../outside/secret.txt")).await;
}

// ---- shell syntax ----

#[tokio::test]
async fn semicolon_chaining() {
    attack("ls ; cat ../outside/secret.txt", &format!("{SHELL_REFUSED}: ';'")).await;
    attack("ls;touch pwned", &format!("{SHELL_REFUSED}: ';'")).await;
}

#[tokio::test]
async fn and_chaining() {
    attack("ls && touch pwned", &format!("{SHELL_REFUSED}: '&'")).await;
}

#[tokio::test]
async fn or_chaining() {
    attack("ls nothing || touch pwned", &format!("{SHELL_REFUSED}: '|'")).await;
}

#[tokio::test]
async fn pipe() {
    attack("cat ../outside/secret.txt | head", &format!("{SHELL_REFUSED}: '|'")).await;
}

#[tokio::test]
async fn backticks() {
    attack("cat `touch pwned`", &format!("{SHELL_REFUSED}: '`'")).await;
}

#[tokio::test]
async fn command_substitution() {
    attack("cat $(touch pwned)", &format!("{SHELL_REFUSED}: '$'")).await;
}

#[tokio::test]
async fn variable_expansion() {
    attack("cat $HOME/.bashrc", &format!("{SHELL_REFUSED}: '$'")).await;
    attack("ls ${PWD}", &format!("{SHELL_REFUSED}: '$'")).await;
}

#[tokio::test]
async fn output_redirection() {
    attack("cat notes.txt > pwned", &format!("{SHELL_REFUSED}: '>'")).await;
    attack("cat notes.txt >> ../outside/secret.txt", &format!("{SHELL_REFUSED}: '>'")).await;
}

#[tokio::test]
async fn input_redirection() {
    attack("cat < ../outside/secret.txt", &format!("{SHELL_REFUSED}: '<'")).await;
}

#[tokio::test]
async fn background_ampersand() {
    attack("ls & touch pwned", &format!("{SHELL_REFUSED}: '&'")).await;
}

#[tokio::test]
async fn newline_separated_second_command() {
    attack("ls\ntouch pwned", &format!("{SHELL_REFUSED}: a line break")).await;
    attack("ls\r\ncat ../outside/secret.txt", &format!("{SHELL_REFUSED}: a line break")).await;
}

#[tokio::test]
async fn quotes_are_not_shell_quoting() {
    attack("cat \"../outside/secret.txt\"", &format!("{SHELL_REFUSED}: quotes")).await;
    attack("cat 'notes.txt'", &format!("{SHELL_REFUSED}: quotes")).await;
}

// ---- the allow-list ----

#[tokio::test]
async fn command_outside_the_allow_list() {
    attack("rm -rf ../outside", "Command not allowed: rm").await;
    attack("touch pwned", "Command not allowed: touch").await;
    attack("sh -c id", "Command not allowed: sh").await;
    attack("bash", "Command not allowed: bash").await;
}

#[tokio::test]
async fn path_qualified_command_names_are_not_the_allowed_name() {
    attack("/bin/rm -rf ../outside", "Command not allowed: /bin/rm").await;
    attack("/bin/ls ../outside", "Command not allowed: /bin/ls").await;
    attack("./ls", "Command not allowed: ./ls").await;
    attack("LS", "Command not allowed: LS").await;
}

#[tokio::test]
async fn a_planted_program_never_stands_in_for_an_allowed_one() {
    let sandbox = sandbox();
    let planted = sandbox.root.write("work/ls", "#!/bin/sh\ntouch pwned\n");
    std::fs::set_permissions(&planted, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = sandbox.run("ls").await;
    assert!(out.starts_with("exitCode: 0"), "{out}");
    assert!(!sandbox.work.join("pwned").exists());
}

// ---- git ----

#[tokio::test]
async fn git_dash_c_directory() {
    attack("git -C ../outside log", "git option not allowed: -C").await;
    attack("git -C/tmp status", "git option not allowed: -C/tmp").await;
}

#[tokio::test]
async fn git_dir_and_work_tree() {
    attack("git --git-dir=../outside/.git log", "git option not allowed: --git-dir=../outside/.git").await;
    attack("git --git-dir ../outside/.git log", "git option not allowed: --git-dir").await;
    attack("git --work-tree=/ status", "git option not allowed: --work-tree=/").await;
}

#[tokio::test]
async fn git_config_and_exec_path() {
    attack("git -c core.pager=touch%20pwned log", "git option not allowed: -c").await;
    attack("git --exec-path=../outside log", "git option not allowed: --exec-path=../outside").await;
    attack("git config alias.x !touch", "git subcommand not allowed: config").await;
}

#[tokio::test]
async fn git_writing_options() {
    attack("git log --output=pwned", "git option not allowed: --output").await;
    attack("git diff --out=../outside/x", "git option not allowed: --output").await;
    attack("git grep -Otouch x", "git option not allowed: -O").await;
}

#[tokio::test]
async fn git_path_arguments_are_checked() {
    attack("git diff --no-index ../outside/secret.txt notes.txt", &format!("{PATH_REFUSED}../outside/secret.txt"))
        .await;
    attack("git log -- link_out", &format!("{PATH_REFUSED}link_out")).await;
}

// ---- ordinary use ----

#[tokio::test]
async fn reference_ls_of_the_working_directory() {
    let sandbox = sandbox();
    let out = sandbox.run("ls").await;
    assert!(
        out.starts_with(&format!("exitCode: 0\n\"workingDirectory\": \"{}\"\nstdout:\n", sandbox.work.display())),
        "{out}"
    );
    assert!(out.contains("notes.txt"));
    assert!(out.ends_with("\nstderr:\n"), "{out:?}");
}

#[tokio::test]
async fn reference_cat_of_an_allowed_file() {
    let sandbox = sandbox();
    let out = sandbox.run("cat notes.txt").await;
    assert_eq!(
        out,
        format!("exitCode: 0\n\"workingDirectory\": \"{}\"\nstdout:\nhello notes\n\nstderr:\n", sandbox.work.display())
    );
    assert!(sandbox.run("cat link_in").await.contains("hello notes"), "a symlink inside the roots is fine");
    assert!(sandbox.run(&format!("cat {}/notes.txt", sandbox.work.display())).await.contains("hello notes"));
}

#[tokio::test]
async fn reference_glob_expansion() {
    let sandbox = sandbox();
    sandbox.root.write("work/agents/a.json", "{\"a\":1}");
    sandbox.root.write("work/agents/b.json", "{\"b\":2}");
    sandbox.root.write("work/agents/.hidden.json", "hidden");
    let out = sandbox.run("cat agents/*").await;
    assert!(out.starts_with("exitCode: 0"), "{out}");
    assert!(out.contains("{\"a\":1}{\"b\":2}"), "{out}");
    assert!(!out.contains("hidden"));
    let out = sandbox.run("ls agents/*.json").await;
    assert!(out.contains("agents/a.json\nagents/b.json"), "{out}");
    let out = sandbox.run("ls *.none").await;
    assert!(out.contains("*.none"), "no match keeps the argument: {out}");
}

#[tokio::test]
async fn reference_extra_allowed_root() {
    let sandbox = sandbox();
    sandbox.root.write("outside/opt/demo.key", "secret-key");
    let opt = sandbox.outside.join("opt");
    let config = BashConfig::from_lists(sandbox.work.to_str(), [opt.to_str().unwrap()], [""; 0], [""; 0]);
    let out = BashTool::new(config.clone()).run_command(&format!("cat {}/demo.key", opt.display())).await;
    assert!(out.starts_with("exitCode: 0") && out.contains("secret-key"), "{out}");
    // The extra root does not open its parent.
    let out = BashTool::new(config).run_command(&format!("cat {}/secret.txt", sandbox.outside.display())).await;
    assert_refused(&out, PATH_REFUSED);
}

#[tokio::test]
async fn reference_custom_allow_list() {
    let sandbox = sandbox();
    let tool = sandbox.tool(&["echo", "ls"], &["ls"]);
    let out = tool.run_command("echo hello").await;
    assert!(out.starts_with("exitCode: 0") && out.contains("stdout:\nhello\n"), "{out}");
    assert_refused(&tool.run_command("cat somefile").await, "Command not allowed: cat");
    // echo is not path-checked: its arguments are just text.
    assert!(tool.run_command("echo /etc/passwd").await.contains("stdout:\n/etc/passwd\n"));
}

#[tokio::test]
async fn tool_interface_and_argument_forms() {
    let sandbox = sandbox();
    let tool = sandbox.tool(&[], &[]);
    let ToolOutput::Text(out) = tool.call(json!({"command":"  pwd  "}), &ToolContext::default()).await.unwrap() else {
        panic!("text expected")
    };
    assert!(out.contains(&format!("stdout:\n{}\n", sandbox.work.display())), "{out}");
    let ToolOutput::Text(out) = tool.call(json!({}), &ToolContext::default()).await.unwrap() else { panic!() };
    assert_refused(&out, "Missing argument: command");
    let ToolOutput::Text(out) = tool.call(json!({"command":null}), &ToolContext::default()).await.unwrap() else {
        panic!()
    };
    assert_refused(&out, "Command not allowed: null");
    assert_eq!(tool.name(), "_bash_");
}

#[tokio::test]
async fn exit_codes_and_stderr_are_reported() {
    let sandbox = sandbox();
    let out = sandbox.run("ls missing_file").await;
    assert!(out.starts_with("exitCode: 2\n"), "{out}");
    assert!(out.contains("stderr:\nls: cannot access 'missing_file'"), "{out}");
}

#[tokio::test]
async fn head_with_a_count_argument() {
    let sandbox = sandbox();
    let out = sandbox.run("head -n 1 notes.txt").await;
    assert!(out.starts_with("exitCode: 0") && out.contains("hello notes"), "{out}");
}

#[tokio::test]
async fn output_is_capped_per_stream() {
    let sandbox = sandbox();
    sandbox.root.write("work/long.txt", &"é".repeat(100));
    let mut config = sandbox.config(&[], &[]);
    config.output_cap_chars = 10;
    let out = BashTool::new(config).run_command("cat long.txt missing").await;
    assert!(out.contains(&format!("stdout:\n{}...(truncated)\n", "é".repeat(10))), "{out}");
    assert!(out.contains("stderr:\ncat: missi...(truncated)"), "{out}");
}

#[tokio::test]
async fn large_output_does_not_stall_the_command() {
    let sandbox = sandbox();
    sandbox.root.write("work/huge.txt", &"0123456789abcdef".repeat(128 * 1024));
    let started = Instant::now();
    let out = sandbox.run("cat huge.txt").await;
    assert!(out.starts_with("exitCode: 0"), "{}", &out[..200]);
    assert!(out.contains("...(truncated)"));
    assert!(started.elapsed() < Duration::from_secs(4), "{:?}", started.elapsed());
}

#[tokio::test]
async fn long_commands_time_out() {
    let sandbox = sandbox();
    let mut config = sandbox.config(&["sleep"], &[]);
    config.timeout = Duration::from_millis(300);
    let started = Instant::now();
    let out = BashTool::new(config).run_command("sleep 47.125").await;
    assert_refused(&out, "Command timed out");
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
    assert!(wait_until_gone("47.125").await, "the timed-out process is still running");
}

#[tokio::test]
async fn dropping_the_call_kills_the_process() {
    let sandbox = sandbox();
    let tool = sandbox.tool(&["sleep"], &[]);
    let run = tool.run_command("sleep 53.625");
    assert!(tokio::time::timeout(Duration::from_millis(400), run).await.is_err());
    assert!(wait_until_gone("53.625").await, "the cancelled process is still running");
}

/// Waits up to 2 s for no process with `marker` in its command line to remain (Linux /proc).
async fn wait_until_gone(marker: &str) -> bool {
    if !std::path::Path::new("/proc/self/cmdline").exists() {
        return true;
    }
    for _ in 0..40 {
        let running = std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            String::from_utf8_lossy(&cmdline).contains(marker)
        });
        if !running {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test]
async fn a_timeout_kills_the_whole_process_group() {
    let sandbox = sandbox();
    // Test-only allow-list entry: a script that leaves a child running in the background.
    sandbox.root.write("work/spawn.sh", "sleep 71.25 &\nsleep 72.75\n");
    let mut config = sandbox.config(&["sh"], &["sh"]);
    config.timeout = Duration::from_millis(300);
    let out = BashTool::new(config).run_command("sh spawn.sh").await;
    assert_refused(&out, "Command timed out");
    assert!(wait_until_gone("72.75").await, "the direct child survived");
    assert!(wait_until_gone("71.25").await, "the grandchild survived");
}

#[tokio::test]
async fn environment_secrets_are_not_passed_on() {
    // The gateway's environment (provider keys) must not reach the command.
    let sandbox = sandbox();
    let tool = sandbox.tool(&["printenv"], &[]);
    let out = tool.run_command("printenv").await;
    assert!(out.starts_with("exitCode: 0"), "{out}");
    assert!(out.contains("TERM=dumb"));
    assert!(!out.contains("CARGO_PKG_NAME"), "{out}");
}

// ---- git confinement (issue 22 item 4) ----

/// Runs a real git (setup only, never through the tool) with no user configuration.
fn git_setup(dir: &std::path::Path, args: &[&str]) {
    let status = std::process::Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("git runs");
    assert!(status.success(), "git {args:?}");
}

/// A repository at `root/repo` whose committed `secret.txt` lies outside the working directory
/// `root/repo/work`.
fn root_inside_a_repository() -> (TempDir, PathBuf) {
    let root = TempDir::new("bash-git-above");
    let repo = root.mkdir("repo");
    let work = root.mkdir("repo/work");
    root.write("repo/secret.txt", SECRET);
    root.write("repo/work/notes.txt", "notes\n");
    git_setup(&repo, &["init", "-q"]);
    git_setup(&repo, &["add", "."]);
    git_setup(&repo, &["commit", "-q", "-m", "c"]);
    (root, work)
}

/// A repository at the working directory itself, with one commit on `main` and one tag.
fn repository_at_the_root() -> (TempDir, PathBuf) {
    let root = TempDir::new("bash-git-root");
    let work = root.mkdir("work");
    root.write("work/notes.txt", "notes\n");
    git_setup(&work, &["init", "-q"]);
    git_setup(&work, &["add", "."]);
    git_setup(&work, &["commit", "-q", "-m", "first"]);
    git_setup(&work, &["tag", "v1"]);
    (root, work)
}

fn git_tool(work: &std::path::Path) -> BashTool {
    BashTool::new(BashConfig::from_lists(work.to_str(), [""; 0], [""; 0], [""; 0]))
}

/// Every ref name and target under `.git/refs`, plus `packed-refs` and `HEAD`.
fn refs_snapshot(work: &std::path::Path) -> Vec<(String, String)> {
    fn walk(dir: &std::path::Path, base: &std::path::Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, base, out);
            } else {
                let name = path.strip_prefix(base).unwrap().display().to_string();
                out.push((name, std::fs::read_to_string(&path).unwrap_or_default()));
            }
        }
    }
    let git = work.join(".git");
    let mut out = Vec::new();
    walk(&git.join("refs"), &git, &mut out);
    for file in ["HEAD", "packed-refs"] {
        out.push((file.into(), std::fs::read_to_string(git.join(file)).unwrap_or_default()));
    }
    out.sort();
    out
}

#[tokio::test]
async fn git_does_not_discover_a_repository_above_the_root() {
    let (_root, work) = root_inside_a_repository();
    let tool = git_tool(&work);
    for command in ["git show HEAD:secret.txt", "git log -p", "git grep TOP-SECRET", "git ls-files", "git status"] {
        let out = tool.run_command(command).await;
        assert_refused(&out, "is not a git repository");
        assert!(out.contains("it never looks above it"), "{out}");
    }
    // Even a planted .git link or gitdir file in the root cannot point git upward.
    std::os::unix::fs::symlink(work.parent().unwrap().join(".git"), work.join(".git")).unwrap();
    assert_refused(&tool.run_command("git show HEAD:secret.txt").await, "git: .git is not a directory");
    std::fs::remove_file(work.join(".git")).unwrap();
    std::fs::write(work.join(".git"), format!("gitdir: {}\n", work.parent().unwrap().join(".git").display())).unwrap();
    assert_refused(&tool.run_command("git show HEAD:secret.txt").await, "git: .git is not a directory");
}

#[tokio::test]
async fn git_environment_stops_discovery_at_the_root() {
    // Defence in depth: were the repository check bypassed, git itself would not look above the
    // root. `git version` needs no repository and passes; `rev-parse` from a sub-directory without
    // its own .git finds nothing.
    let (_root, work) = root_inside_a_repository();
    let tool = git_tool(&work);
    let out = tool.run_command("git version").await;
    assert!(out.starts_with("exitCode: 0") && out.contains("git version"), "{out}");
    let out = tool.run_command("git diff --no-index --stat notes.txt notes.txt").await;
    assert!(out.starts_with("exitCode: 0"), "{out}");
    assert!(!out.contains(SECRET));
}

#[tokio::test]
async fn git_reads_its_own_repository() {
    let (_root, work) = repository_at_the_root();
    let tool = git_tool(&work);
    for (command, expected) in [
        ("git log --oneline", "first"),
        ("git show HEAD:notes.txt", "notes"),
        ("git branch", "main"),
        ("git branch --list ma*", "main"),
        ("git branch -a -v", "main"),
        ("git branch --contains HEAD", "main"),
        ("git tag", "v1"),
        ("git tag -l v*", "v1"),
        ("git tag --points-at HEAD", "v1"),
        ("git status", "main"),
    ] {
        let out = tool.run_command(command).await;
        assert!(out.starts_with("exitCode: 0") && out.contains(expected), "{command}: {out}");
    }
}

#[tokio::test]
async fn git_ref_writes_are_refused() {
    let (_root, work) = repository_at_the_root();
    let tool = git_tool(&work);
    let before = refs_snapshot(&work);
    for command in [
        "git branch x",
        "git branch -m x",
        "git branch -m main x",
        "git branch -M x",
        "git branch -c x",
        "git branch -C x",
        "git branch -d main",
        "git branch -D main",
        "git branch -f main HEAD",
        "git branch --delete main",
        "git branch --move main x",
        "git branch --set-upstream-to=main",
        "git branch -u main",
        "git branch --edit-description",
        "git branch -v x",
        "git tag y",
        "git tag y HEAD",
        "git tag -a y -m m",
        "git tag -d v1",
        "git tag -f v1",
        "git tag -s y",
        "git tag -v v1",
        "git tag --delete v1",
    ] {
        let out = tool.run_command(command).await;
        assert_refused(&out, "is allowed only for listing");
    }
    assert_eq!(refs_snapshot(&work), before, "no ref changed");
    for (command, refusal) in [
        ("git checkout -b x", "git subcommand not allowed: checkout"),
        ("git config user.name x", "git subcommand not allowed: config"),
        ("git update-ref refs/heads/x HEAD", "git subcommand not allowed: update-ref"),
        ("git symbolic-ref HEAD refs/heads/x", "git subcommand not allowed: symbolic-ref"),
    ] {
        assert_refused(&tool.run_command(command).await, refusal);
    }
    assert_eq!(refs_snapshot(&work), before, "no ref changed");
}

#[tokio::test]
async fn git_repository_configuration_cannot_run_programs() {
    // A repository whose own config names programs: the fsmonitor hook (run by `git status`),
    // a pager, an external diff driver. None of them runs.
    let (_root, work) = repository_at_the_root();
    let marker = work.join("pwned");
    let hook = format!("touch {}", marker.display());
    git_setup(&work, &["config", "core.fsmonitor", &hook]);
    git_setup(&work, &["config", "core.pager", &hook]);
    git_setup(&work, &["config", "diff.external", &hook]);
    std::fs::write(work.join("notes.txt"), "changed\n").unwrap();
    let tool = git_tool(&work);
    for command in ["git status", "git diff", "git log -p", "git show HEAD"] {
        let out = tool.run_command(command).await;
        assert!(out.starts_with("exitCode: 0"), "{command}: {out}");
    }
    assert!(!marker.exists(), "a program named by the repository's configuration ran");
}

#[tokio::test]
async fn git_borrowing_objects_from_elsewhere_is_refused() {
    let (_root, work) = repository_at_the_root();
    std::fs::write(work.join(".git/objects/info/alternates"), "/somewhere/else/objects\n").unwrap();
    assert_refused(&git_tool(&work).run_command("git log").await, "reads from elsewhere");
}

// ---- the deny table (issue 22 item 4): refused whatever the allow-list says ----

#[tokio::test]
async fn denied_options_are_refused_even_when_the_command_is_allowed() {
    let sandbox = sandbox();
    sandbox.root.write("work/a.tar", "");
    let allowed = ["find", "sort", "tar", "git", "sed", "awk", "gawk", "rg", "xargs", "env", "less", "more", "timeout"];
    let tool = sandbox.tool(&allowed, &[]);
    for (command, refusal) in [
        ("find . -exec touch pwned ;", "Shell syntax"),
        ("find . -exec touch pwned +", "Option not allowed: find -exec"),
        ("find . -execdir touch pwned +", "Option not allowed: find -execdir"),
        ("find . -ok touch pwned +", "Option not allowed: find -ok"),
        ("find . -okdir touch pwned +", "Option not allowed: find -okdir"),
        ("find . -delete", "Option not allowed: find -delete"),
        ("find . -fprint pwned", "Option not allowed: find -fprint"),
        ("find . -fprint0 pwned", "Option not allowed: find -fprint0"),
        ("find . -fprintf pwned %p", "Option not allowed: find -fprintf"),
        ("find . -fls pwned", "Option not allowed: find -fls"),
        ("sort --compress-program=touch notes.txt", "Option not allowed: sort --compress-program"),
        ("sort -o pwned notes.txt", "Option not allowed: sort -o"),
        ("sort --output=pwned notes.txt", "Option not allowed: sort --output"),
        ("tar --to-command=touch -xf a.tar", "Option not allowed: tar --to-command"),
        ("tar --checkpoint-action=exec=touch -tf a.tar", "Option not allowed: tar --checkpoint-action"),
        ("tar --use-compress-program=touch -tf a.tar", "Option not allowed: tar --use-compress-program"),
        ("tar -I touch -tf a.tar", "Option not allowed: tar -I"),
        ("tar -F touch -tf a.tar", "Option not allowed: tar -F"),
        ("tar --info-script=touch -tf a.tar", "Option not allowed: tar --info-script"),
        ("tar --new-volume-script=touch -tf a.tar", "Option not allowed: tar --new-volume-script"),
        ("tar -xf a.tar", "Option not allowed: tar -x"),
        ("tar xf a.tar", "Option not allowed: tar x"),
        ("tar -cf pwned notes.txt", "Option not allowed: tar -c"),
        ("git --upload-pack=touch log", "git option not allowed: --upload-pack"),
        ("git log --upload-pack=touch", "Option not allowed: git --upload-pack"),
        ("git log --receive-pack=touch", "Option not allowed: git --receive-pack"),
        ("git log --exec=touch", "git option not allowed: --exec"),
        ("git diff --ext-diff", "Option not allowed: git --ext-diff"),
        ("git log -o pwned", "Option not allowed: git -o"),
        ("sed -i s/hello/bye/ notes.txt", "Option not allowed: sed -i"),
        ("sed --in-place s/hello/bye/ notes.txt", "Option not allowed: sed --in-place"),
        ("sed 1e notes.txt", "sed command not allowed: e"),
        ("sed s/hello/touch/e notes.txt", "sed command not allowed: s///e"),
        ("sed w pwned notes.txt", "sed command not allowed: w"),
        ("sed s/hello/bye/w pwned notes.txt", "sed command not allowed: s///w"),
        ("awk BEGIN{system(x)}", "awk program not allowed: system"),
        ("gawk -f prog notes.txt", "Option not allowed: gawk -f"),
        ("rg --pre touch hello", "Option not allowed: rg --pre"),
        ("xargs touch", "Command not allowed: xargs"),
        ("env touch pwned", "Command not allowed: env"),
        ("less notes.txt", "Command not allowed: less"),
        ("more notes.txt", "Command not allowed: more"),
        ("timeout 1 touch pwned", "Command not allowed: timeout"),
    ] {
        assert_refused(&tool.run_command(command).await, refusal);
    }
    sandbox.assert_untouched();
    // Their reading forms still work.
    let out = tool.run_command("sort notes.txt").await;
    assert!(out.starts_with("exitCode: 0") && out.contains("hello notes"), "{out}");
    let out = tool.run_command("find . -name notes.txt").await;
    assert!(out.starts_with("exitCode: 0") && out.contains("./notes.txt"), "{out}");
}

#[tokio::test]
async fn a_glob_cannot_expand_into_a_denied_option() {
    let sandbox = sandbox();
    sandbox.root.write("work/-delete", "");
    let tool = sandbox.tool(&["find"], &["find"]);
    assert_refused(&tool.run_command("find . -name x -o ?delete").await, "Option not allowed: find -delete");
    assert!(sandbox.work.join("notes.txt").exists());
}

// ---- the default working directory (issue 22 item 4) ----

#[tokio::test]
async fn the_default_root_is_a_dedicated_directory_not_the_process_directory() {
    let cwd = std::env::current_dir().unwrap().canonicalize().unwrap();
    let config = BashConfig::default();
    assert_ne!(config.working_directory, cwd);
    assert_eq!(config.working_directory, cwd.join(agw_tools::builtin::DEFAULT_WORKING_DIRECTORY));
    let existed = config.working_directory.exists();
    let out = BashTool::new(config.clone()).run_command("pwd").await;
    assert!(out.starts_with("exitCode: 0"), "{out}");
    assert!(out.contains(&format!("stdout:\n{}\n", config.working_directory.display())), "{out}");
    // Nothing of the process directory (Cargo.toml, src/) is reachable from it.
    let out = BashTool::new(config.clone()).run_command("cat Cargo.toml").await;
    assert!(!out.starts_with("exitCode: 0"), "{out}");
    assert_refused(&BashTool::new(config.clone()).run_command("cat ../Cargo.toml").await, PATH_REFUSED);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&config.working_directory).unwrap().permissions().mode();
        assert!(existed || mode & 0o022 == 0, "created writable by agw only: {mode:o}");
    }
    if !existed {
        let _ = std::fs::remove_dir(&config.working_directory);
    }
}
