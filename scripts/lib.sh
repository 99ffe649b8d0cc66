# Shared by the scripted suites (scripts/*/run.sh), sourced, never run: a scratch directory and
# child processes cleaned up at exit, agw and the scripted fixture provider built and started on
# loopback, and a Python venv installed from a hash-pinned lock file inside the suite's directory.

# Sets root, work, pids, target; builds agw and the fixture provider.
suite_init() {
    root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    cd "$root" || exit 1
    work=$(mktemp -d)
    pids=()
    trap suite_cleanup EXIT
    cargo build -q --locked -p agw || exit 1
    cargo build -q --locked -p agw-testkit --example fixture_provider || exit 1
    target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
}

suite_cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$work"
}

# start_fixture SCENARIO: the scripted provider on loopback; its URL in $work/fixture.addr.
start_fixture() {
    "$target/debug/examples/fixture_provider" "$1" "$work/fixture.addr" 2>"$work/fixture.log" &
    pids+=($!)
    for _ in $(seq 100); do [ -s "$work/fixture.addr" ] && break; sleep 0.1; done
    [ -s "$work/fixture.addr" ] || { echo "fixture provider did not start"; cat "$work/fixture.log"; exit 1; }
}

# python_venv DIR: DIR/.venv with DIR/requirements.lock installed (--require-hashes).
python_venv() {
    export PIP_CACHE_DIR="$1/.cache/pip" PIP_DISABLE_PIP_VERSION_CHECK=1
    if [ ! -x "$1/.venv/bin/python" ]; then python3 -m venv "$1/.venv" || exit 1; fi
    "$1/.venv/bin/pip" install -q --require-hashes -r "$1/requirements.lock" || exit 1
}

# wait_for_agw: waits for `agw serve` (stdout in $work/agw.out) to listen; sets base.
wait_for_agw() {
    for _ in $(seq 100); do grep -q "listening on" "$work/agw.out" 2>/dev/null && break; sleep 0.1; done
    base=$(sed -n 's/.*listening on \(http[^ ]*\).*/\1/p' "$work/agw.out" | head -1)
    [ -n "$base" ] || { echo "agw did not start"; cat "$work/agw.log"; exit 1; }
}

# record NAME STATUS OUTPUT: counts the `ok ` lines of a check script's output as passed and, when
# it failed, its exit status as the number of failed checks (at least 1), showing its tail.
passed=0
failed=0
record() {
    local n
    n=$(grep -c '^ok ' "$3" || true)
    passed=$((passed + n))
    if [ "$2" -ne 0 ]; then
        failed=$((failed + $2))
        echo "FAILED: $1"
        tail -30 "$3"
    fi
}

# auth_key: an RSA key made here, for a suite's agw with auth on: the key in $work/auth.key, its
# public PEM (AGENT_AUTH_LOCAL_PUBLIC_KEY) in $auth_public.
auth_key() {
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$work/auth.key" 2>/dev/null || { echo "openssl failed"; exit 1; }
    auth_public=$(openssl pkey -in "$work/auth.key" -pubout)
}

# auth_token SUB: a bearer token for SUB, signed with auth_key's key (RS256, valid an hour).
auth_token() {
    SUB="$1" KEY="$work/auth.key" python3 - <<'PY'
import base64, json, os, subprocess, time
def b64(raw): return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
now = int(time.time())
header = b64(json.dumps({"alg": "RS256", "typ": "JWT"}).encode())
claims = b64(json.dumps({"sub": os.environ["SUB"], "iat": now, "exp": now + 3600}).encode())
signed = subprocess.run(["openssl", "dgst", "-sha256", "-sign", os.environ["KEY"]],
                        input=f"{header}.{claims}".encode(), capture_output=True, check=True).stdout
print(f"{header}.{claims}.{b64(signed)}")
PY
}
