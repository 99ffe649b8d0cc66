//! Options that turn a reading program into one that runs other programs, writes files or reads
//! paths the checks cannot see — refused for every command, whatever the allow-list says.
//!
//! An operator may add `find`, `sort`, `sed`, … to `agent.tools.bash.allowed-commands`; that allows
//! their reading forms, never `find -exec` or `sort -o`. Commands without an entry here are run as
//! configured. Matching is deliberately wide (a denied short letter anywhere in a bundle before a
//! value-taking letter, any unambiguous prefix of a denied long option): refusing a harmless
//! spelling is acceptable, letting a harmful one through is not.

/// Programs refused outright, whatever their arguments, and why.
const NEVER: &[(&[&str], &str)] = &[
    (
        &[
            "xargs", "env", "nice", "nohup", "timeout", "stdbuf", "setsid", "sudo", "doas", "su", "runuser", "chroot",
            "unshare", "nsenter", "flock", "watch", "time", "strace", "ltrace", "busybox", "command", "exec", "eval",
            "parallel", "ionice", "chrt", "taskset", "script",
        ],
        "it runs another program given in its arguments, which would bypass the allow-list",
    ),
    (
        &["less", "more", "most", "pg", "man", "vi", "vim", "nvim", "view", "ex", "ed", "emacs", "nano"],
        "it is an interactive program with shell escapes (`!`); use cat, head or tail to read files",
    ),
    (&["dd"], "its if=/of= operands are paths the checks cannot see"),
];

/// How one denied option is recognised in a word.
#[derive(Debug, Clone, Copy)]
enum Opt {
    /// The whole word (`find -exec`).
    Word(&'static str),
    /// GNU long option: `--name`, `--name=value`, or an abbreviation `--na` (getopt accepts any
    /// unambiguous prefix).
    Long(&'static str),
    /// A short option letter, alone or in a bundle (`-no` is `-n -o`).
    Short(char),
}

/// A check of a command's whole argument list; the refusal when it fails.
type ArgumentsCheck = fn(&[String]) -> Result<(), Denied>;

/// Why the deny table refused a command. The display text is what the model reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Denied {
    /// The program is refused whatever its arguments (`xargs`, `less`, `dd`, …).
    #[error("Command not allowed: {program} ({why})")]
    Program { program: String, why: &'static str },
    /// An option that runs programs or writes files.
    #[error("Option not allowed: {program} {option} (it runs programs or writes files)")]
    Option { program: String, option: String },
    /// A letter of a traditional `tar` bundle (`tar xf`) that writes files or runs programs.
    #[error("Option not allowed: tar {0} (it writes files or runs programs)")]
    TarLetter(char),
    /// A sed command that runs programs or reads or writes files.
    #[error(
        "sed command not allowed: {0} (sed may only print and substitute, not run programs or read or write files)"
    )]
    SedCommand(String),
    /// An awk program that runs commands or loads code.
    #[error("awk program not allowed: {0} (awk may not run commands or load code)")]
    AwkProgram(&'static str),
}

/// The rules for one program.
struct Entry {
    programs: &'static [&'static str],
    denied: &'static [Opt],
    /// Short options that take a value: letters after one of them in a bundle are its value.
    /// Empty = unknown, the whole bundle is scanned.
    value_letters: &'static str,
    /// Real, harmless long options (without `--`) that are prefixes of denied ones: spelled out
    /// exactly they are themselves, not abbreviations (`tar --list` is not `--listed-incremental`).
    /// Never a denied option itself: a word listed here skips the deny check.
    exact: &'static [&'static str],
    /// Whether `--` ends the options (false for `find`, whose expression follows its paths).
    double_dash_ends_options: bool,
    /// Extra checks of the arguments (scripts, programs, traditional option bundles).
    extra: Option<ArgumentsCheck>,
}

use Opt::{Long, Short, Word};

const TAR_VALUE_LETTERS: &str = "fCbTXKNLVgIFH";
const SED_VALUE_LETTERS: &str = "efl";
const AWK_VALUE_LETTERS: &str = "vFfilEWe";

