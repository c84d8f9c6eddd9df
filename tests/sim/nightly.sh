#!/usr/bin/env bash
# The simulations' long run: 10 seeds x 20,000 cases of the client simulation (up to ~300
# commands) and of the layer simulation (up to ~200), in a build of its own (about five
# minutes on one core). A failing seed prints its shrunk command list;
# RC_PARAMS="max_size=300 seed=N" build-sim/tests/sim-tests (or layer-sim-tests, max_size=200)
# replays it.
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
ninja -C build-sim tests/sim-tests tests/layer-sim-tests >/dev/null || exit 1
failed=0
for sim in "sim-tests 300" "layer-sim-tests 200"; do
  read -r program size <<<"$sim"
  for seed in "${seeds[@]}"; do
    log=$(mktemp)
    started=$SECONDS
    if RC_PARAMS="max_success=$cases max_size=$size seed=$seed" build-sim/tests/$program --gtest_brief=1 >"$log" 2>&1; then
      echo "$program seed $seed: $cases cases passed in $((SECONDS - started)) s"
    else
      failed=$((failed + 1))
      echo "$program seed $seed: FAILED"
      grep -v '^\s*$' "$log" | grep -A8 -E 'Falsifiable|Segmentation|ERROR' | head -n 20
    fi
    rm -f "$log"
  done
done
echo "$(( 2 * ${#seeds[@]} - failed )) of $(( 2 * ${#seeds[@]} )) runs passed ($cases cases each)"
((failed == 0))
