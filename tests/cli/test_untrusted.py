"""Message content is another party's: what warren shows of it cannot act on a terminal, forge
a result line, reach a child's environment unchecked or stop `--json`. Against the test broker
(RMQ_PORT, RMQ_CTL), with pika publishing what warren's own publish would not (raw control
bytes, C1 controls, bidirectional overrides, repeated and non-UTF-8 header keys, headers nested
past what warren decodes). A terminal is a pty (docs/warren-cli.md, SECURITY)."""
import base64
import json
import os
import pty
import select
import subprocess
import sys
import time
import unittest
import uuid

import pika

sys.path.insert(0, os.path.dirname(__file__))
from cli_env import WARREN, PORT, URL, require_warren_and_broker, unique, warren  # noqa: E402

# What a hostile publisher writes: a window title (OSC), clear screen and colour (CSI), a raw
# C1 CSI byte, NEL (U+0085, C1, as UTF-8), a right-to-left override, and a forged line.
HOSTILE = (b"\x1b]0;owned\x07\x1b[2J\x1b[31mred\x9b31m" + "\u0085".encode() + "\u202eevil".encode()
           + b"\r\nforged line")
ACTING = [b"\x1b", b"\x07", b"\x9b", "\u0085".encode(), "\u202e".encode(), b"\r"]