const TABLE: &[Entry] = &[
    Entry {
        programs: &["find"],
        denied: &[
            Word("-exec"),
            Word("-execdir"),
            Word("-ok"),
            Word("-okdir"),
            Word("-delete"),
            Word("-fprint"),
            Word("-fprint0"),
            Word("-fprintf"),
            Word("-fls"),
        ],
        value_letters: "",
        exact: &[],
        double_dash_ends_options: false,
        extra: None,
    },
    Entry {
        programs: &["sort"],
        denied: &[
            Long("--compress-program"),
            Long("--output"),
            Long("--temporary-directory"),
            Long("--files0-from"),
            Short('o'),
            Short('T'),
        ],
        value_letters: "ktoTS",
        exact: &[],
        double_dash_ends_options: true,
        extra: None,
    },
    Entry {
        programs: &["tar"],
        denied: &[
            Long("--to-command"),
            Long("--checkpoint-action"),
            Long("--use-compress-program"),
            Long("--info-script"),
            Long("--new-volume-script"),
            Long("--rsh-command"),
            Long("--rmt-command"),
            Long("--index-file"),
            Long("--volno-file"),
            Long("--listed-incremental"),
            Long("--extract"),
            Long("--get"),
            Long("--create"),
            Long("--append"),
            Long("--update"),
            Long("--catenate"),
            Long("--concatenate"),
            Long("--delete"),
            Short('I'),
            Short('F'),
            Short('x'),
            Short('c'),
            Short('r'),
            Short('u'),
            Short('A'),
            Short('g'),
        ],
        value_letters: TAR_VALUE_LETTERS,
        exact: &["list", "checkpoint"],
        double_dash_ends_options: true,
        extra: Some(tar_traditional_bundle),
    },
    Entry {
        programs: &["git"],
        denied: &[
            Long("--upload-pack"),
            Long("--receive-pack"),
            Long("--exec"),
            Long("--output"),
            Long("--ext-diff"),
            Long("--textconv"),
            Long("--filters"),
            Long("--open-files-in-pager"),
            Long("--edit-description"),
            Long("--show-signature"),
            Long("--config-env"),
            Short('c'),
            Short('o'),
            Short('O'),
        ],
        value_letters: "",
        exact: &["filter"],
        double_dash_ends_options: true,
        extra: None,
    },
    Entry {
        programs: &["sed"],
        denied: &[Long("--in-place"), Long("--file"), Short('i'), Short('f')],
        value_letters: SED_VALUE_LETTERS,
        exact: &[],
        double_dash_ends_options: true,
        extra: Some(sed_scripts),
    },
    Entry {
        programs: &["awk", "gawk", "mawk", "nawk"],
        denied: &[
            Long("--file"),
            Long("--include"),
            Long("--load"),
            Long("--exec"),
            Long("--pretty-print"),
            Long("--profile"),
            Long("--dump-variables"),
            Long("--debug"),
            Short('f'),
            Short('i'),
            Short('l'),
            Short('E'),
            Short('o'),
            Short('p'),
            Short('d'),
            Short('D'),
        ],
        value_letters: AWK_VALUE_LETTERS,
        exact: &[],
        double_dash_ends_options: true,
        extra: Some(awk_programs),
    },
    Entry {
        programs: &["rg"],
        denied: &[Long("--pre")],
        value_letters: "",
        exact: &[],
        double_dash_ends_options: true,
        extra: None,
    },
];

/// Refuses `program` (the allow-listed name; a path is judged by its file name) with `args` when
/// the table says so.
pub(crate) fn check(program: &str, args: &[String]) -> Result<(), Denied> {
    let name = program.rsplit('/').next().unwrap_or(program);
    if let Some((_, why)) = NEVER.iter().find(|(programs, _)| programs.contains(&name)) {
        return Err(Denied::Program { program: name.to_owned(), why });
    }
    let Some(entry) = TABLE.iter().find(|entry| entry.programs.contains(&name)) else { return Ok(()) };
    let mut options_end = false;
    for word in args {
        if options_end || !word.starts_with('-') || word == "-" {
            continue;
        }
        if word == "--" {
            options_end = entry.double_dash_ends_options;
            continue;
        }
        let long_name = word.strip_prefix("--").map(|long| long.split_once('=').map_or(long, |(name, _)| name));
        if long_name.is_some_and(|name| entry.exact.contains(&name)) {
            continue;
        }
        if let Some(option) = entry.denied.iter().find(|option| matches(word, **option, entry.value_letters)) {
            let shown = match option {
                Word(w) | Long(w) => (*w).to_owned(),
                Short(letter) => format!("-{letter}"),
            };
            return Err(Denied::Option { program: name.to_owned(), option: shown });
        }
    }
    entry.extra.map_or(Ok(()), |check| check(args))
}

fn matches(word: &str, option: Opt, value_letters: &str) -> bool {
    match option {
        Word(w) => word == w,
        Long(long) => {
            let Some(given) = word.strip_prefix("--") else { return false };
            let given = given.split_once('=').map_or(given, |(name, _)| name);
            !given.is_empty() && long[2..].starts_with(given)
        }
        Short(letter) => {
            if word.starts_with("--") {
                return false;
            }
            for c in word[1..].chars() {
                if c == letter {
                    return true;
                }
                if value_letters.contains(c) {
                    // The rest of the word is this option's value.
                    return false;
                }
            }
            false
        }
    }
}

