#!/usr/bin/env bash
# The simulation's long run: 10 seeds x 20,000 cases of up to ~300 commands (200,000 cases,
# about two minutes on one core), in a build of its own. A failing seed prints its shrunk
# command list; RC_PARAMS="max_size=300 seed=N" build-sim/tests/sim-tests replays it.
#   tests/sim/nightly.sh [CASES_PER_SEED] [SEED...]   (default: 20000, ten fresh seeds)
set -uo pipefail
cd "$(dirname "$0")/../.."
cases=${1:-20000}
shift $(( $# > 0 ? 1 : 0 ))
seeds=("$@")
if ((${#seeds[@]} == 0)); then
  for _ in $(seq 1 10); do seeds+=("$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')"); done
fi
[[ -f build-sim/build.ninja ]] || meson setup build-sim -Dbench=false -Ddebug=false >/dev/null || exit 1
ninja -C build-sim tests/sim-tests >/dev/null || exit 1
failed=0
for seed in "${seeds[@]}"; do
  log=$(mktemp)
  started=$SECONDS
  if RC_PARAMS="max_success=$cases max_size=300 seed=$seed" build-sim/tests/sim-tests --gtest_brief=1 >"$log" 2>&1; then
    echo "seed $seed: $cases cases passed in $((SECONDS - started)) s"
  else
    failed=$((failed + 1))
    echo "seed $seed: FAILED"
    grep -v '^\s*$' "$log" | grep -A8 -E 'Falsifiable|Segmentation|ERROR' | head -n 20
  fi
  rm -f "$log"
done
echo "$(( ${#seeds[@]} - failed )) of ${#seeds[@]} seeds passed ($cases cases each)"
((failed == 0))
