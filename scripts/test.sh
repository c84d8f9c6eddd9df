#!/usr/bin/env bash
# Every test warren has, from a fresh Debian 12 machine: install what is missing; build with
# warnings as errors; run the codec, engine and client suites again under AddressSanitizer and
# UBSan, and the client suites and a cross-thread test under ThreadSanitizer;
# build the libFuzzer targets with clang-14 and run each for a bounded number of inputs; start
# a throwaway RabbitMQ on loopback for the suites that need a broker, and stop it even when a
# test fails. Ends with one line: "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
scripts/setup-deps.sh || exit 1

passed=0
failed=0
failures=()
step() {  # step NAME COMMAND...: run one suite, count it
  local name=$1
  shift
  echo "=== $name"
  if "$@"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    failures+=("$name")
  fi
}
# meson test over the given suites, counting each test case meson ran.
meson_suites() {
  local dir=$1
  shift
  local args=()
  for s in "$@"; do args+=(--suite "$s"); done
  rm -f "$dir/meson-logs/testlog.json"
  meson test -C "$dir" --print-errorlogs --num-processes 1 "${args[@]}"
  local rc=$?
  if [[ -f $dir/meson-logs/testlog.json ]]; then
    read -r ok bad < <(/usr/bin/python3 -c '
import json, sys
ok = bad = 0
for line in open(sys.argv[1]):
    r = json.loads(line)["result"]
    if r == "OK": ok += 1
    else: bad += 1
print(ok, bad)' "$dir/meson-logs/testlog.json")
    passed=$((passed + ok))
    failed=$((failed + bad))
    if ((bad > 0)); then failures+=("meson tests in $dir"); fi
  fi
  if ((rc != 0)) && [[ ! -f $dir/meson-logs/testlog.json ]]; then
    failed=$((failed + 1))
    failures+=("meson test in $dir did not run")
  fi
}

# 1. The default build, warnings as errors.
if [[ ! -f build-ci/build.ninja ]]; then
  meson setup build-ci -Dwerror=true >/dev/null || exit 1
fi
ninja -C build-ci || { echo "0 passed, 1 failed"; exit 1; }

# 2. The codec and engine suites under AddressSanitizer + UBSan, in their own build.
if [[ ! -f build-asan/build.ninja ]]; then
  meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dbench=false \
    -Dbuildtype=debug >/dev/null || exit 1
fi
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
ninja -C build-asan tests/unit-tests tests/property-tests tests/engine-tests tests/client-tests tests/tls-tests \
  tests/cli-values-tests tests/sim-tests tests/sim-regressions || { echo "0 passed, 1 failed"; exit 1; }
step "asan: unit" build-asan/tests/unit-tests --gtest_brief=1
step "asan: property" build-asan/tests/property-tests --gtest_brief=1
step "asan: engine" build-asan/tests/engine-tests --gtest_brief=1
step "asan: client" build-asan/tests/client-tests --gtest_brief=1
step "asan: tls" build-asan/tests/tls-tests --gtest_brief=1
step "asan: cli values" build-asan/tests/cli-values-tests --gtest_brief=1
step "asan: simulation" env RC_PARAMS=max_success=200 build-asan/tests/sim-tests --gtest_brief=1
step "asan: simulation regressions" build-asan/tests/sim-regressions --gtest_brief=1

# 2b. ThreadSanitizer: the client suites on the fake driver, and (once the broker is up) the
# cross-thread test, in a build of their own.
if [[ ! -f build-tsan/build.ninja ]]; then
  meson setup build-tsan -Db_sanitize=thread -Db_lundef=false -Dbench=false -Dbuildtype=debug >/dev/null || exit 1
fi
ninja -C build-tsan tests/client-tests tests/sim-tests tests/cross-thread-tests tests/driver-tests ||
  { echo "0 passed, 1 failed"; exit 1; }
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
step "tsan: client" build-tsan/tests/client-tests --gtest_brief=1
step "tsan: simulation" env RC_PARAMS=max_success=100 build-tsan/tests/sim-tests --gtest_brief=1
step "tsan: posting into an idle libuv loop" build-tsan/tests/driver-tests --gtest_filter='UvPost.*' --gtest_brief=1

# 3. libFuzzer targets, a bounded run each over the seed corpus.
if [[ ! -f build-fuzz/build.ninja ]]; then
  CXX=clang++-14 meson setup build-fuzz -Dfuzz=true -Dtests=false -Dbench=false \
    -Db_sanitize=address,undefined -Db_lundef=false >/dev/null || exit 1
fi
fuzz_targets=(frame_decoder field_table content_header method engine)
ninja -C build-fuzz "${fuzz_targets[@]/#/fuzz/fuzz-}" || { echo "0 passed, 1 failed"; exit 1; }
fuzz_one() {  # a bounded run; the fuzzer's chatter goes to a log shown only on failure
  local target=$1 work log
  work=$(mktemp -d)
  log=$(mktemp)
  if build-fuzz/fuzz/fuzz-$target -runs=${FUZZ_RUNS:-200000} -max_total_time=30 -max_len=4096 \
      -print_final_stats=1 "$work" "$root/fuzz/corpus/$target" >"$log" 2>&1; then
    grep -E "^(Done|stat::number_of_executed_units)" "$log"
    rm -rf "$work" "$log"
  else
    tail -n 60 "$log"
    rm -rf "$work" "$log"
    return 1
  fi
}
for target in "${fuzz_targets[@]}"; do
  step "fuzz: $target" fuzz_one "$target"
done

# 4. Everything in the default build, with a throwaway broker for the suites that need one.
broker_dir=$(mktemp -d /tmp/warren-test-broker.XXXXXX)
expired_dir=$(mktemp -d /tmp/warren-test-expired.XXXXXX)
fault_dir=$(mktemp -d /tmp/warren-test-faults.XXXXXX)
cluster_dir=$(mktemp -d /tmp/warren-test-cluster.XXXXXX)
trap 'scripts/broker-stop.sh "$broker_dir" --purge; scripts/broker-stop.sh "$expired_dir" --purge; scripts/broker-stop.sh "$fault_dir" --purge; scripts/cluster-stop.sh "$cluster_dir" --purge' EXIT
if env_text=$(scripts/broker-start.sh "$broker_dir" 0 auto); then
  eval "$env_text"
  export RMQ_PORT RMQ_CTL RMQ_TLS_PORT RMQ_DIR
  # EXTERNAL logs in as the client certificate's CN; that user must exist.
  "$RMQ_CTL" -q add_user tls-client "$(openssl rand -hex 16)" >/dev/null &&
    "$RMQ_CTL" -q set_permissions -p / tls-client ".*" ".*" ".*" >/dev/null
else
  echo "test.sh: the test broker did not start; the broker suites will fail" >&2
fi
# A second node whose TLS listener serves an expired certificate from its own test CA.
if expired_env=$(RMQ_TLS_EXPIRED=1 scripts/broker-start.sh "$expired_dir" 0 auto); then
  RMQ_EXPIRED_TLS_PORT=$(sed -n 's/^RMQ_TLS_PORT=//p' <<<"$expired_env")
  RMQ_EXPIRED_DIR=$expired_dir
  export RMQ_EXPIRED_TLS_PORT RMQ_EXPIRED_DIR
else
  echo "test.sh: the expired-certificate broker did not start; its test will fail" >&2
fi
export RMQ_SCRIPTS=$root/scripts  # the faults and cluster suites stop and start nodes
# A third node for the faults suite alone: it is stopped and started under a running Session.
if fault_env=$(scripts/broker-start.sh "$fault_dir" 0); then
  RMQ_FAULT_PORT=$(sed -n 's/^RMQ_PORT=//p' <<<"$fault_env")
  RMQ_FAULT_DIR=$fault_dir
  export RMQ_FAULT_PORT RMQ_FAULT_DIR
else
  echo "test.sh: the faults broker did not start; its test will fail" >&2
fi
# Three more nodes, clustered, for the cluster suite.
if cluster_env=$(scripts/cluster-start.sh "$cluster_dir"); then
  eval "$cluster_env"
  export RMQ_CLUSTER_PORTS RMQ_CLUSTER_DIRS
else
  echo "test.sh: the three-node cluster did not start; its test will fail" >&2
fi
meson_suites build-ci codec property pika engine client tls broker faults cluster
step "tsan: a publisher thread posting into the loop" env WARREN_CROSS_THREAD_COUNT=20000 \
  build-tsan/tests/cross-thread-tests --gtest_brief=1
# The cluster and the faults node are not needed past here: give their CPU back.
scripts/cluster-stop.sh "$cluster_dir" --purge
scripts/broker-stop.sh "$fault_dir" --purge
step "codec demo against the broker" build-ci/tools/warren-wire-demo --port "${RMQ_PORT:-1}" --count 2000
step "demo against the broker" build-ci/tools/warren-demo --url "amqp://127.0.0.1:${RMQ_PORT:-1}/%2f" --count 5000 --rpc 100

# Packaging: install into a scratch root and build an example against the installed
# headers and pkg-config files alone, then run it against the broker.
install_check() {
  local dest pcdir flags
  dest=$(mktemp -d)
  meson install -C build-ci --destdir "$dest" >/dev/null || return 1
  pcdir=$(dirname "$(find "$dest" -name warren-uv.pc | head -n 1)")
  flags=$(PKG_CONFIG_PATH=$pcdir PKG_CONFIG_SYSROOT_DIR=$dest pkg-config --static --cflags --libs warren-uv) || return 1
  g++ -std=c++20 examples/uv_quick_start.cpp $flags -o "$dest/example" &&
    "$dest/example" "amqp://127.0.0.1:${RMQ_PORT:-1}/%2f" | tail -n 1
  local rc=$?
  rm -rf "$dest"
  return $rc
}
step "install, then build an example against the installed pkg-config files" install_check

# The same through the CMake package: find_package(warren) with CMAKE_PREFIX_PATH at the
# scratch root's prefix (tests/cmake), then the example runs against the broker.
cmake_install_check() {
  local dest prefix
  dest=$(mktemp -d)
  meson install -C build-ci --destdir "$dest" >/dev/null || return 1
  prefix=$(meson introspect build-ci --buildoptions |
    /usr/bin/python3 -c 'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')
  cmake -S tests/cmake -B "$dest/cmake-build" -DCMAKE_PREFIX_PATH="$dest$prefix" >"$dest/cmake.log" &&
    cmake --build "$dest/cmake-build" >>"$dest/cmake.log" &&
    "$dest/cmake-build/uv-quick-start" "amqp://127.0.0.1:${RMQ_PORT:-1}/%2f" | tail -n 1
  local rc=$?
  ((rc == 0)) || tail -n 30 "$dest/cmake.log"
  rm -rf "$dest"
  return $rc
}
step "install, then build an example with CMake against the installed package" cmake_install_check

# The side-by-side benchmark script, one small round, so it keeps working (the figures in
# docs/benchmarks.md come from a full run: bench/compare.sh).
bench_smoke() {
  local out
  out=$(mktemp -d)
  bench/compare.sh --rounds 1 --count 2000 --scale-seconds 1 --out "$out" >"$out/log" 2>&1 &&
    grep -c '^| W[123]:' "$out/benchmarks.md" | grep -qx 15 && [[ -s $out/benchmarks.png && -s $out/benchmarks-scale.png ]] &&
    grep -q '^| warren-uv-batch |' "$out/benchmarks.md" && grep -q '^| asio | 1 × 100 |' "$out/benchmarks.md"
  local rc=$?
  ((rc == 0)) || tail -n 30 "$out/log"
  rm -rf "$out"
  return $rc
}
step "benchmark script (bench/compare.sh, one small round)" bench_smoke

echo
if ((failed > 0)); then printf 'failed: %s\n' "${failures[@]}"; fi
echo "$passed passed, $failed failed"
((failed == 0))
