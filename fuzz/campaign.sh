#!/usr/bin/env bash
# A longer fuzzing campaign: each target for SECONDS (default 600) on one core, growing a
# working corpus in fuzz/corpus-work/ (not committed) from the seed corpus in fuzz/corpus/.
# Crashes land in fuzz/corpus-work/crash-*. Usage: fuzz/campaign.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(frame_decoder method content_header field_table engine url)
if [[ ! -f build-fuzz/build.ninja ]]; then
  CXX=clang++-14 meson setup build-fuzz -Dfuzz=true -Dtests=false -Dbench=false \
    -Db_sanitize=address,undefined -Db_lundef=false
fi
# Only the targets it runs: the rest of the tree (the Asio coroutine example, say) need not
# build with clang-14 for a campaign to start.
ninja -C build-fuzz "${targets[@]/#/fuzz/fuzz-}"
for t in "${targets[@]}"; do
  mkdir -p "fuzz/corpus-work/$t"
  build-fuzz/fuzz/fuzz-$t -max_total_time="$seconds" -artifact_prefix="fuzz/corpus-work/" \
    "fuzz/corpus-work/$t" "fuzz/corpus/$t"
done
