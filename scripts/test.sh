#!/usr/bin/env bash
# Every test warren has, from a fresh Debian 12 machine: install what is missing; build with
# warnings as errors (GCC); run the codec, engine and client suites under AddressSanitizer and
# UBSan (only there; the simulations in both builds), and what runs on more than one thread
# under ThreadSanitizer (both built with clang-14, warnings as errors too); build the
# libFuzzer targets with clang-14 and run each for a bounded number of inputs; start throwaway
# RabbitMQ nodes on loopback for the suites that need a broker, and stop them even when a test
# fails. Ends with the time and CPU each step took and one line: "N passed, N failed".
#
# How it fits in 20 minutes on two cores (19-20 on December 2026's runs, about a minute apart
# from one run to the next: the figures at the end of a run say where the CPU went): the
# nodes boot while the default build compiles;
# then five lanes run at once — two for the broker suites, each on a node of its own (a suite
# that raises a memory alarm or counts connections sees only its own lane), one for the suites
# that stop nodes (faults, cluster), and two, at lower CPU priority, that build and run the
# sanitizer and fuzz programs. The broker lanes mostly wait on the network, so the compile
# lanes get the CPU they leave, and the cores stay busy (98%): the run's length is its CPU,
# about 70% of it compiling. Every program compiles as a unity build (-Dunity=on), the
# default build without debug information, the sanitizer builds with line tables only; in
# the default build the installed libraries compile one file at a time, as a user's does.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
run_started=$SECONDS
work=$(mktemp -d /tmp/warren-test.XXXXXX)
ledger=$work/ledger  # "pass NAME" / "fail NAME", one line per counted test
times=$work/times    # "SECONDS (cpu SECONDS) NAME", one line per step, in the order they ended
: >"$ledger"
: >"$times"

# The CPU a step's programs used: this shell's reaped children's user + system time, in
# clock ticks (/proc's cutime and cstime). Wall time alone cannot say which step the two
# cores went to while the lanes ran at once.
children_ticks() {  # sets $ticks; no command substitution, which would read its own subshell
  local f
  read -ra f </proc/$BASHPID/stat
  ticks=$((f[15] + f[16]))
}
ticks_per_second=$(getconf CLK_TCK)
machine_ticks() {  # sets $busy and $total: the machine's CPU ticks since boot (/proc/stat)
  local cpu user nice system idle iowait rest
  read -r cpu user nice system idle iowait rest </proc/stat
  busy=$((user + nice + system))
  total=$((busy + idle + iowait))
}
machine_ticks
run_busy=$busy
run_total=$total
timed() {  # timed NAME COMMAND...: run it, record how long it took and the CPU it used
  local name=$1 began=$SECONDS rc ticks before
  children_ticks
  before=$ticks
  shift
  "$@"
  rc=$?
  children_ticks
  echo "$((SECONDS - began)) (cpu $(((ticks - before) / ticks_per_second))) $name" >>"$times"
  return $rc
}
step() {  # step NAME COMMAND...: run one test program, count it
  local name=$1 began=$SECONDS ticks before
  children_ticks
  before=$ticks
  shift
  echo "=== $name"
  if "$@"; then echo "pass $name" >>"$ledger"; else echo "fail $name" >>"$ledger"; fi
  children_ticks
  echo "$((SECONDS - began)) (cpu $(((ticks - before) / ticks_per_second))) $name" >>"$times"
}
# meson_tests DIR LOGBASE NAME...: the named tests of DIR's meson test list, one at a time,
# each test meson ran counted. Lanes share the build directory, hence --logbase.
meson_tests() {
  local dir=$1 logbase=$2 began=$SECONDS
  shift 2
  local log=$dir/meson-logs/$logbase.json
  rm -f "$log"
  meson test -C "$dir" --no-rebuild --print-errorlogs --num-processes 1 --logbase "$logbase" "$@"
  local rc=$?
  if [[ -f $log ]]; then
    /usr/bin/python3 - "$log" "$ledger" "$times" <<'PY'
import json, sys
log, ledger, times = sys.argv[1:]
with open(ledger, "a") as l, open(times, "a") as t:
    for line in open(log):
        r = json.loads(line)
        l.write(("pass " if r["result"] == "OK" else "fail ") + "meson: " + r["name"] + "\n")
        t.write("%d   meson: %s\n" % (round(r["duration"]), r["name"]))
PY
  else
    echo "fail meson test ($logbase) did not run (exit $rc)" >>"$ledger"
  fi
  echo "$((SECONDS - began)) lane total: meson $logbase" >>"$times"
}
fail_now() {  # a build failed: nothing further can run
  echo "fail $1" >>"$ledger"
  echo "$1 failed" >&2
  echo "0 passed, $(grep -c '^fail' "$ledger") failed"
  exit 1
}

