#!/usr/bin/env bash
# Runs a real small model with prompted tool calling (`modelConfig.toolCalling: "prompted"`,
# docs/models.md) end to end, against an OpenAI-compatible local server that has no tool-call
# template — llama.cpp's llama-server or Ollama. Not part of CI: it needs the server and a model.
#
# It builds agw, starts it on loopback with one REACT agent (./agents/prompted_react.json, tools
# mock_city_weather and city_datetime) whose provider `local` points at the server, asks it for
# the weather, and checks the run's SSE stream: a tool call streamed as tool.start / tool.args /
# tool.end, its tool.result, no marker (✿) in any delta, run.complete. It prints the answer and
# ends with `prompted-tools: N passed, M failed`; the stream and agw's log stay in $work when a
# check fails (the path is printed).
#
#   llama-server -m qwen2.5-1.5b-instruct-q4_k_m.gguf --port 8081        # or: ollama pull qwen2.5:1.5b
#   AGW_PROMPTED_BASE_URL=http://127.0.0.1:8081 scripts/prompted-tools/run.sh
#   AGW_PROMPTED_BASE_URL=http://127.0.0.1:11434 AGW_PROMPTED_MODEL=qwen2.5:1.5b scripts/prompted-tools/run.sh
#
# Settings (environment):
#   AGW_PROMPTED_BASE_URL  the server's base URL (required; `/v1/chat/completions` is appended)
#   AGW_PROMPTED_MODEL     the model name sent (default qwen2.5:1.5b; llama-server ignores it)
#   AGW_PROMPTED_API_KEY   sent as the bearer token (default: none needed, `local`)
#   AGW_PROMPTED_MESSAGE   the question (default: the weather in Tokyo on 2026-02-13)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"

if [ -z "${AGW_PROMPTED_BASE_URL:-}" ]; then
    sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
model=${AGW_PROMPTED_MODEL:-qwen2.5:1.5b}
message=${AGW_PROMPTED_MESSAGE:-What is the weather in Tokyo on 2026-02-13? Use the weather tool.}

root=$(cd "$here/../.." && pwd)
cd "$root" || exit 1
work=$(mktemp -d)
pids=()
keep=0
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
    wait 2>/dev/null
    if [ "$keep" = 1 ]; then echo "kept: $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
cargo build -q --locked -p agw || exit 1
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')

env -i PATH="$PATH" HOME="$work" \
    SERVER_PORT=0 AGENT_EXTERNAL_DIR="$here/agents" AGW_RESOURCES_SYNC_BUNDLED=false \
    MEMORY_CHAT_DIR="$work/chats" AGENT_DATA_EXTERNAL_DIR="$work/data" \
    AGENT_BASH_WORKING_DIRECTORY="$work/bash" AGENT_CHAT_EVENT_CALLBACK_ENABLED=false \
    AGENT_PROVIDERS_LOCAL_BASE_URL="$AGW_PROMPTED_BASE_URL" \
    AGENT_PROVIDERS_LOCAL_API_KEY="${AGW_PROMPTED_API_KEY:-local}" \
    AGENT_PROVIDERS_LOCAL_MODEL="$model" AGW_LOG=info \
    "$target/debug/agw" serve >"$work/agw.out" 2>>"$work/agw.log" &
pids+=($!)
wait_for_agw

echo "asking $model at $AGW_PROMPTED_BASE_URL: $message"
body=$(python3 -c 'import json,sys; print(json.dumps({"agentKey": "promptedReact", "message": sys.argv[1]}))' "$message")
curl -sN --max-time 600 "$base/api/ap/query" -H 'Content-Type: application/json' -d "$body" >"$work/run.sse"

python3 - "$work/run.sse" <<'PY'
import json, sys

events = []
for line in open(sys.argv[1], encoding="utf-8"):
    if line.startswith("data:"):
        try:
            events.append(json.loads(line[5:]))
        except ValueError:
            pass
types = [e.get("type") for e in events]
passed = failed = 0

def check(name, ok, detail=""):
    global passed, failed
    print(("ok " if ok else "FAILED ") + name + ("" if ok else f": {detail}"))
    passed += 1 if ok else 0
    failed += 0 if ok else 1

starts = [e for e in events if e.get("type") == "tool.start"]
results = [e for e in events if e.get("type") == "tool.result"]
check("the model called a tool", bool(starts), f"events: {types}")
for start in starts:
    args = "".join(e.get("delta", "") for e in events if e.get("type") == "tool.args" and e.get("toolId") == start["toolId"])
    print(f"   call {start.get('toolName')} {args}")
check("every call has a result", len(results) == len(starts), f"{len(starts)} calls, {len(results)} results")
for result in results:
    print(f"   result {result.get('result', '')[:200]}")
markers = [e for e in events if "✿" in str(e.get("delta", ""))]
check("no marker reached the client", not markers, markers[:3])
answer = "".join(e.get("delta", "") for e in events if e.get("type") == "content.delta")
print(f"   answer: {answer.strip()}")
check("the run completed", bool(types) and types[-1] == "run.complete", f"last event: {events[-1] if events else None}")
print(f"prompted-tools: {passed} passed, {failed} failed")
sys.exit(failed)
PY
status=$?
if [ "$status" -ne 0 ]; then
    keep=1
    echo "agw log tail:"
    tail -20 "$work/agw.log"
fi
exit "$status"
