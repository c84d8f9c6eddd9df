"""--metrics-listen must not hurt the process it observes (issue 41, docs/warren-cli.md
"SECURITY"). Each attack the issue reproduced runs against a live `warren work run --exec ...
--metrics-listen 127.0.0.1:0` on the test broker (RMQ_PORT, RMQ_CTL). After each: the worker
is still running and does a put item (`done <id> attempt=1`), its resident memory stays within
RSS_BOUND_KB of what it was at start, and the endpoint counted what it refused in its own
/metrics figures. Every attack is bounded by count and by time, so the suite takes seconds."""
import os
import queue
import re
import resource
import socket
import subprocess
import sys
import threading
import time
import unittest
import urllib.error
import urllib.request
import uuid

import pika

sys.path.insert(0, os.path.dirname(__file__))
from cli_env import WARREN, PORT, CTL, URL, require_warren_and_broker, warren  # noqa: E402

# The endpoint keeps at most 16 connections of 8 KiB each and a response: well under a MiB.
# 16 MiB leaves the worker its own noise; the unbounded endpoint grew by hundreds.
RSS_BOUND_KB = 16 * 1024
# The endpoint's bounds, as docs/warren-cli.md states them.
MAX_CONNECTIONS = 16
LIFETIME_S = 5
REFUSED = "warren_metrics_endpoint_connections_refused_total"
REJECTED = "warren_metrics_endpoint_requests_rejected_total"


def proc_status_kb(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} for {pid}")


class Worker:
    """`warren work run` with the endpoint on, its result lines read off stdout by a thread."""

    def __init__(self, test, prefix, nofile=None):
        self.test, self.prefix, self.queue = test, prefix, "jobs-" + uuid.uuid4().hex[:6]
        limit = (lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))) if nofile else None
        self.process = subprocess.Popen(
            [WARREN, "work", "run", "--queue", self.queue, "--prefix", prefix, "--exec", "cat >/dev/null",
             "--metrics-listen", "127.0.0.1:0", "--url", URL],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=limit)
        test.addCleanup(self.stop)
        first = self.process.stderr.readline().decode()
        match = re.match(r"^warren: metrics at (http://127\.0\.0\.1:(\d+)/metrics)\n$", first)
        test.assertIsNotNone(match, first)
        self.address, self.port = match.group(1), int(match.group(2))
        self.lines, self.errors = queue.Queue(), queue.Queue()
        self.readers = [threading.Thread(target=self._read, args=(self.process.stdout, self.lines), daemon=True),
                        threading.Thread(target=self._read, args=(self.process.stderr, self.errors), daemon=True)]
        for reader in self.readers:
            reader.start()
        # Warm: connected, one command run, one scrape answered; then the baseline.
        self.do_one()
        test.assertEqual(self.get("/metrics")[0], 200)
        self.rss_at_start_kb = proc_status_kb(self.process.pid, "VmRSS")

    @staticmethod
    def _read(stream, into):
        for line in iter(stream.readline, b""):
            into.put(line.decode(errors="replace"))

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
        self.process.wait(timeout=30)
        for reader in getattr(self, "readers", []):
            reader.join(timeout=5)
        self.process.stdout.close()
        self.process.stderr.close()

    def do_one(self):
        """A put item is done by this worker: its --exec still runs (pipes, a child)."""
        self.test.assertIsNone(self.process.poll(), "the worker exited: " + "".join(self.errors.queue))
        put = warren("work", "put", "--queue", self.queue, "--prefix", self.prefix, "--body", "x")
        self.test.assertEqual(put.returncode, 0, put.stderr)
        try:
            line = self.lines.get(timeout=10)
        except queue.Empty:
            self.test.fail("no result line in 10 s; stderr: " + "".join(self.errors.queue))
        self.test.assertRegex(line, r"^done [0-9a-f-]{36} attempt=1\n$", "".join(self.errors.queue))

    def assert_rss_bounded(self):
        rss = proc_status_kb(self.process.pid, "VmRSS")
        self.test.assertLess(rss - self.rss_at_start_kb, RSS_BOUND_KB,
                             f"RSS {self.rss_at_start_kb} kB at start, {rss} kB now")

    def connect(self, timeout=2.0):
        return socket.create_connection(("127.0.0.1", self.port), timeout=timeout)

    def get(self, path, method="GET", headers=None, timeout=2.0):
        """(status, headers, body) of one request, via urllib."""
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as r:
                return r.status, r.headers, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read()

    def figures(self):
        status, _, body = self.get("/metrics")
        self.test.assertEqual(status, 200)
        values = {}
        for line in body.decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                values[name] = float(value)
        return values

    def rejected(self, code):
        key = f'{REJECTED}{{http_response_status_code="{code}"}}'
        figures = self.figures()
        self.test.assertTrue(key in figures, f"no {key} in /metrics")
        return figures[key]