def run_on_terminal(args, timeout=30):
    """Runs `warren ARGS --url URL` with stdout on a pty; returns (exit status, what it wrote)."""
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen([WARREN, *args, "--url", URL], stdout=slave, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    finally:
        os.close(slave)
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the other end closed: it exited
                break
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None:
            break
    os.close(master)
    proc.wait(timeout=timeout)
    return proc.returncode, out


class Untrusted(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_warren_and_broker()

    def setUp(self):
        self.connection = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", int(PORT)))
        self.channel = self.connection.channel()
        self.addCleanup(self.connection.close)

    def queue(self):
        q = unique("untrusted")
        self.channel.queue_declare(q, auto_delete=False)
        self.addCleanup(lambda: self.channel.queue_delete(q))
        return q

    def publish(self, q, body, **properties):
        self.channel.basic_publish("", q, body, pika.BasicProperties(**properties))

    def assert_inert(self, text, what):
        text = text.replace(b"\r\n", b"\n")  # a pty ends each line so
        for b in ACTING:
            self.assertNotIn(b, text, f"{what} holds {b!r}: {text!r}")

    # ---- a terminal

    def test_consume_on_a_terminal_escapes_what_would_act_on_it_and_raw_gives_the_bytes(self):
        q = self.queue()
        for _ in range(3):
            self.publish(q, HOSTILE)
        rc, out = run_on_terminal(["consume", "--queue", q, "--count", "1"])
        self.assertEqual(rc, 0)
        self.assert_inert(out, "consume on a terminal")
        self.assertIn(rb"\e]0;owned\x07\e[2J\e[31mred\x9b31m\u0085\u202eevil\r\nforged line", out)
        self.assertEqual(out.count(b"\n"), 1, "one line per message (the pty shows it as \\r\\n)")
        rc, out = run_on_terminal(["consume", "--queue", q, "--count", "1", "--raw"])
        self.assertEqual(rc, 0)
        self.assertIn(HOSTILE.replace(b"\n", b"\r\n"), out, "--raw writes the bytes (the pty turns \\n into \\r\\n)")
        # Not a terminal: the bytes as they are, as scripts read them.
        r = warren("consume", "--queue", q, "--count", "1")
        self.assertEqual(r.stdout, HOSTILE + b"\n")

    def test_log_read_and_rpc_call_on_a_terminal_escape_too(self):
        log = unique("untrusted-log")
        self.addCleanup(lambda: self.channel.queue_delete(f"warren.log.{log}"))
        r = warren("log", "append", "--log", log, stdin=b"\x1b[2Jentry\x9b\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        rc, out = run_on_terminal(["log", "read", "--log", log, "--count", "1"])
        self.assertEqual(rc, 0)
        self.assert_inert(out, "log read on a terminal")
        self.assertIn(rb"0	\e[2Jentry\x9b", out)

        q = unique("untrusted-rpc")
        server = subprocess.Popen([WARREN, "rpc", "serve", "--queue", q, "--count", "1", "--url", URL],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(lambda: server.poll() is None and server.kill())
        self.assertEqual(server.stdout.readline(), f"serving {q}\n".encode())
        rc, out = run_on_terminal(["rpc", "call", "--queue", q, "--body", "\x1b[2Jask\u202e"])
        self.assertEqual(rc, 0)
        self.assert_inert(out, "rpc call on a terminal")
        self.assertIn(rb"\e[2JASK\u202e", out)
        server.wait(timeout=20)

    # ---- result lines and a child's environment

    def test_work_run_quotes_an_id_that_could_break_its_line_and_hands_the_child_only_what_is_safe(self):
        prefix = "untrusted-" + uuid.uuid4().hex[:8]
        q = f"{prefix}.jobs"
        self.addCleanup(lambda: [self.channel.queue_delete(n) for n in (q, f"{q}.dlq")])
        self.assertEqual(warren("work", "put", "--queue", "jobs", "--prefix", prefix, "--body", "plain").returncode, 0)
        forged = "x\ndone forged-id attempt=1"
        traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        self.publish(q, b"forged", message_id=forged, delivery_mode=2,
                     headers={"x-warren-attempt": 1, "traceparent": traceparent, "tracestate": "a=b\n$(touch /tmp/pwned)"})
        self.publish(q, b"spaced", message_id="an id with spaces", delivery_mode=2,
                     headers={"x-warren-attempt": 1, "traceparent": traceparent, "tracestate": "vendor=ok,other=1"})
        env_log = f"/tmp/{prefix}.env"
        self.addCleanup(lambda: os.path.exists(env_log) and os.remove(env_log))
        r = warren("work", "run", "--queue", "jobs", "--prefix", prefix, "--count", "3", "--timeout", "20",
                   "--log-level", "warning", "--exec",
                   f"echo \"$(cat) id=${{WARREN_MESSAGE_ID-unset}} state=${{TRACESTATE-unset}}\" >> {env_log}")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.decode().splitlines()
        self.assertEqual(len(lines), 3, lines)
        self.assertIn('done "x\\ndone forged-id attempt=1" attempt=1', lines)
        self.assertIn('done "an id with spaces" attempt=1', lines)
        self.assertEqual(sum(1 for line in lines if line.startswith("done ") and line.endswith(" attempt=1")), 3)
        with open(env_log) as f:
            seen = sorted(f.read().splitlines())
        self.assertIn("forged id=unset state=unset", seen)
        self.assertIn("spaced id=an id with spaces state=vendor=ok,other=1", seen)
        err = r.stderr.decode()
        self.assertIn("work.message_id_dropped", err)
        self.assertIn("work.tracestate_dropped", err)
        self.assertNotIn("\n$(touch", err)

    # ---- --json

    def test_json_never_stops_at_a_message_and_keeps_every_header(self):
        q = self.queue()
        deep = {"leaf": 1}
        for _ in range(70):
            deep = {"n": deep}
        self.publish(q, b"deep", headers=deep)
        # The same key twice on the wire (a str and a bytes key encode alike), and a key that is
        # not UTF-8.
        self.publish(q, "bidi\u202e\u0085".encode(), headers={"k": 1, b"k": 2, b"\xff\xfekey": "v"})
        r = warren("consume", "--queue", q, "--count", "2", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(len(lines), 2)
        first, second = (json.loads(line) for line in lines)
        self.assertEqual(first["body"], "deep")
        self.assertIn("nested deeper than 64", first["headers_error"])
        self.assertTrue(base64.b64decode(first["headers_base64"]))
        self.assertEqual(first["headers"], {})
        self.assertEqual(second["header_entries"], [{"key": "k", "value": 1}, {"key": "k", "value": 2},
                                                    {"key_base64": base64.b64encode(b"\xff\xfekey").decode(), "value": "v"}])
        self.assertEqual(second["body"], "bidi\u202e\u0085")
        self.assertNotIn("\u202e".encode(), lines[1])
        self.assertNotIn("\u0085".encode(), lines[1])
        self.assertIn(rb"\u202e\u0085", lines[1])
        # Nothing left behind: both were acked.
        self.assertEqual(self.channel.queue_declare(q, passive=True).method.message_count, 0)

    # ---- what the broker says

    def test_the_broker_text_in_errors_and_records_is_escaped(self):
        q = "no-such-\x1b[31mqueue\u202e"
        r = warren("consume", "--queue", q, "--count", "1", "--log-level", "info")
        self.assertEqual(r.returncode, 1)
        self.assert_inert(r.stderr, "stderr")
        self.assertIn(rb"no-such-\e[31mqueue\u202e", r.stderr)
        r = warren("consume", "--queue", q, "--count", "1", "--log-level", "info", "--log-format", "json")
        self.assertEqual(r.returncode, 1)
        self.assert_inert(r.stderr, "stderr (json)")
        for line in r.stderr.decode().splitlines():
            json.loads(line)


if __name__ == "__main__":
    unittest.main()
