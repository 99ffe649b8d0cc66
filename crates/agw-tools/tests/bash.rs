//! `_bash_` as a security boundary (tools-skills-viewports.md §4.1 + README decisions): every
//! attack is refused with a clear result text, and nothing outside the allowed roots is read,
//! created or changed. Plus the ordinary behaviour: listing, reading, globs, caps, timeouts.

#![cfg(unix)]

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use agw_tools::{BashConfig, BashTool, Tool, ToolContext, ToolOutput};
use common::TempDir;
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
    let tool = sandbox.tool(&["env"], &[]);
    let out = tool.run_command("env").await;
    assert!(out.starts_with("exitCode: 0"), "{out}");
    assert!(out.contains("TERM=dumb"));
    assert!(!out.contains("CARGO_PKG_NAME"), "{out}");
}