/// `tar xvf a.tar`: a first word without a dash is a bundle of option letters.
fn tar_traditional_bundle(args: &[String]) -> Result<(), Denied> {
    let Some(first) = args.first().filter(|first| !first.starts_with('-')) else { return Ok(()) };
    let bundle = format!("-{first}");
    for letter in ['x', 'c', 'r', 'u', 'A', 'g', 'I', 'F'] {
        if matches(&bundle, Short(letter), TAR_VALUE_LETTERS) {
            return Err(Denied::TarLetter(letter));
        }
    }
    Ok(())
}

/// sed commands that run programs (`e`, the `e` flag of `s`), write files (`w`, `W`, the `w` flag)
/// or read files the checks cannot see (`r`, `R`). Scripts are single commands here: `;` and line
/// breaks are refused before this runs, so every script is one command (plus `{…}` blocks).
fn sed_scripts(args: &[String]) -> Result<(), Denied> {
    for script in programs(args, SED_VALUE_LETTERS, 'e', &["--expression", "--line-length", "--file"], "--expression") {
        if let Some(command) = dangerous_sed_command(&script) {
            return Err(Denied::SedCommand(command));
        }
    }
    Ok(())
}

/// The program texts of a sed/awk command line: the values of the script option (`-e`,
/// `--expression`, `--source`), or else the first operand.
fn programs(
    args: &[String],
    value_letters: &str,
    script_letter: char,
    value_longs: &[&str],
    script_long: &str,
) -> Vec<String> {
    let abbreviates = |name: &str, long: &str| !name.is_empty() && long[2..].starts_with(name);
    let (mut scripts, mut operands) = (Vec::new(), Vec::new());
    let mut words = args.iter();
    while let Some(word) = words.next() {
        if word == "--" {
            operands.extend(words.by_ref().cloned());
            break;
        }
        if let Some(long) = word.strip_prefix("--") {
            let (name, glued) =
                long.split_once('=').map_or((long, None), |(name, value)| (name, Some(value.to_owned())));
            let takes_value = value_longs.iter().any(|l| abbreviates(name, l));
            let value = if takes_value && glued.is_none() { words.next().cloned() } else { glued };
            if abbreviates(name, script_long) {
                scripts.extend(value);
            }
        } else if word.len() > 1 && word.starts_with('-') {
            for (i, c) in word.char_indices().skip(1) {
                if value_letters.contains(c) {
                    let rest = &word[i + c.len_utf8()..];
                    let value = if rest.is_empty() { words.next().cloned() } else { Some(rest.to_owned()) };
                    if c == script_letter {
                        scripts.extend(value);
                    }
                    break;
                }
            }
        } else {
            operands.push(word.clone());
        }
    }
    if scripts.is_empty() { operands.into_iter().take(1).collect() } else { scripts }
}

fn dangerous_sed_command(script: &str) -> Option<String> {
    let mut rest = script.trim_start_matches(['{', '}', ' ']);
    // Address: line numbers, ranges, steps, `/regex/` or `\cregexc`, negation.
    loop {
        let before = rest.len();
        rest = rest.trim_start_matches(|c: char| c.is_ascii_digit() || c == ',' || c == '~' || c == '!' || c == '+');
        if let Some(regex) = rest.strip_prefix('/') {
            rest = skip_delimited(regex, '/')?;
        } else if let Some(custom) = rest.strip_prefix('\\') {
            let delimiter = custom.chars().next()?;
            rest = skip_delimited(&custom[delimiter.len_utf8()..], delimiter)?;
        }
        rest = rest.trim_start_matches(['I', 'M']);
        if rest.len() == before {
            break;
        }
    }
    let rest = rest.trim_start_matches(['{', ' ']);
    let command = rest.chars().next()?;
    match command {
        'e' | 'w' | 'W' | 'r' | 'R' => Some(command.to_string()),
        's' | 'y' => {
            let body = &rest[1..];
            let delimiter = body.chars().next()?;
            let after_pattern = skip_delimited(&body[delimiter.len_utf8()..], delimiter)?;
            let flags = skip_delimited(after_pattern, delimiter)?;
            let flags = flags.trim_end_matches('}');
            (command == 's' && flags.contains(['e', 'w', 'W'])).then(|| format!("s///{flags}"))
        }
        _ => None,
    }
}

/// The text after the next unescaped `delimiter`; `None` when there is none.
fn skip_delimited(text: &str, delimiter: char) -> Option<&str> {
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == delimiter {
            return Some(&text[i + c.len_utf8()..]);
        }
    }
    None
}

