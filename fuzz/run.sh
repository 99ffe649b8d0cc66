#!/usr/bin/env bash
# Runs every libFuzzer target for a fixed time and prints one summary line per target.
#
#   fuzz/run.sh [SECONDS_PER_TARGET] [TARGET...]     (default: 60 s, all targets)
#
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`). Seeds: fuzz/seeds/<target>
# and the repository's fixtures; the growing corpus goes to fuzz/corpus/<target> (git-ignored),
# crashes to fuzz/artifacts/<target>/ — copy each into fuzz/regressions/<target>/ once fixed, so the
# stable test `cargo nextest run -p agw-fuzz` replays it forever. Logs: fuzz/logs/<target>.log.
set -uo pipefail
cd "$(dirname "$0")"
secs=${1:-60}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.toml | grep -v '^agw-fuzz-targets$')
fi
seed_dirs() {
  case "$1" in
    agent_definition) echo "seeds/$1 ../fixtures/agents" ;;
    tool_definition) echo "seeds/$1 ../fixtures/tools" ;;
    skill_md) echo "seeds/$1 ../fixtures/skills" ;;
    *) echo "seeds/$1" ;;
  esac
}
mkdir -p logs
# One build for all targets (debug assertions on, like the stable tests).
cargo +nightly fuzz build -O --debug-assertions || exit 1
status=0
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t" "artifacts/$t"
  # shellcheck disable=SC2046
  cargo +nightly fuzz run -O --debug-assertions "$t" "corpus/$t" $(seed_dirs "$t") -- \
    -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="artifacts/$t/" >"logs/$t.log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "logs/$t.log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "logs/$t.log" | tail -1)
  corpus=$(find "corpus/$t" -type f | wc -l)
  crashes=$(find "artifacts/$t" -type f | wc -l)
  echo "$t: exit $rc, ${execs:-?} execs in ${secs}s, ${cov:-cov: ?}, corpus $corpus, artifacts $crashes"
  [ "$rc" -eq 0 ] || status=1
done
exit $status
