//! Scripts never see the gateway's environment (provider API keys): only PATH, LANG, LC_ALL and
//! TZ pass (HOME and TMPDIR are the sandbox's scratch directory; AGW_TOOL_CONTINUED is agw's). Alone in its own test binary because it sets a process variable.

// Setting process environment variables is unsafe in edition 2024.
#![allow(unsafe_code)]
mod common;

use common::{run, temp, tool, write};
use serde_json::{Value, json};

#[test]
fn environment_is_cleared_except_a_safe_set() {
    // SAFETY: set before any other thread of this test binary exists (the runtime is built after).
    unsafe {
        std::env::set_var("AGW_TEST_SECRET", "sk-do-not-leak");
        std::env::set_var("AGENT_PROVIDERS_BAILIAN_API_KEY", "sk-do-not-leak-either");
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let (_guard, dir) = temp();
        let root = dir.join("skills");
        write(root.join("env/scripts/env.py"), "import json, os\nprint(json.dumps(dict(os.environ)))\n");
        write(root.join("env/scripts/env.sh"), "env\n");
        let tool = tool(&root);

        let result = run(&tool, json!({"skill": "env", "script": "scripts/env.py"})).await;
        assert_eq!(result["ok"], true, "{result}");
        let env: Value = serde_json::from_str(result["stdout"].as_str().unwrap()).unwrap();
        let env = env.as_object().unwrap();
        assert!(env.get("AGW_TEST_SECRET").is_none());
        assert!(env.get("AGENT_PROVIDERS_BAILIAN_API_KEY").is_none());
        // (A pyenv shim may prepend to PATH before exec'ing the real interpreter.)
        let path = std::env::var("PATH").unwrap();
        assert!(env.get("PATH").and_then(Value::as_str).is_some_and(|p| p.ends_with(&path)), "{env:?}");

        let result = run(&tool, json!({"skill": "env", "script": "scripts/env.sh"})).await;
        let stdout = result["stdout"].as_str().unwrap();
        assert!(!stdout.contains("sk-do-not-leak"), "{stdout}");
        // bash itself adds PWD, SHLVL and `_`; everything else came from the gateway's safe set.
        let allowed = [
            "PATH",
            "HOME",
            "TMPDIR",
            "LANG",
            "LC_ALL",
            "TZ",
            "PYTHONDONTWRITEBYTECODE",
            "PYTHONUNBUFFERED",
            "PYTHONIOENCODING",
            // How often the user continued the call (docs/pausing-tools.md): agw's own, not the gateway's.
            "AGW_TOOL_CONTINUED",
            "PWD",
            "SHLVL",
            "_",
        ];
        for line in stdout.lines() {
            let key = line.split('=').next().unwrap();
            assert!(allowed.contains(&key), "unexpected variable {line}");
        }
        assert!(stdout.contains(&format!("PATH={}", std::env::var("PATH").unwrap())));
        assert!(stdout.contains("PYTHONDONTWRITEBYTECODE=1"));
        assert!(stdout.lines().any(|l| l == "AGW_TOOL_CONTINUED=0"), "{stdout}");

        let result = run(
            &tool,
            json!({"skill": "env", "pythonCode": "import os\nprint(os.environ.get('AGW_TEST_SECRET', 'absent'))"}),
        )
        .await;
        assert_eq!(result["stdout"], "absent\n");
        // No byte code was written into the skill directory.
        assert!(!root.join("env/scripts/__pycache__").exists());
    });
}
