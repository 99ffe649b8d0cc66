#!/usr/bin/env bash
# agw and MCP both ways, with the official MCP Python SDK (issue 17): an agw agent uses the tools
# of a third-party MCP server written with the SDK (py_server.py, started by agw over stdio), and
# the SDK's clients use agw's agents as MCP tools — over streamable HTTP at /mcp and over stdio
# (`agw mcp-stdio`). The SDK is installed from PyPI at the versions pinned in requirements.lock
# (with hashes), into this directory (.venv, .cache): nothing outside the repo.
#
# It builds agw and the scripted fixture provider (agw-testkit's `fixture_provider` example),
# starts both on loopback with the agents in ./agents and the rules in ./scenario.json, runs
# mcp_checks.py, and ends with `mcp: N passed, M failed`.
#
#   scripts/mcp/run.sh
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
suite_init

# Python: the MCP SDK, for the third-party server agw starts and for the clients.
python_venv "$here"
start_fixture "$here/scenario.json"

# The third-party server, declared to agw by absolute paths (agw clears a stdio server's
# environment and runs no shell).
mkdir -p "$work/mcp"
python3 -c 'import json,sys; print(json.dumps({"transport": "stdio", "command": sys.argv[1], "args": [sys.argv[2]]}))' \
    "$here/.venv/bin/python" "$here/py_server.py" >"$work/mcp/py.json"

# The configuration both `agw serve` and `agw mcp-stdio` run with.
agw_env=(
    PATH="$PATH" HOME="$work"
    SERVER_PORT=0 AGENT_EXTERNAL_DIR="$here/agents" AGW_RESOURCES_SYNC_BUNDLED=false
    AGENT_MCP_EXTERNAL_DIR="$work/mcp" AGENT_DATA_EXTERNAL_DIR="$work/data"
    AGENT_BASH_WORKING_DIRECTORY="$work/bash" AGENT_CHAT_EVENT_CALLBACK_ENABLED=false
    AGENT_PROVIDERS_FIXTURE_BASE_URL="$(cat "$work/fixture.addr")" AGENT_PROVIDERS_FIXTURE_API_KEY=sk-fixture
    AGENT_PROVIDERS_FIXTURE_MODEL=fixture-model AGW_LOG=warn
)
env -i "${agw_env[@]}" MEMORY_CHAT_DIR="$work/chats" "$target/debug/agw" serve >"$work/agw.out" 2>"$work/agw.log" &
pids+=($!)
wait_for_agw

# What the stdio client starts: `agw mcp-stdio` with the same configuration (its own chat
# directory: two agw processes never share one).
{
    echo '#!/usr/bin/env bash'
    printf 'exec env -i'
    printf ' %q' "${agw_env[@]}" MEMORY_CHAT_DIR="$work/chats-stdio" "$target/debug/agw" mcp-stdio
    echo
} >"$work/agw-stdio.sh"
chmod +x "$work/agw-stdio.sh"


AGW_BASE="$base" AGW_STDIO="$work/agw-stdio.sh" AGW_STDIO_LOG="$work/agw-stdio.log" \
    "$here/.venv/bin/python" "$here/mcp_checks.py" >"$work/checks.out" 2>&1
status=$?
cat "$work/checks.out"
record mcp-sdk "$status" "$work/checks.out"

if [ "$failed" -ne 0 ]; then
    echo "--- agw log"
    tail -40 "$work/agw.log"
    echo "--- agw mcp-stdio log"
    tail -20 "$work/agw-stdio.log" 2>/dev/null
fi
echo "mcp: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
