"""`warren log read` meeting a trimmed offset: exit 3 with
`warren: gap: offset N is gone; the oldest retained is M`. Trimming needs retention with small
segments, which must never run on the shared test node (on 3.10.8 an aggressive setting
crash-looped the retention process until the node stopped), so this runs on the faults
suite's node (RMQ_FAULT_PORT, RMQ_FAULT_DIR), with the recipe PATTERNS.md found safe: a policy
matching only this test's stream, set before it is declared, max-length-bytes 12288 with
4096-byte segments, and about twenty separate appends of ~1 KB."""
import os
import re
import subprocess
import time
import unittest
import uuid

WARREN = os.environ.get("WARREN", "")
PORT = os.environ.get("RMQ_FAULT_PORT", "")
DIR = os.environ.get("RMQ_FAULT_DIR", "")


class LogGap(unittest.TestCase):
    def setUp(self):
        if not WARREN or not os.path.exists(WARREN):
            raise RuntimeError("WARREN must name the built warren binary")
        if not PORT or not DIR:
            raise RuntimeError("RMQ_FAULT_PORT and RMQ_FAULT_DIR must name the faults node (scripts/test.sh starts it)")
        self.ctl = os.path.join(DIR, "rabbitmqctl")
        self.url = f"amqp://guest:guest@127.0.0.1:{PORT}"
        self.prefix = "gap-" + uuid.uuid4().hex[:8]
        self.policy = self.prefix + "-trim"
        self.stream = f"{self.prefix}.log.trim"

    def warren(self, *args, stdin=None):
        return subprocess.run([WARREN, *args, "--prefix", self.prefix, "--url", self.url], input=stdin,
                              capture_output=True, timeout=60)

    def ctl_run(self, *args):
        return subprocess.run([self.ctl, "-q", *args], capture_output=True, text=True, timeout=60)

    def test_a_trimmed_offset_exits_3_and_names_the_oldest_retained(self):
        r = self.ctl_run("set_policy", self.policy, "^" + re.escape(self.stream) + "$",
                         '{"max-length-bytes": 12288, "stream-max-segment-size-bytes": 4096}', "--apply-to", "queues")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.addCleanup(lambda: self.ctl_run("clear_policy", self.policy))
        self.addCleanup(lambda: self.ctl_run("delete_queue", self.stream))
        for i in range(24):  # separate appends, so segments roll and retention runs
            r = self.warren("log", "append", "--log", "trim", stdin=(f"{i:04d}" + "x" * 1020 + "\n").encode())
            self.assertEqual(r.returncode, 0, r.stderr)
        deadline = time.monotonic() + 20
        while True:
            r = self.warren("log", "read", "--log", "trim", "--from", "0", "--count", "1")
            if r.returncode != 0 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        self.assertEqual(r.returncode, 3, (r.stdout, r.stderr))
        m = re.fullmatch(rb"warren: gap: offset 0 is gone; the oldest retained is (\d+)\n", r.stderr)
        self.assertIsNotNone(m, r.stderr)
        oldest = int(m.group(1))
        self.assertGreater(oldest, 0)
        self.assertEqual(r.stdout, b"")
        # From the oldest retained offset the read works.
        r = self.warren("log", "read", "--log", "trim", "--from", str(oldest), "--count", "1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.startswith(f"{oldest}\t".encode()), r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
