#!/usr/bin/env bash
# Drives agw's other wire protocols with the real client libraries of each ecosystem (issue 16):
# the official `openai` SDK (Python) against the OpenAI Chat Completions façade, the official
# `a2a-sdk` (Python, its own venv in ./a2a) against the A2A 1.0 bindings — and its server as the remote
# agent an agw agent calls —, the `ai`
# package's chat transport (Node) and `@ai-sdk/react`'s `useChat` hook (rendered in Node with
# react-test-renderer, automatic sends on) against the AI SDK UI message stream, and AG-UI's
# HttpAgent (Node) against the AG-UI endpoint, and a line parser shaped like the phase stream's
# client guide (Node's fetch, no package) against the phase stream, then kills agw while an AI SDK
# run and a phase-stream run stream and has both clients re-attach to the runs the restarted agw
# resumes (crash recovery, issue 37). The clients are
# installed from the registries at the versions pinned in requirements.lock (with hashes) and
# package-lock.json, into this directory (.venv, node_modules, .cache): nothing outside the repo.
#
# It builds agw and the scripted fixture provider (agw-testkit's `fixture_provider` example),
# starts both on loopback with the agents in ./agents and the rules in ./scenario.json, runs the
# client suites, and ends with `protocols: N passed, M failed`.
#
#   scripts/protocols/run.sh
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
suite_init
start_fixture "$here/scenario.json"

# The a2a-sdk (A2A 1.0), in its own venv (it pins another httpx than the openai SDK): its server
# is the remote agent the `a2a_caller` agent calls (declared in $work/a2a-agents, as `sdk` and,
# never streaming, `sdk_blocking`); its client drives agw's A2A server below.
python_venv "$here/a2a"
"$here/a2a/.venv/bin/python" "$here/a2a_sdk_server.py" "$work/sdk.port" 2>"$work/sdk-server.log" &
pids+=($!)
for _ in $(seq 100); do [ -s "$work/sdk.port" ] && break; sleep 0.1; done
[ -s "$work/sdk.port" ] || { echo "the a2a-sdk server did not start"; cat "$work/sdk-server.log"; exit 1; }
sdk_url="http://127.0.0.1:$(cat "$work/sdk.port")/"
mkdir -p "$work/a2a-agents"
echo "{\"url\": \"$sdk_url\", \"inputRequired\": \"model\"}" >"$work/a2a-agents/sdk.json"
echo "{\"url\": \"$sdk_url\", \"streaming\": false}" >"$work/a2a-agents/sdk_blocking.json"

# start_agw: agw on the suite's agents and chat directory; sets agw_pid and base.
start_agw() {
    env -i PATH="$PATH" HOME="$work" \
        SERVER_PORT=0 AGENT_EXTERNAL_DIR="$here/agents" AGW_RESOURCES_SYNC_BUNDLED=false \
        MEMORY_CHAT_DIR="$work/chats" AGENT_DATA_EXTERNAL_DIR="$work/data" \
        AGENT_BASH_WORKING_DIRECTORY="$work/bash" AGENT_CHAT_EVENT_CALLBACK_ENABLED=false \
        AGENT_PROVIDERS_FIXTURE_BASE_URL="$(cat "$work/fixture.addr")" AGENT_PROVIDERS_FIXTURE_API_KEY=sk-fixture \
        AGENT_PROVIDERS_FIXTURE_MODEL=fixture-model AGW_LOG=warn AGW_A2A_PUSH_ALLOW_PRIVATE_NETWORKS=true \
        AGENT_A2A_EXTERNAL_DIR="$work/a2a-agents" \
        "$target/debug/agw" serve >"$work/agw.out" 2>>"$work/agw.log" &
    agw_pid=$!
    pids+=($agw_pid)
    wait_for_agw
}
start_agw

