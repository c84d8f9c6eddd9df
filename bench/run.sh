#!/usr/bin/env bash
# Builds the benchmarks in a release build of their own and runs them. Extra arguments go to
# Google Benchmark (e.g. --benchmark_filter=Decode --benchmark_repetitions=5).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-deps.sh
[[ -f build-release/build.ninja ]] || meson setup build-release -Dbuildtype=release -Dtests=false >/dev/null
ninja -C build-release bench/bench-codec >/dev/null
exec build-release/bench/bench-codec "$@"
