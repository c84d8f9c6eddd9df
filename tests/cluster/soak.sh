#!/usr/bin/env bash
# The cluster soak of issue 39, not in the test command: a three-node cluster of its own, the
# work queue (a putter and two workers, one per driver) and the log (an appender) under steady
# load for MINUTES while node hangs and kills are drawn at random from SEED; the invariants are
# checked at the end and the figures printed as Markdown (tests/cluster/soak.py says which).
#   tests/cluster/soak.sh MINUTES [SEED]     (WARREN: the binary; default build/tools/warren)
# Exit 0 when every invariant held.
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ $# -ge 1 ]] || { echo "usage: tests/cluster/soak.sh MINUTES [SEED]" >&2; exit 2; }
exec /usr/bin/python3 tests/cluster/soak.py "$@"