# A second agw with auth on (a local RSA key made here) for the a2a-sdk's signed calls.
auth_key
token=$(auth_token a2a-sdk)
env -i PATH="$PATH" HOME="$work" \
    SERVER_PORT=0 AGENT_EXTERNAL_DIR="$here/agents" AGW_RESOURCES_SYNC_BUNDLED=false \
    MEMORY_CHAT_DIR="$work/chats-auth" AGENT_DATA_EXTERNAL_DIR="$work/data" \
    AGENT_BASH_WORKING_DIRECTORY="$work/bash" AGENT_CHAT_EVENT_CALLBACK_ENABLED=false \
    AGENT_PROVIDERS_FIXTURE_BASE_URL="$(cat "$work/fixture.addr")" AGENT_PROVIDERS_FIXTURE_API_KEY=sk-fixture \
    AGENT_PROVIDERS_FIXTURE_MODEL=fixture-model AGW_LOG=warn \
    AGENT_AUTH_LOCAL_PUBLIC_KEY="$auth_public" \
    "$target/debug/agw" serve >"$work/agw-auth.out" 2>>"$work/agw-auth.log" &
pids+=($!)
for _ in $(seq 100); do grep -q "listening on" "$work/agw-auth.out" 2>/dev/null && break; sleep 0.1; done
auth_base=$(sed -n 's/.*listening on \(http[^ ]*\).*/\1/p' "$work/agw-auth.out" | head -1)
[ -n "$auth_base" ] || { echo "the auth agw did not start"; cat "$work/agw-auth.log"; exit 1; }


# Python: the openai SDK.
python_venv "$here"
AGW_BASE="$base" "$here/.venv/bin/python" "$here/openai_sdk.py" >"$work/openai.out" 2>&1
status=$?
cat "$work/openai.out"
record openai-sdk "$status" "$work/openai.out"

# Python: the a2a-sdk's client against agw's A2A server, and agw calling the a2a-sdk's server.
AGW_BASE="$base" SDK_URL="$sdk_url" AGW_AUTH_BASE="$auth_base" AGW_TOKEN="$token" \
    "$here/a2a/.venv/bin/python" "$here/a2a_sdk.py" >"$work/a2a.out" 2>&1
status=$?
cat "$work/a2a.out"
record a2a-sdk "$status" "$work/a2a.out"

# Node: the `ai` package and `useChat` (AI SDK UI message stream) and AG-UI's client.
export npm_config_cache="$here/.cache/npm" npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false
(cd "$here" && npm ci --silent >"$work/npm.log" 2>&1) || { cat "$work/npm.log"; exit 1; }
AGW_BASE="$base" node "$here/ai_sdk.mjs" >"$work/ai_sdk.out" 2>&1
status=$?
cat "$work/ai_sdk.out"
record ai-sdk "$status" "$work/ai_sdk.out"
AGW_BASE="$base" node "$here/ai_sdk_use_chat.mjs" >"$work/ai_sdk_use_chat.out" 2>&1
status=$?
cat "$work/ai_sdk_use_chat.out"
record ai-sdk-use-chat "$status" "$work/ai_sdk_use_chat.out"
AGW_BASE="$base" node "$here/ag_ui.mjs" >"$work/ag_ui.out" 2>&1
status=$?
cat "$work/ag_ui.out"
record ag-ui "$status" "$work/ag_ui.out"

# Node, no library: the phase stream read the way its client guide reads it.
AGW_BASE="$base" node "$here/phase.mjs" >"$work/phase.out" 2>&1
status=$?
cat "$work/phase.out"
record phase "$status" "$work/phase.out"

# Crash recovery (issue 37): SIGKILL while an AI SDK run and a phase-stream run stream, a new
# agw on the same chat directory resumes both, and each client re-attaches its own way.
AGW_BASE="$base" node "$here/resume.mjs" start "$work/resume.json" >"$work/resume.out" 2>&1 &
reader=$!
for _ in $(seq 200); do [ -s "$work/resume.json" ] && break; sleep 0.05; done
kill -9 "$agw_pid"
wait "$agw_pid" 2>/dev/null
wait "$reader"
status=$?
rm -f "$work/agw.out"
start_agw
if [ "$status" -eq 0 ]; then
    AGW_BASE="$base" node "$here/resume.mjs" finish "$work/resume.json" >>"$work/resume.out" 2>&1
    status=$?
fi
cat "$work/resume.out"
record resume "$status" "$work/resume.out"

if [ "$failed" -ne 0 ]; then
    echo "--- agw log"
    tail -40 "$work/agw.log"
fi
echo "protocols: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