timed "install dependencies" scripts/setup-deps.sh || fail_now "installing dependencies"
# node's amqplib and its OpenTelemetry instrumentation, pinned, for the cli-interop-otel test
# (npm's registry); a failure here fails that test too, loudly.
timed "npm packages for the trace interop test" tests/interop/otel/install.sh ||
  echo "fail installing tests/interop/otel's npm packages (cli-interop-otel fails too)" >>"$ledger"

# ---- The nodes, booting in the background while the default build compiles. Each gets its
# own ports (a TLS node takes PORT and PORT+1), so no two starts race for one.
broker_a=$work/broker-a      # broker lane A: TLS listener, the EXTERNAL user
broker_b=$work/broker-b      # broker lane B: the same set-up
expired_dir=$work/expired    # a TLS listener serving an expired certificate
fault_dir=$work/faults       # stopped and started by the faults lane
cluster_dir=$work/cluster    # three clustered nodes, for the cluster suite
lane_pids=()
kill_tree() {  # a lane and everything it started
  local child
  for child in $(pgrep -P "$1"); do kill_tree "$child"; done
  kill "$1" 2>/dev/null
}
cleanup() {
  for pid in "${lane_pids[@]}"; do kill_tree "$pid"; done
  wait 2>/dev/null
  for d in "$broker_a" "$broker_b" "$expired_dir" "$fault_dir"; do scripts/broker-stop.sh "$d" --purge; done
  scripts/cluster-stop.sh "$cluster_dir" --purge
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
base=$((25672 + RANDOM % 1400))
# Seven Erlang VMs share two cores with the compilers: schedulers that spin after each burst of
# work (Erlang's default busy wait) burn what the builds need. Measured on one node under
# 50,000 confirmed publishes and 50,000 deliveries: 4.55 s of the node's CPU with the default,
# 2.91 s without busy waiting, and the run ended sooner. Every node this command starts (the
# suites' restarts too, through the environment) runs without it. (One scheduler a node, +S 1:1,
# did the same work in about 40% less of the node's CPU, but the nodes' whole share of a run is
# about 140 of its 2,500 CPU seconds: not worth answers that are slower under load.)
export WARREN_BROKER_ERL_ARGS='+sbwt none +sbwtdcpu none +sbwtdio none'
# Node B also takes OAuth 2 tokens (rabbitmq_auth_backend_oauth2 before the internal backend):
# the oauth2 suite, in B's lane, signs them with this key. Not exported: a node a suite
# restarts (the faults, the cluster) is started without it.
oauth2_key=$(openssl rand -hex 24)
start_node() {  # start_node DIR PORT TLS: boot it, write DIR.env; the EXTERNAL user on TLS nodes
  scripts/broker-start.sh "$1" "$2" "$3" >"$1.env" || return 1
  if [[ $3 == auto && ${RMQ_TLS_EXPIRED:-0} != 1 ]]; then
    local ctl
    ctl=$(sed -n 's/^RMQ_CTL=//p' "$1.env")
    # EXTERNAL logs in as the client certificate's CN; that user must exist.
    "$ctl" -q add_user tls-client "$(openssl rand -hex 16)" >/dev/null &&
      "$ctl" -q set_permissions -p / tls-client ".*" ".*" ".*" >/dev/null
  fi
}
start_nodes() {
  local pids=() rc=0
  start_node "$broker_a" "$base" auto & pids+=($!)
  RMQ_OAUTH2_KEY=$oauth2_key start_node "$broker_b" $((base + 3)) auto & pids+=($!)
  RMQ_TLS_EXPIRED=1 start_node "$expired_dir" $((base + 6)) auto & pids+=($!)
  start_node "$fault_dir" $((base + 9)) 0 & pids+=($!)
  scripts/cluster-start.sh "$cluster_dir" $((base + 12)) >"$cluster_dir.env" & pids+=($!)
  for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
  return $rc
}
timed "start the RabbitMQ nodes (beside the build)" start_nodes >"$work/nodes.log" 2>&1 &
nodes_pid=$!

# ---- The default build, warnings as errors.
if [[ ! -f build-ci/build.ninja ]]; then
  meson setup build-ci -Dwerror=true -Dunity=on -Dunity_size=64 -Ddebug=false >/dev/null ||
    fail_now "configuring build-ci"
fi
# The sanitizer and fuzz builds are configured meanwhile, one after another: two `meson setup`s
# at once can fail in meson's CMake probe.
# They compile with clang-14, the fuzz build's compiler: at -O0 with the sanitizers it takes
# about two thirds of GCC's CPU (ASan + UBSan programs: 309 s against 475 s; TSan: 75 against
# 100). Warnings are errors there too: some suites compile only there (asan_only_suites).
# Unity blocks of up to 64 files: one block a target. The ASan build's targets took 373 CPU
# seconds in blocks of 8 and 330 in blocks of 64 (an idle machine): each block parses the
# same headers again. The run keeps both cores busy, so fewer, longer compiles cost no wall time.
sanitizer_setup() {  # sanitizer_setup DIR ARGS...: a unity debug build, line tables only
  [[ -f $1/build.ninja ]] && return 0
  local dir=$1
  shift
  CXX=clang++-14 meson setup "$dir" -Db_lundef=false -Dbench=false -Dbuildtype=debug -Dunity=on -Dunity_size=64 \
    "-Dcpp_args=-g1 -Werror" "$@"
}
configure_sanitizer_builds() {
  sanitizer_setup build-asan -Db_sanitize=address,undefined &&
    sanitizer_setup build-tsan -Db_sanitize=thread &&
    { [[ -f build-fuzz/build.ninja ]] ||
      CXX=clang++-14 meson setup build-fuzz -Dfuzz=true -Dtests=false -Dbench=false \
        -Db_sanitize=address,undefined -Db_lundef=false -Dunity=on -Dunity_size=64 -Dcpp_args=-g1; }
}
timed "configure: sanitizer and fuzz builds (beside the build)" configure_sanitizer_builds >"$work/configure.log" 2>&1 &
configure_pid=$!
# The benchmark's peer clients (amqp091-go and the Java client from Debian, amqplib from npm),
# installed and built beside the build for the benchmark smoke round, which waits for their
# exit status in peers.rc.
bench_peers() {
  scripts/setup-deps.sh --bench-peers && bench/peers/build.sh build-ci/peers
  echo $? >"$work/peers.rc"
}
timed "benchmark peers: install and build (beside the build)" bench_peers >"$work/peers.log" 2>&1 &
# The suites whose programs GCC's build leaves to the sanitizer lane (meson's test name, then
# the program): scripted, deterministic suites, which run there under ASan and UBSan, built
# by clang with warnings as errors. Compiling them with GCC as well cost 160-200 of the run's
# 2,500-2,600 CPU seconds on two cores for runs that check what those runs check: the broker
# suites, the tools and the install checks still compile and run every API form with GCC. The simulations
# and the property tests compile in both, as their GCC runs draw far more cases (20,000,
# 5,000 and 1,000) than the sanitizer's.
asan_only_suites=(unit:tests/unit-tests engine:tests/engine-tests client:tests/client-tests
  client-threads:tests/client-thread-tests tls:tests/tls-tests cli-values:tests/cli-values-tests
  cli-metrics-request:tests/cli-metrics-request-tests messaging:tests/messaging-tests
  kept-paths:tests/kept-path-tests)
asan_also_programs=(tests/property-tests tests/sim-tests tests/sim-regressions tests/layer-sim-tests)
asan_only_programs=("${asan_only_suites[@]#*:}")
asan_only_tests=("${asan_only_suites[@]%%:*}")
# Every other target of the default build, by its output path (what ninja names it by).
mapfile -t default_targets < <(meson introspect build-ci --targets | /usr/bin/python3 -c '
import json, os, sys
skip = set(sys.argv[1:])
for t in json.load(sys.stdin):
    for f in t["filename"]:
        out = os.path.relpath(f, "build-ci")
        if t["build_by_default"] and out not in skip: print(out)' "${asan_only_programs[@]}")
timed "build: default (build-ci)" ninja -C build-ci "${default_targets[@]}" || fail_now "the default build"
wait "$configure_pid" || { tail -n 40 "$work/configure.log"; echo "test.sh: configuring a sanitizer build failed" >&2; }
wait "$nodes_pid"
nodes_rc=$?
cat "$work/nodes.log"
((nodes_rc == 0)) || echo "test.sh: a RabbitMQ node did not start; the suites that need it will fail" >&2

node_env() {  # node_env DIR KEY: a value from the node's broker.env
  sed -n "s/^$2=//p" "$1.env" 2>/dev/null
}
export RMQ_SCRIPTS=$root/scripts  # the faults and cluster suites stop and start nodes
RMQ_EXPIRED_TLS_PORT=$(node_env "$expired_dir" RMQ_TLS_PORT)
RMQ_EXPIRED_DIR=$expired_dir
export RMQ_EXPIRED_TLS_PORT RMQ_EXPIRED_DIR
use_node() {  # use_node DIR: point RMQ_PORT, RMQ_CTL, RMQ_TLS_PORT and RMQ_DIR at a node
  RMQ_PORT=$(node_env "$1" RMQ_PORT)
  RMQ_CTL=$(node_env "$1" RMQ_CTL)
  RMQ_TLS_PORT=$(node_env "$1" RMQ_TLS_PORT)
  RMQ_DIR=$1
  export RMQ_PORT RMQ_CTL RMQ_TLS_PORT RMQ_DIR
}

# ---- The lanes. Broker lane A takes the suites named here, the faults lane those below it,
# the sanitizer lane those of asan_only_suites, broker lane B every other test meson knows,
# so a new suite always runs somewhere.
lane_a_tests=(client-suite client-uv tls-broker engine-broker pipeline-broker cli-pipe)
lane_f_tests=(faults cluster cli-log-gap cli-cluster-faults)
mapfile -t all_tests < <(meson introspect build-ci --tests | /usr/bin/python3 -c '
import json, sys
for t in json.load(sys.stdin): print(t["name"])')
lane_b_tests=()
for t in "${all_tests[@]}"; do
  [[ " ${lane_a_tests[*]} ${lane_f_tests[*]} ${asan_only_tests[*]} " == *" $t "* ]] || lane_b_tests+=("$t")
done


# Packaging: install into a scratch root and build examples against the installed headers
# and pkg-config files alone, as a user's warnings-as-errors build would, then run them
# against the broker: the libuv quick start with GCC; every verb with inline options
# (tests/install/asio_inline_forms.cpp) and every layer with its options inline as the docs
# write them (tests/install/layer_inline_forms.cpp) with both of Debian 12's compilers, and
# the Asio quick start with clang (the CMake check builds it with GCC), at -O0 as a first
# build is (GCC 12 crashed on inline options that owned strings and warned on omitted fields
# without a default; clang needs what Asio cannot detect).
install_check() {
  local dest pcdir flags asio_flags url="amqp://127.0.0.1:${RMQ_PORT:-1}/%2f"
  dest=$(mktemp -d)
  meson install --no-rebuild -C build-ci --destdir "$dest" >/dev/null || return 1
  pcdir=$(dirname "$(find "$dest" -name warren-uv.pc | head -n 1)")
  flags=$(PKG_CONFIG_PATH=$pcdir PKG_CONFIG_SYSROOT_DIR=$dest pkg-config --static --cflags --libs warren-uv) || return 1
  asio_flags=$(PKG_CONFIG_PATH=$pcdir PKG_CONFIG_SYSROOT_DIR=$dest pkg-config --static --cflags --libs warren-asio) || return 1
  layer_flags=$(PKG_CONFIG_PATH=$pcdir PKG_CONFIG_SYSROOT_DIR=$dest \
    pkg-config --static --cflags --libs warren-asio warren-messaging warren-pipeline) || return 1
  g++ -std=c++20 -Wall -Wextra -Werror examples/uv_quick_start.cpp $flags -o "$dest/example" &&
    "$dest/example" "$url" | tail -n 1 || { rm -rf "$dest"; return 1; }
  # GCC's build of the quick start is the CMake check's (below); every verb inline with both.
  local cxx program cxx_program program_flags
  for cxx_program in "g++ -fcoroutines:tests/install/asio_inline_forms.cpp" "clang++-14:examples/asio_quick_start.cpp" \
      "clang++-14:tests/install/asio_inline_forms.cpp" "g++ -fcoroutines:tests/install/layer_inline_forms.cpp" \
      "clang++-14:tests/install/layer_inline_forms.cpp"; do
    cxx=${cxx_program%%:*}
    program=${cxx_program#*:}
    program_flags=$asio_flags
    [[ $program == *layer_* ]] && program_flags=$layer_flags
    echo "$cxx $program"
    $cxx -std=c++20 -Wall -Wextra -Werror "$program" $program_flags -o "$dest/asio-program" &&
      "$dest/asio-program" "$url" | tail -n 1 || { rm -rf "$dest"; return 1; }
  done
  rm -rf "$dest"
}

# The same through the CMake package: find_package(warren) with CMAKE_PREFIX_PATH at the
# scratch root's prefix (tests/cmake), then the example runs against the broker.
cmake_install_check() {
  local dest prefix
  dest=$(mktemp -d)
  meson install --no-rebuild -C build-ci --destdir "$dest" >/dev/null || return 1
  prefix=$(meson introspect build-ci --buildoptions |
    /usr/bin/python3 -c 'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')
  cmake -S tests/cmake -B "$dest/cmake-build" -DCMAKE_PREFIX_PATH="$dest$prefix" >"$dest/cmake.log" &&
    cmake --build "$dest/cmake-build" >>"$dest/cmake.log" &&
    "$dest/cmake-build/uv-quick-start" "amqp://127.0.0.1:${RMQ_PORT:-1}/%2f" | tail -n 1 &&
    "$dest/cmake-build/asio-quick-start" "amqp://127.0.0.1:${RMQ_PORT:-1}/%2f" | tail -n 1
  local rc=$?
  ((rc == 0)) || tail -n 30 "$dest/cmake.log"
  rm -rf "$dest"
  return $rc
}

# The side-by-side benchmark script, one small round on the default build's programs, so it
# keeps working (the figures in docs/benchmarks.md come from a full run: bench/compare.sh).
bench_smoke() {
  local out waited=0
  while [[ ! -f $work/peers.rc ]] && ((waited++ < 600)); do sleep 1; done
  if [[ $(cat "$work/peers.rc" 2>/dev/null) != 0 ]]; then
    cat "$work/peers.log"
    echo "bench_smoke: the peer clients were not installed and built (above)" >&2
    return 1
  fi
  out=$(mktemp -d)
  # --baseline the same build, one pair: the paired comparison's runs and table keep working.
  bench/compare.sh --build build-ci --rounds 1 --count 2000 --scale-seconds 1 --sizes 64 --baseline build-ci --pairs 1 \
    --scale-shapes "1x1 10x1 1x10" --scale-tls-shapes "1x1 2x1" --scale-idle-seconds 1 --out "$out" >"$out/log" 2>&1 &&
    grep -c '^| W[123]:' "$out/benchmarks.md" | grep -qx 34 && [[ -s $out/benchmarks.png && -s $out/benchmarks-scale.png ]] &&
    grep -q '^| warren-uv-batch |' "$out/benchmarks.md" && grep -q '^| W3 | warren-uv-metrics |' "$out/benchmarks.md" && grep -q '^| asio | 1 × 10 |' "$out/benchmarks.md" &&
    grep -q '^| uv+tls | 2 × 1 |' "$out/benchmarks.md" &&
    grep -q '^| 64 | warren-asio (off) |' "$out/benchmarks.md" && grep -q '^| 64 | warren-uv (alone) |' "$out/benchmarks.md" && grep -q '^| basic.get | warren-uv |' "$out/benchmarks.md" &&
    grep -q '^| W3 | 1 | ' "$out/benchmarks.md"
  local rc=$?
  ((rc == 0)) || tail -n 30 "$out/log"
  rm -rf "$out"
  return $rc
}

# What runs on broker A after its suites, in its lane (nothing here needs another lane).
after_broker_a_suites() {
  step "codec demo against the broker" build-ci/tools/warren-wire-demo --port "${RMQ_PORT:-1}" --count 2000
  step "demo against the broker" build-ci/tools/warren-demo --url "amqp://127.0.0.1:${RMQ_PORT:-1}/%2f" --count 5000 --rpc 100
  step "install, then build an example against the installed pkg-config files" install_check
  step "install, then build an example with CMake against the installed package" cmake_install_check
  step "benchmark script (bench/compare.sh, one small round)" bench_smoke
}

lane_broker_a() {
  use_node "$broker_a"
  meson_tests build-ci lane-a "${lane_a_tests[@]}"
  # The demos, the packaging checks and the benchmark smoke: here rather than after the lanes,
  # so they run beside the sanitizer lanes instead of after them.
  after_broker_a_suites
}
lane_broker_b() {
  use_node "$broker_b"
  export RMQ_OAUTH2_KEY=$oauth2_key
  meson_tests build-ci lane-b "${lane_b_tests[@]}"
}
lane_faults() {
  # The faults suite's proxy tests use RMQ_PORT: this lane's own node, so nothing else sees
  # its cut connections; its restart test stops and starts the same node.
  use_node "$fault_dir"
  RMQ_FAULT_PORT=$RMQ_PORT
  RMQ_FAULT_DIR=$fault_dir
  export RMQ_FAULT_PORT RMQ_FAULT_DIR
  eval "$(cat "$cluster_dir.env" 2>/dev/null)"
  export RMQ_CLUSTER_PORTS RMQ_CLUSTER_DIRS
  meson_tests build-ci lane-faults "${lane_f_tests[@]}"
  # Their nodes are not needed past here: give their CPU back.
  scripts/cluster-stop.sh "$cluster_dir" --purge
  scripts/broker-stop.sh "$fault_dir" --purge
}

# The sanitizer and fuzz lanes, at lower CPU priority than the broker lanes.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
fuzz_targets=(frame_decoder field_table content_header method engine trace_context untrusted_output url)
# Each target for 200,000 inputs or 10 s, whichever ends first: a regression on the seed
# corpus's paths shows in seconds; fuzz/campaign.sh is the long search.
fuzz_one() {  # a bounded run; the fuzzer's chatter goes to a log shown only on failure
  local target=$1 corpus log
  corpus=$(mktemp -d)
  log=$(mktemp)
  if build-fuzz/fuzz/fuzz-$target -runs=${FUZZ_RUNS:-200000} -max_total_time=10 -max_len=4096 \
      -print_final_stats=1 "$corpus" "$root/fuzz/corpus/$target" >"$log" 2>&1; then
    grep -E "^(Done|stat::number_of_executed_units)" "$log"
    rm -rf "$corpus" "$log"
  else
    tail -n 60 "$log"
    rm -rf "$corpus" "$log"
    return 1
  fi
}
lane_asan() {
  # AddressSanitizer + UBSan: the codec, engine and client suites.
  if [[ -f build-asan/build.ninja ]] &&
      timed "build: asan" ninja -j2 -C build-asan "${asan_only_programs[@]}" "${asan_also_programs[@]}"; then
    # The engine suite (its every-split scripts: ~30 s under ASan) beside the rest: this lane
    # ends the run, and one program at a time would leave a core idle.
    step "asan: engine" build-asan/tests/engine-tests --gtest_brief=1 &
    local engine_suite=$!
    step "asan: unit" build-asan/tests/unit-tests --gtest_brief=1
    step "asan: property" build-asan/tests/property-tests --gtest_brief=1
    step "asan: client" build-asan/tests/client-tests --gtest_brief=1
    step "asan: client, another thread" build-asan/tests/client-thread-tests --gtest_brief=1
    step "asan: tls" build-asan/tests/tls-tests --gtest_brief=1
    step "asan: cli values" build-asan/tests/cli-values-tests --gtest_brief=1
    step "asan: messaging (model broker)" build-asan/tests/messaging-tests --gtest_brief=1
    step "asan: the metrics endpoint's request judge" build-asan/tests/cli-metrics-request-tests --gtest_brief=1
    step "asan: simulation" env RC_PARAMS="max_success=200 max_size=300" build-asan/tests/sim-tests --gtest_brief=1
    step "asan: simulation regressions" build-asan/tests/sim-regressions --gtest_brief=1
    step "asan: layer simulation" env RC_PARAMS="max_success=200 max_size=200" build-asan/tests/layer-sim-tests --gtest_brief=1
    # Every deferred token launched after its storage is gone, against broker lane B's node (a
    # few seconds): a view that escaped is a heap-use-after-free here.
    (use_node "$broker_b" && step "asan: kept paths (deferred tokens, broker B)" build-asan/tests/kept-path-tests --gtest_brief=1)
    wait "$engine_suite"
  else
    echo "fail build: asan" >>"$ledger"
  fi
}
lane_tsan_fuzz() {
  # ThreadSanitizer: what runs on more than one thread — a message acked from another thread
  # (fake driver), posting into an idle libuv loop; the cross-thread test runs once the broker
  # lanes are done. Not the single-threaded suites (the client suites on the fake driver, the
  # simulation): TSan has no race to see there, and their build was the lane's largest item.
  if [[ -f build-tsan/build.ninja ]] &&
      timed "build: tsan" ninja -j2 -C build-tsan tests/client-thread-tests tests/cross-thread-tests tests/uv-post-tests; then
    step "tsan: a message acked from another thread" build-tsan/tests/client-thread-tests --gtest_brief=1
    step "tsan: posting into an idle libuv loop" build-tsan/tests/uv-post-tests --gtest_brief=1
  else
    echo "fail build: tsan" >>"$ledger"
  fi
  # libFuzzer targets, a bounded run each over the seed corpus.
  if [[ -f build-fuzz/build.ninja ]] &&
      timed "build: fuzz" ninja -j2 -C build-fuzz "${fuzz_targets[@]/#/fuzz/fuzz-}"; then
    for target in "${fuzz_targets[@]}"; do step "fuzz: $target" fuzz_one "$target"; done
  else
    echo "fail build: fuzz" >>"$ledger"
  fi
}

declare -A lane_names
start_lane() {  # start_lane NAME FUNCTION [nice]: in the background, its output to a log
  local name=$1 fn=$2 priority=${3:-}
  (
    [[ $priority == nice ]] && renice -n 10 -p "$BASHPID" >/dev/null
    timed "lane total: $name" "$fn" >"$work/lane-$name.log" 2>&1
  ) &
  lane_pids+=($!)
  lane_names[$!]=$name
}
start_lane "broker A" lane_broker_a
start_lane "broker B" lane_broker_b
start_lane "faults and cluster" lane_faults
start_lane "asan" lane_asan nice
start_lane "tsan and fuzzers" lane_tsan_fuzz nice
# Each lane's output in one piece, as it ends. Other background jobs (the benchmark peers'
# install) may end meanwhile: they are not lanes, and are passed over.
lanes_left=${#lane_pids[@]}
while ((lanes_left > 0)); do
  ended=
  wait -n -p ended
  (($? == 127)) && [[ -z $ended ]] && break  # no child left to wait for
  [[ -n $ended && -n ${lane_names[$ended]+set} ]] || continue
  lanes_left=$((lanes_left - 1))
  echo
  echo "##### lane ${lane_names[$ended]}"
  cat "$work/lane-${lane_names[$ended]}.log"
done
lane_pids=()

# ---- After the lanes, on broker A.
use_node "$broker_a"
step "tsan: a publisher thread posting into the loop" env WARREN_CROSS_THREAD_COUNT=20000 \
  build-tsan/tests/cross-thread-tests --gtest_brief=1

echo
echo "Time taken (wall seconds, then the CPU seconds its programs used; the lanes ran at the same time):"
sed 's/^/  /' "$times"
echo "  $((SECONDS - run_started)) the whole run"
machine_ticks
echo "  the machine's cores were busy $((100 * (busy - run_busy) / (total - run_total)))% of the run ($(((busy - run_busy) / ticks_per_second)) CPU seconds, the nodes' included)"
passed=$(grep -c '^pass' "$ledger")
failed=$(grep -c '^fail' "$ledger")
if ((failed > 0)); then echo "failed:"; sed -n 's/^fail /  /p' "$ledger"; fi
echo "$passed passed, $failed failed"
((failed == 0))
