#!/usr/bin/env bash
# Builds the benchmarks (codec, then engine) in a release build of their own and runs them. Extra arguments go to
# Google Benchmark (e.g. --benchmark_filter=Decode --benchmark_repetitions=5).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-deps.sh
[[ -f build-release/build.ninja ]] || meson setup build-release -Dbuildtype=release -Dtests=false >/dev/null
ninja -C build-release bench/bench-codec bench/bench-engine >/dev/null
build-release/bench/bench-codec "$@"
build-release/bench/bench-engine "$@"
