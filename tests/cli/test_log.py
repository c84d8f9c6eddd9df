"""`warren log append` and `warren log read` against the real test broker (RMQ_PORT, RMQ_CTL):
offsets printed per appended line, OFFSET<TAB>BODY up to the tip read at the start, a resume
from an offset, --count, --json, --follow seeing a later append, and the usage errors. The gap
(exit 3) needs a trimmed stream on a node of its own and is not run here."""
import json
import os
import sys
import subprocess
import time
import unittest
import uuid

import pika

sys.path.insert(0, os.path.dirname(__file__))
from cli_env import WARREN, PORT, CTL, URL, require_warren_and_broker, warren  # noqa: E402


class Log(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_warren_and_broker()

    def setUp(self):
        self.prefix = "clilog-" + uuid.uuid4().hex[:8]
        self.addCleanup(self.drop)

    def drop(self):
        c = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", int(PORT)))
        ch = c.channel()
        out = subprocess.run([CTL, "-q", "list_queues", "name"], capture_output=True, text=True).stdout
        for name in out.split():
            if name.startswith(self.prefix + "."):
                ch.queue_delete(name)
        c.close()

    def ok(self, result):
        self.assertEqual(result.returncode, 0, result.stderr.decode(errors="replace"))
        return result.stdout.decode()

    def test_append_prints_offsets_and_read_prints_entries_up_to_the_tip(self):
        for driver in ("uv", "asio"):
            with self.subTest(driver=driver):
                name = "events-" + driver
                offsets = [int(x) for x in self.ok(warren("log", "append", "--log", name, "--prefix", self.prefix,
                                                          "--driver", driver, stdin=b"one\ntwo\nthree\n")).split()]
                self.assertEqual(len(offsets), 3)
                self.assertEqual(offsets, sorted(set(offsets)))
                out = self.ok(warren("log", "read", "--log", name, "--prefix", self.prefix, "--driver", driver))
                self.assertEqual(out, "".join(f"{o}\t{b}\n" for o, b in zip(offsets, ["one", "two", "three"])))
                out = self.ok(warren("log", "read", "--log", name, "--prefix", self.prefix, "--driver", driver,
                                     "--from", str(offsets[1])))
                self.assertEqual(out, f"{offsets[1]}\ttwo\n{offsets[2]}\tthree\n")
                out = self.ok(warren("log", "read", "--log", name, "--prefix", self.prefix, "--driver", driver,
                                     "--count", "1", "--json"))
                entry = json.loads(out)
                self.assertEqual(entry["offset"], offsets[0])
                self.assertEqual(entry["body"], "one")

    def test_an_empty_log_reads_as_nothing(self):
        r = warren("log", "read", "--log", "empty", "--prefix", self.prefix, timeout=20)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, b"")

    def test_follow_prints_a_later_append(self):
        self.ok(warren("log", "append", "--log", "live", "--prefix", self.prefix, stdin=b"old\n"))
        reader = subprocess.Popen([WARREN, "log", "read", "--log", "live", "--prefix", self.prefix, "--follow",
                                   "--count", "2", "--url", URL], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            time.sleep(2)  # the catch-up page is printed and the tail attached
            new = self.ok(warren("log", "append", "--log", "live", "--prefix", self.prefix, stdin=b"new\n")).strip()
            out, err = reader.communicate(timeout=20)
        finally:
            if reader.poll() is None:
                reader.kill()
        self.assertEqual(reader.returncode, 0, err)
        lines = out.decode().splitlines()
        self.assertEqual([l.split("\t")[1] for l in lines], ["old", "new"])
        self.assertEqual(lines[1].split("\t")[0], new)

    def test_read_and_append_end_while_another_appender_never_stops(self):
        # F1: with an entry appended every 50 ms the stream is never silent; a read ends at what
        # it asked for and the tip it saw, and an append's read-back at its own entry.
        name = "busy"
        self.ok(warren("log", "append", "--log", name, "--prefix", self.prefix, stdin=b"a\nb\nc\n"))
        appender = subprocess.Popen(
            ["/usr/bin/python3", "-c", f"""
import pika, time
c = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", {int(PORT)}))
ch = c.channel()
while True:
    ch.basic_publish("", "{self.prefix}.log.{name}", b"steady")
    c.process_data_events(0.05)
"""])
        self.addCleanup(appender.kill)
        time.sleep(0.3)
        started = time.monotonic()
        out = self.ok(warren("log", "read", "--log", name, "--prefix", self.prefix, "--count", "2", timeout=20))
        self.assertEqual([line.split("\t")[1] for line in out.splitlines()], ["a", "b"])
        out = self.ok(warren("log", "read", "--log", name, "--prefix", self.prefix, timeout=20))
        self.assertGreaterEqual(len(out.splitlines()), 3, "the read reached the tip it saw")
        lines = "".join(f"mine-{i}\n" for i in range(30)).encode()
        offsets = [int(x) for x in self.ok(warren("log", "append", "--log", name, "--prefix", self.prefix,
                                                  stdin=lines, timeout=60)).split()]
        self.assertEqual(len(offsets), 30)
        self.assertEqual(offsets, sorted(set(offsets)))
        self.assertLess(time.monotonic() - started, 45)

    def test_follow_from_an_offset_past_the_tip_starts_at_that_offset(self):
        # F6: --from 5 --follow on a log whose tip is 2 printed offset 3.
        name = "ahead"
        self.ok(warren("log", "append", "--log", name, "--prefix", self.prefix, stdin=b"e0\ne1\ne2\n"))
        run = subprocess.Popen([WARREN, "log", "read", "--log", name, "--prefix", self.prefix, "--from", "5",
                                "--follow", "--count", "1", "--url", URL], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(1)
        self.ok(warren("log", "append", "--log", name, "--prefix", self.prefix, stdin=b"e3\ne4\ne5\ne6\n"))
        out, err = run.communicate(timeout=20)
        self.assertEqual(run.returncode, 0, err.decode(errors="replace"))
        self.assertEqual(out.decode(), "5\te5\n")

    def test_usage_errors(self):
        r = warren("log", "read", "--log", "x", "--from", "yesterday")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr.decode(), "warren: invalid argument: --from 'yesterday': first, last, next or an offset\n")
        r = warren("log", "append")
        self.assertEqual(r.returncode, 2)


if __name__ == "__main__":
    unittest.main(verbosity=2)