def stream_until_cut(sock, chunk, max_bytes, max_seconds):
    """Sends `chunk` again and again; True when the server cut the connection before
    `max_bytes` or `max_seconds`, with the bytes sent."""
    sent, deadline = 0, time.monotonic() + max_seconds
    sock.settimeout(0.5)
    while sent < max_bytes and time.monotonic() < deadline:
        try:
            sent += sock.send(chunk)
        except socket.timeout:
            continue  # the server reads no more: its close is still to come
        except (BrokenPipeError, ConnectionResetError):
            return True, sent
    return False, sent


def read_to_end(sock, timeout=2.0):
    """What the server sent until it closed, or until `timeout` passed without a byte."""
    sock.settimeout(timeout)
    out = b""
    try:
        while chunk := sock.recv(65536):
            out += chunk
    except (ConnectionResetError, socket.timeout):
        pass
    return out


class MetricsSecurity(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_warren_and_broker()
        cls.prefix = "climetrics-" + uuid.uuid4().hex[:8]

    @classmethod
    def tearDownClass(cls):
        out = subprocess.run([CTL, "-q", "list_queues", "name"], capture_output=True, text=True).stdout
        connection = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", int(PORT)))
        channel = connection.channel()
        for name in out.split():
            if name.startswith(cls.prefix + "."):
                channel.queue_delete(name)
        connection.close()

    def test_a_request_line_without_an_end_is_cut_off(self):
        w = Worker(self, self.prefix)
        with w.connect() as s:
            s.sendall(b"GET /")
            cut, sent = stream_until_cut(s, b"a" * 65536, max_bytes=256 << 20, max_seconds=3)
            w.assert_rss_bounded()
        self.assertTrue(cut, f"{sent} bytes of request line taken in 3 s")
        self.assertEqual(w.rejected(414), 1)
        w.do_one()
        w.assert_rss_bounded()

    def test_thousands_of_large_headers_are_cut_off(self):
        w = Worker(self, self.prefix)
        with w.connect() as s:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            header = b"X-Pad: " + b"a" * 8000 + b"\r\n"
            cut, sent = stream_until_cut(s, header * 8, max_bytes=10_000 * len(header), max_seconds=3)
            w.assert_rss_bounded()
        self.assertTrue(cut, f"{sent} bytes of headers taken in 3 s")
        self.assertEqual(w.rejected(431), 1)
        w.do_one()
        w.assert_rss_bounded()

    def test_more_header_lines_than_64_are_refused(self):
        w = Worker(self, self.prefix)
        with w.connect() as s:
            s.sendall(b"GET /metrics HTTP/1.1\r\n" + b"A: b\r\n" * 100 + b"\r\n")
            answer = read_to_end(s)
            self.assertTrue(answer.startswith(b"HTTP/1.1 431 "), answer[:80])
        self.assertEqual(w.rejected(431), 1)
        # 64 are a request.
        with w.connect() as s:
            s.sendall(b"GET /metrics HTTP/1.1\r\n" + b"A: b\r\n" * 64 + b"\r\n")
            answer = read_to_end(s)
            self.assertTrue(answer.startswith(b"HTTP/1.1 200 "), answer[:80])
        w.do_one()

    def test_more_idle_connections_than_the_bound_are_refused_and_leave_the_command_its_descriptors(self):
        # Under a descriptor limit of 128, 200 idle connections held by the endpoint would take
        # the worker's last descriptors (its --exec needs pipes); bounded, it holds 16.
        w = Worker(self, self.prefix, nofile=128)
        idle = []
        try:
            for _ in range(200):
                try:
                    idle.append(w.connect(timeout=3))  # time for a SYN retried on a busy machine
                except (socket.timeout, ConnectionRefusedError):
                    break  # not taken: the endpoint stopped accepting (out of descriptors)
            time.sleep(0.5)  # every one accepted (or refused) by now
            w.do_one()  # with them all still open: its --exec still gets its pipes
            w.assert_rss_bounded()
            self.assertEqual(len(idle), 200, "the endpoint stopped accepting")
            refused = 0
            for s in idle:
                s.settimeout(0.05)
                try:
                    refused += s.recv(64).startswith(b"HTTP/1.1 503 ")
                except socket.timeout:
                    pass
            self.assertEqual(refused, len(idle) - MAX_CONNECTIONS)
        finally:
            for s in idle:
                s.close()
        # Until the endpoint has seen the held ones end, a scrape is one more refused.
        late, deadline = 0, time.monotonic() + 3
        while time.monotonic() < deadline:
            try:
                if w.get("/metrics")[0] != 503:
                    break
            except (ConnectionResetError, urllib.error.URLError):
                pass  # refused too: its 503 lost to the reset of a close with the request unread
            late += 1
            time.sleep(0.05)
        figures = w.figures()
        self.assertTrue(REFUSED in figures, f"no {REFUSED} in /metrics")
        self.assertEqual(figures[REFUSED], len(idle) - MAX_CONNECTIONS + late)
        w.do_one()

    def test_a_slow_header_client_holds_no_scrape_back_and_is_cut_at_its_deadline(self):
        w = Worker(self, self.prefix)
        with w.connect() as s:
            opened = time.monotonic()
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            answer, scraped = b"", False
            while time.monotonic() - opened < LIFETIME_S + 3:
                try:
                    s.sendall(b"X-Slow: 1\r\n")  # a line each half second: every read arrives in time
                except (BrokenPipeError, ConnectionResetError):
                    break
                if not scraped and time.monotonic() - opened > 1:
                    started = time.monotonic()
                    try:
                        status, _, body = w.get("/metrics", timeout=1)
                    except (socket.timeout, urllib.error.URLError) as e:
                        self.fail(f"a scrape waited over 1 s behind a slow client ({e})")
                    self.assertEqual(status, 200)
                    self.assertIn(REFUSED.encode(), body)
                    self.assertLess(time.monotonic() - started, 1)
                    scraped = True
                s.settimeout(0.5)
                try:
                    chunk = s.recv(4096)
                    answer += chunk
                    if not chunk:
                        break
                except socket.timeout:
                    pass
                except ConnectionResetError:
                    break
            lasted = time.monotonic() - opened
        self.assertTrue(scraped)
        self.assertTrue(answer.startswith(b"HTTP/1.1 408 "), answer[:100])
        self.assertGreater(lasted, LIFETIME_S - 0.5)
        self.assertLess(lasted, LIFETIME_S + 2)
        self.assertEqual(w.rejected(408), 1)
        w.do_one()
        w.assert_rss_bounded()

    def test_a_range_header_gets_the_whole_document_once(self):
        w = Worker(self, self.prefix)
        ranges = "bytes=" + ",".join(["0-"] * 1000)  # 3 KB
        status, headers, body = w.get("/metrics", headers={"Range": ranges})
        self.assertEqual(status, 200)
        self.assertTrue(headers["Content-Type"].startswith("text/plain; version=0.0.4"), headers["Content-Type"])
        self.assertEqual(int(headers["Content-Length"]), len(body))
        self.assertLess(len(body), 64 * 1024)
        self.assertTrue(body.startswith(b"# HELP "), body[:100])
        self.assertEqual(body.count(b"# TYPE " + REFUSED.encode() + b" counter\n"), 1)
        w.do_one()
        w.assert_rss_bounded()

    def test_only_get_and_head_are_answered(self):
        w = Worker(self, self.prefix)
        for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE"):
            with self.subTest(method=method):
                status, headers, _ = w.get("/metrics", method=method)
                self.assertEqual(status, 405)
                self.assertEqual(headers["Allow"], "GET, HEAD")
        self.assertEqual(w.rejected(405), 6)
        status, headers, body = w.get("/metrics", method="HEAD")
        self.assertEqual(status, 200)
        self.assertGreater(int(headers["Content-Length"]), 0)
        self.assertEqual(body, b"")
        self.assertEqual(w.get("/other")[0], 404)
        # A body is never read into memory: 256 MiB offered in at most 3 s, answered and cut.
        with w.connect() as s:
            s.sendall(b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 268435456\r\n\r\n")
            cut, sent = stream_until_cut(s, b"a" * 65536, max_bytes=256 << 20, max_seconds=3)
            w.assert_rss_bounded()
        self.assertTrue(cut, f"{sent} bytes of body taken in 3 s")
        self.assertEqual(w.rejected(405), 7)
        w.do_one()
        w.assert_rss_bounded()

    def test_its_sockets_are_close_on_exec(self):
        # The listener and an accepted connection (held open while looked at), found by port in
        # the worker's own view of its TCP sockets, then by inode among its descriptors.
        w = Worker(self, self.prefix)
        with w.connect():
            time.sleep(0.3)
            inodes = set()
            for table in ("tcp", "tcp6"):
                with open(f"/proc/{w.process.pid}/net/{table}") as f:
                    for row in list(f)[1:]:
                        fields = row.split()
                        if int(fields[1].split(":")[1], 16) == w.port:
                            inodes.add(fields[9])
            checked = 0
            for fd in os.listdir(f"/proc/{w.process.pid}/fd"):
                try:
                    link = os.readlink(f"/proc/{w.process.pid}/fd/{fd}")
                except FileNotFoundError:
                    continue
                if link.startswith("socket:[") and link[8:-1] in inodes:
                    with open(f"/proc/{w.process.pid}/fdinfo/{fd}") as f:
                        flags = int(next(line for line in f if line.startswith("flags:")).split()[1], 8)
                    self.assertTrue(flags & os.O_CLOEXEC, f"fd {fd} ({link}) is inherited by children")
                    checked += 1
        self.assertEqual(checked, 2)  # the listener and the connection
        w.do_one()


if __name__ == "__main__":
    unittest.main(verbosity=2)
