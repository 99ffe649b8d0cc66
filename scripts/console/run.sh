#!/usr/bin/env bash
# The browser console (issue 40) in headless Chromium: Playwright's core library (pinned in
# package-lock.json, installed into this directory) drives Debian's Chromium (/usr/bin/chromium,
# or $CHROMIUM) against agw serving its bundled demo agents on the offline demo model — once with
# auth off, once on with a local key. Screenshots of every step go to $CONSOLE_SHOTS (default: a
# directory under target/). Ends with `console: N passed, M failed`.
#
#   scripts/console/run.sh
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
suite_init
shots="${CONSOLE_SHOTS:-$target/console-shots}"
rm -rf "$shots" && mkdir -p "$shots"

command -v "${CHROMIUM:-/usr/bin/chromium}" >/dev/null || { echo "Chromium is not installed (apt-get install chromium)"; exit 1; }

# serve NAME [ENV…]: agw on the bundled demo agents; its URL in $base.
serve() {
    local name=$1
    shift
    rm -f "$work/agw.out"
    env -i PATH="$PATH" HOME="$work" SERVER_PORT=0 MEMORY_CHAT_DIR="$work/chats-$name" \
        AGENT_DATA_EXTERNAL_DIR="$work/data" AGENT_BASH_WORKING_DIRECTORY="$work/bash" AGENT_CHAT_EVENT_CALLBACK_ENABLED=false AGW_LOG=warn "$@" \
        "$target/debug/agw" serve >"$work/agw.out" 2>>"$work/agw-$name.log" &
    pids+=($!)
    wait_for_agw
}
serve open
open_base=$base

# Auth on: an RSA key made here; the token is signed with it (RS256).
auth_key
token=$(auth_token console-tester)
serve auth AGENT_AUTH_LOCAL_PUBLIC_KEY="$auth_public"
auth_base=$base

export npm_config_cache="$here/.cache/npm" npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false
(cd "$here" && npm ci --silent >"$work/npm.log" 2>&1) || { cat "$work/npm.log"; exit 1; }
AGW_BASE="$open_base" AGW_AUTH_BASE="$auth_base" AGW_TOKEN="$token" SHOTS="$shots" \
    node "$here/console.mjs" >"$work/console.out" 2>&1
status=$?
cat "$work/console.out"
record console "$status" "$work/console.out"
if [ "$failed" -ne 0 ]; then
    echo "--- agw logs"
    tail -n 20 "$work"/agw-*.log
fi
echo "screenshots: $shots"
echo "console: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