/// awk programs that run commands (`system(…)`) or load code (`@load`, `@include`). Output
/// redirection and pipes (`>`, `|`) are already refused as shell syntax.
fn awk_programs(args: &[String]) -> Result<(), Denied> {
    let value_longs = ["--source", "--field-separator", "--assign", "--file", "--include", "--load", "--exec"];
    for program in programs(args, AWK_VALUE_LETTERS, 'e', &value_longs, "--source") {
        for needle in ["system", "@load", "@include"] {
            if program.contains(needle) {
                return Err(Denied::AwkProgram(needle));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(command: &str) -> (String, Vec<String>) {
        let mut words = command.split_whitespace().map(str::to_owned);
        let program = words.next().unwrap();
        (program, words.collect())
    }

    fn refused(command: &str) -> bool {
        let (program, args) = words(command);
        check(&program, &args).is_err()
    }

    #[test]
    fn reading_forms_pass() {
        for command in [
            "find . -name *.rs -type f",
            "find . -print",
            "sort -n -k2 notes.txt",
            "sort -k2o notes.txt",
            "tar -tvf a.tar",
            "tar tvf a.tar",
            "tar --list --file=a.tar",
            "tar --checkpoint=10 -tf a.tar",
            "git rev-list --filter=blob:none HEAD",
            "git log --oneline",
            "git grep -n x",
            "sed -n 1,5p notes.txt",
            "sed s/a/b/g notes.txt",
            "sed -E s|a|b|g notes.txt",
            "sed /x/d notes.txt",
            "sed s/a/b/ readme.txt write.txt example.txt",
            "sed -n -e p readme.txt",
            "awk {print} system.log",
            "tar -tf x.tar xfile",
            "awk -F: {print$1} notes.txt",
            "awk -vdog=1 {print$1} notes.txt",
            "rg --pre-glob *.gz x",
            "grep -r x .",
            "ls -la",
        ] {
            assert!(!refused(command), "{command}");
        }
    }

    #[test]
    fn denied_forms_are_refused() {
        for command in [
            "find . -exec rm {} +",
            "find . -execdir id +",
            "find . -ok id",
            "find . -okdir id",
            "find . -delete",
            "find . -fprint out",
            "find . -fprint0 out",
            "find . -fprintf out %p",
            "find . -fls out",
            "find -- . -delete",
            "sort --compress-program=sh x",
            "sort --compress=sh x",
            "sort -o out x",
            "sort -no out x",
            "sort --output=out x",
            "sort -T /tmp x",
            "tar --to-command=sh -xf a.tar",
            "tar --checkpoint-action=exec=id -tf a.tar",
            "tar --use-compress-program=sh -tf a.tar",
            "tar -I sh -tf a.tar",
            "tar -F sh -tf a.tar",
            "tar --info-script=sh -tf a.tar",
            "tar --new-volume-script=sh -tf a.tar",
            "tar -xf a.tar",
            "tar xf a.tar",
            "tar -cf a.tar .",
            "tar cf a.tar .",
            "tar --extract -f a.tar",
            "tar --get -f a.tar",
            "tar --listed-incremental=snap -tf a.tar",
            "tar --create -f a.tar .",
            "git -c core.pager=id log",
            "git log --upload-pack=id",
            "git log --receive-pack=id",
            "git log --exec=id",
            "git log --output=x",
            "git log -o x",
            "git diff --ext-diff",
            "git show --textconv HEAD",
            "git cat-file --filters HEAD:x",
            "sed -i s/a/b/ notes.txt",
            "sed -ni p notes.txt",
            "sed --in-place s/a/b/ notes.txt",
            "sed -f script notes.txt",
            "sed e notes.txt",
            "sed 1e notes.txt",
            "sed /x/e notes.txt",
            "sed s/a/id/e notes.txt",
            "sed s/a/b/w out notes.txt",
            "sed s|a|b|gw out notes.txt",
            "sed w out notes.txt",
            "sed 1,3w out notes.txt",
            "sed r/etc/passwd notes.txt",
            "sed -e 1R/etc/passwd notes.txt",
            "awk BEGIN{system(x)} notes.txt",
            "awk -f prog notes.txt",
            "gawk -l x {print} notes.txt",
            "awk @load x",
            "rg --pre sh x",
            "rg --pre=sh x",
            "xargs rm",
            "env rm -rf /",
            "less notes.txt",
            "more notes.txt",
            "timeout 1 rm x",
            "dd if=/etc/passwd",
            "/usr/bin/env id",
        ] {
            assert!(refused(command), "{command}");
        }
    }

    #[test]
    fn refusals_name_what_was_refused() {
        let (program, args) = words("find . -exec rm {} +");
        assert_eq!(
            check(&program, &args).unwrap_err().to_string(),
            "Option not allowed: find -exec (it runs programs or writes files)"
        );
        let (program, args) = words("xargs rm");
        assert!(
            check(&program, &args)
                .unwrap_err()
                .to_string()
                .starts_with("Command not allowed: xargs (it runs another program")
        );
        let (program, args) = words("sed s/a/b/w out x");
        assert!(check(&program, &args).unwrap_err().to_string().starts_with("sed command not allowed: s///w"));
    }
}
