#!/usr/bin/env bash
# Line and branch coverage of engine/ by the suites that need no broker (unit, property,
# pika, engine), in a build of its own. Prints gcovr's summary; HTML in build-coverage/coverage/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-deps.sh
[[ -f build-coverage/build.ninja ]] || meson setup build-coverage -Db_coverage=true -Dbench=false -Dbuildtype=debug >/dev/null
ninja -C build-coverage tests/unit-tests tests/property-tests tests/pika-crosscheck tests/engine-tests >/dev/null
find build-coverage -name '*.gcda' -delete
for t in unit-tests property-tests pika-crosscheck engine-tests; do build-coverage/tests/$t --gtest_brief=1 >/dev/null; done
mkdir -p build-coverage/coverage
gcovr --root . --filter 'engine/' --exclude-throw-branches --html-details build-coverage/coverage/index.html \
  --print-summary build-coverage | tail -n 3
