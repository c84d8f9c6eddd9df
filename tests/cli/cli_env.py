"""What every warren CLI suite reads from its environment: the built warren binary and the
test broker (scripts/test.sh sets both), checked once so a suite missing either fails loudly
instead of passing on nothing, and the few helpers every suite needs."""
import os
import subprocess
import uuid

WARREN = os.environ.get("WARREN", "")
PORT = os.environ.get("RMQ_PORT", "")
CTL = os.environ.get("RMQ_CTL", "")
URL = f"amqp://guest:guest@127.0.0.1:{PORT}"


def require_warren_and_broker():
    """Call from setUpClass: raises (the suite fails) when the binary or the broker is missing."""
    if not WARREN or not os.path.exists(WARREN):
        raise RuntimeError("WARREN must name the built warren binary")
    if not PORT or not CTL:
        raise RuntimeError("RMQ_PORT and RMQ_CTL must name the test broker (scripts/test.sh sets them)")


def warren(*args, stdin=None, timeout=60, url=URL):
    """Runs `warren ARGS --url URL` (no --url when url is None); output captured as bytes."""
    cmd = [WARREN, *args]
    if url is not None:
        cmd += ["--url", url]
    return subprocess.run(cmd, input=stdin, capture_output=True, timeout=timeout)


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"
