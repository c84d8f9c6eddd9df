"""The warren command line against the real test broker (RMQ_PORT, RMQ_CTL), plus scripted
brokers for a corrupt frame and a silent peer. Every subcommand, on both drivers where the
driver matters, and every error path the contract names."""
import base64
import datetime
import decimal
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

import pika

sys.path.insert(0, os.path.dirname(__file__))
import fake_broker  # noqa: E402

from cli_env import WARREN, PORT, CTL, URL, require_warren_and_broker, warren, unique  # noqa: E402


def queue_depth(queue):
    out = subprocess.run([CTL, "-q", "list_queues", "name", "messages"], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        parts = line.split("\t")
        if parts[0] == queue:
            return int(parts[1])
    raise AssertionError(f"queue {queue} not listed")


class Cli(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_warren_and_broker()

    def ok(self, result):
        self.assertEqual(result.returncode, 0, result.stderr.decode(errors="replace"))
        return result.stdout.decode()

    def declare(self, queue=None, *args):
        queue = queue or unique("cli")
        self.ok(warren("declare", "queue", queue, *args))
        self.addCleanup(lambda: warren("delete", "queue", queue))
        return queue

    # ---- publish and consume

    def test_stdin_lines_are_messages_and_consume_prints_them(self):
        for driver in ("uv", "asio"):
            with self.subTest(driver=driver):
                q = self.declare()
                self.ok(warren("publish", "--routing-key", q, "--confirm", "--driver", driver, stdin=b"one\n\ntwo\r\nlast"))
                out = self.ok(warren("consume", "--queue", q, "--count", "4", "--driver", driver))
                self.assertEqual(out, "one\n\ntwo\r\nlast\n")
                self.assertEqual(queue_depth(q), 0)

    def test_a_slow_standard_input_is_published_line_by_line_and_never_stops_the_heartbeat(self):
        # Standard input used to be read on the loop: a line waited there for the next one, and
        # the heartbeats went unanswered while the pipe was quiet (the broker dropped the
        # connection after two intervals).
        for driver in ("uv", "asio"):
            with self.subTest(driver=driver):
                q = self.declare()
                p = subprocess.Popen([WARREN, "publish", "--routing-key", q, "--confirm", "--driver", driver,
                                      "--url", URL + "/%2f?heartbeat=1"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                try:
                    p.stdin.write(b"first\n")
                    p.stdin.flush()
                    deadline = time.monotonic() + 20
                    while queue_depth(q) != 1:
                        self.assertLess(time.monotonic(), deadline, "the first line was not published before the next")
                        time.sleep(0.2)
                    time.sleep(3)  # three heartbeat intervals of a quiet pipe
                    _, err = p.communicate(input=b"second\n", timeout=30)
                finally:
                    if p.poll() is None:
                        p.kill()
                        p.wait()
                    for f in (p.stdin, p.stdout, p.stderr):
                        f.close()
                self.assertEqual(p.returncode, 0, err.decode(errors="replace"))
                self.assertEqual(queue_depth(q), 2)

    def test_consume_count_takes_exactly_n_and_leaves_the_rest_unredelivered(self):
        q = self.declare()
        self.ok(warren("publish", "--routing-key", q, "--confirm", "--body", "m", "--count", "10"))
        self.ok(warren("consume", "--queue", q, "--count", "3", "--prefetch", "5"))
        self.assertEqual(queue_depth(q), 7)
        lines = self.ok(warren("consume", "--queue", q, "--count", "7", "--json")).splitlines()
        self.assertEqual([json.loads(l)["redelivered"] for l in lines], [False] * 7)

    def test_no_ack_with_count_loses_nothing(self):
        q = self.declare()
        self.ok(warren("publish", "--routing-key", q, "--confirm", "--body", "m", "--count", "5"))
        self.assertEqual(self.ok(warren("consume", "--queue", q, "--count", "2", "--no-ack")), "m\nm\n")
        self.assertEqual(queue_depth(q), 3)

    def test_size_and_count_send_exact_bodies(self):
        q = self.declare()
        self.ok(warren("publish", "--routing-key", q, "--confirm", "--size", "1000", "--count", "3"))
        lines = self.ok(warren("consume", "--queue", q, "--count", "3")).splitlines()
        self.assertEqual([len(l) for l in lines], [1000] * 3)

    def test_body_file_is_sent_unchanged_and_shown_as_base64(self):
        q = self.declare()
        data = bytes(range(256)) * 3
        with tempfile.NamedTemporaryFile(delete=False) as f:
            f.write(data)
        self.addCleanup(os.unlink, f.name)
        self.ok(warren("publish", "--routing-key", q, "--confirm", "--body-file", f.name))
        m = json.loads(self.ok(warren("consume", "--queue", q, "--count", "1", "--json")))
        self.assertNotIn("body", m)
        self.assertEqual(base64.b64decode(m["body_base64"]), data)

    def test_headers_and_properties_arrive_typed(self):
        q = self.declare()
        self.ok(warren("publish", "--routing-key", q, "--confirm", "--persistent", "--body", "héllo",
                       "--header", "s=text", "--header", "n:int=-42", "--header", "b:bool=true", "--header", "f:float=2.5",
                       "--property", "content_type=text/plain", "--property", "priority=3",
                       "--property", "correlation_id=c1", "--property", "message_id=m1", "--property", "timestamp=1700000000",
                       "--property", "app_id=cli", "--property", "type=t", "--property", "expiration=60000"))
        m = json.loads(self.ok(warren("consume", "--queue", q, "--count", "1", "--json")))
        self.assertEqual(m["body"], "héllo")
        self.assertEqual(m["exchange"], "")
        self.assertEqual(m["routing_key"], q)
        self.assertEqual(m["redelivered"], False)
        self.assertEqual(m["delivery_tag"], 1)
        self.assertEqual(m["headers"], {"s": "text", "n": -42, "b": True, "f": 2.5})
        self.assertEqual(m["properties"], {"content_type": "text/plain", "delivery_mode": 2, "priority": 3,
                                           "correlation_id": "c1", "expiration": "60000", "message_id": "m1",
                                           "timestamp": 1700000000, "type": "t", "app_id": "cli"})

    def test_json_shows_every_field_table_type_from_another_client(self):
        q = self.declare()
        params = pika.ConnectionParameters(host="127.0.0.1", port=int(PORT))
        with pika.BlockingConnection(params) as conn:
            ch = conn.channel()
            ch.basic_publish("", q, b"x", pika.BasicProperties(headers={
                "nested": {"a": 1, "list": [1, "two", None]},
                "dec": decimal.Decimal("1.23"),
                "when": datetime.datetime(2024, 1, 2, 3, 4, 5),
                "void": None,
            }))
        m = json.loads(self.ok(warren("consume", "--queue", q, "--count", "1", "--json")))
        h = m["headers"]
        self.assertEqual(h["nested"], {"a": 1, "list": [1, "two", None]})
        self.assertEqual(h["dec"], {"decimal": "1.23"})
        self.assertEqual(h["when"], {"timestamp": 1704164645})
        self.assertIsNone(h["void"])
        self.assertEqual(m["properties"], {})

    def test_confirm_reports_a_returned_message(self):
        r = warren("publish", "--routing-key", unique("nowhere"), "--confirm", "--mandatory", "--body", "x")
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr.decode(), "warren: message 1: returned 312 NO_ROUTE\n")

    # ---- trace context from the environment (TRACEPARENT, TRACESTATE)

    def test_a_sender_continues_the_trace_in_its_own_environment(self):
        # OpenTelemetry's environment carrier: a traced script that calls warren continues its
        # trace in what warren sends (publish, rpc call, work put, log append).
        trace = "4bf92f3577b34da6a3ce929d0e0e4736"
        env = {**os.environ, "TRACEPARENT": f"00-{trace}-00f067aa0ba902b7-01", "TRACESTATE": "congo=t61rcWkgMzE"}

        def run(*args, stdin=None, environment=env):
            return subprocess.run([WARREN, *args, "--url", URL], input=stdin, capture_output=True, env=environment,
                                  timeout=60)

        def context(headers):
            headers = headers or {}
            text = lambda v: v.decode() if isinstance(v, bytes) else v  # noqa: E731
            return text(headers.get("traceparent")), text(headers.get("tracestate"))

        connection = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", int(PORT)))
        self.addCleanup(connection.close)
        ch = connection.channel()
        expected = (env["TRACEPARENT"], "congo=t61rcWkgMzE")  # no span recorded in between: the caller's span is the parent

        with self.subTest(command="publish"):
            q = self.declare()
            self.ok(run("publish", "--routing-key", q, "--confirm", "--body", "x"))
            self.assertEqual(context(ch.basic_get(q, auto_ack=True)[1].headers), expected)
            # An explicit --header wins over the environment; an invalid TRACEPARENT is ignored.
            mine = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
            self.ok(run("publish", "--routing-key", q, "--confirm", "--body", "x", "--header", f"traceparent={mine}"))
            self.assertEqual(context(ch.basic_get(q, auto_ack=True)[1].headers), (mine, None))
            self.ok(run("publish", "--routing-key", q, "--confirm", "--body", "x",
                        environment={**env, "TRACEPARENT": "00-not-a-trace-01"}))
            self.assertEqual(context(ch.basic_get(q, auto_ack=True)[1].headers), (None, None))

        with self.subTest(command="rpc call"):
            q = self.declare()
            call = subprocess.Popen([WARREN, "rpc", "call", "--queue", q, "--body", "ping", "--timeout", "20", "--url", URL],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
            self.addCleanup(lambda: call.poll() is None and call.kill())
            deadline = time.monotonic() + 20
            while (request := ch.basic_get(q, auto_ack=True))[0] is None:
                self.assertLess(time.monotonic(), deadline, "no request came")
                time.sleep(0.02)
            self.assertEqual(context(request[1].headers), expected)
            ch.basic_publish("", request[1].reply_to, b"PONG", pika.BasicProperties(correlation_id=request[1].correlation_id))
            out, err = call.communicate(timeout=20)
            self.assertEqual((call.returncode, out), (0, b"PONG\n"), err)

        prefix = unique("cli-trace")
        self.addCleanup(lambda: [ch.queue_delete(name) for name in subprocess.run(
            [CTL, "-q", "list_queues", "name"], capture_output=True, text=True).stdout.split() if name.startswith(prefix)])
        with self.subTest(command="work put"):
            self.ok(run("work", "put", "--queue", "w", "--prefix", prefix, "--body", "x"))
            self.assertEqual(context(ch.basic_get(f"{prefix}.w", auto_ack=True)[1].headers), expected)
        with self.subTest(command="log append"):
            self.ok(run("log", "append", "--log", "l", "--prefix", prefix, stdin=b"x\n"))
            entry = json.loads(self.ok(run("log", "read", "--log", "l", "--prefix", prefix, "--json")))
            self.assertEqual(context(entry["headers"]), expected)

    # ---- event records (--log-level, --log-format)

    def test_event_records_are_one_json_object_a_line_with_fixed_keys_and_no_secret(self):
        keys = ["time", "level", "event", "connection", "channel", "subject", "cause", "reply_code"]
        for driver in ("uv", "asio"):
            with self.subTest(driver=driver):
                key = unique("nowhere")
                r = warren("publish", "--routing-key", key, "--confirm", "--mandatory", "--body", "x", "--driver", driver,
                           "--log-level", "info", "--log-format", "json")
                self.assertEqual(r.returncode, 1)
                # Every line is a record, the contract's line too: in the same shape, its text
                # (without "warren: ") as the cause, printed when the failure is seen.
                records = [json.loads(line) for line in r.stderr.decode().splitlines()]
                for rec in records:
                    self.assertEqual(list(rec.keys()), keys)
                    datetime.datetime.strptime(rec["time"], "%Y-%m-%dT%H:%M:%S.%fZ")
                self.assertEqual([rec["event"] for rec in records],
                                 ["connection.connecting", "connection.connected", "publish.returned", "command.failed",
                                  "connection.closed"])
                final = records.pop(3)
                for rec in records:
                    self.assertEqual(rec["connection"], f"127.0.0.1:{PORT}")
                self.assertEqual((final["level"], final["connection"], final["channel"], final["subject"], final["cause"],
                                  final["reply_code"]),
                                 ("error", "", 0, "message 1", "message 1: returned 312 NO_ROUTE", 312))
                returned = records[2]
                self.assertEqual((returned["level"], returned["channel"], returned["subject"], returned["reply_code"]),
                                 ("warning", 1, key, 312))
                self.assertIn(f'routing key "{key}"', returned["cause"])
                self.assertIsNone(records[0]["cause"])

    def test_event_records_as_text_from_the_level_asked_and_none_by_default(self):
        bad = f"amqp://guest:not-the-password@127.0.0.1:{PORT}"
        r = warren("publish", "--routing-key", unique("q"), "--body", "x", "--log-level", "warning", url=bad)
        self.assertEqual(r.returncode, 1)
        err = r.stderr.decode()
        lines = err.splitlines()
        self.assertEqual(len(lines), 2, err)
        self.assertTrue(lines[0].startswith(f"warren: error connection.failed 127.0.0.1:{PORT}: access refused (403)"), err)
        self.assertTrue(lines[1].startswith("warren: access refused (403)"), err)
        self.assertNotIn("not-the-password", err)
        self.assertNotIn("guest", err)
        # Off by default: the one line the contract fixes, nothing else.
        r = warren("publish", "--routing-key", unique("q"), "--body", "x", url=bad)
        self.assertEqual(len(r.stderr.decode().splitlines()), 1, r.stderr.decode())
        r = warren("publish", "--routing-key", "q", "--body", "x", "--log-level", "loud")
        self.assertEqual(r.returncode, 2)

    def test_the_final_line_follows_the_log_format_with_records_off_too(self):
        # A JSON log pipeline reads the one line that says why the command failed: under json it
        # is a record even when no other is asked for; as text it is the contract's line.
        bad = f"amqp://guest:not-the-password@127.0.0.1:{PORT}"
        text = warren("publish", "--routing-key", "q", "--body", "x", url=bad)
        self.assertEqual(text.returncode, 1)
        self.assertRegex(text.stderr.decode(), r"^warren: access refused \(403\): ACCESS_REFUSED [^\n]*\n$")
        as_json = warren("publish", "--routing-key", "q", "--body", "x", "--log-format", "json", url=bad)
        self.assertEqual(as_json.returncode, 1)
        lines = as_json.stderr.decode().splitlines()
        self.assertEqual(len(lines), 1, lines)
        final = json.loads(lines[0])
        self.assertEqual((final["event"], final["level"], final["subject"], final["reply_code"]), ("command.failed", "error", "", 403))
        self.assertEqual("warren: " + final["cause"] + "\n", text.stderr.decode())
        self.assertNotIn("not-the-password", lines[0])
        # A usage error found before anything is dialled is a record too (exit 2).
        usage = warren("publish", "--body", "x", "--size", "3", "--log-format", "json")
        self.assertEqual(usage.returncode, 2)
        final = json.loads(usage.stderr.decode())
        self.assertEqual((final["event"], final["cause"]), ("command.failed", "invalid argument: give one of --body, --body-file and --size"))

    def test_confirm_reports_a_nack(self):
        q = self.declare(None, "--arg", "x-max-length=1", "--arg", "x-overflow=reject-publish")
        r = warren("publish", "--routing-key", q, "--confirm", "--body", "x", "--count", "2")
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr.decode(), "warren: message 2: nacked by the broker\n")

    def test_consume_timeout_exits_1(self):
        q = self.declare()
        start = time.monotonic()
        r = warren("consume", "--queue", q, "--count", "1", "--timeout", "1")
        self.assertLess(time.monotonic() - start, 5)
        self.assertEqual(r.returncode, 1)
        self.assertIn(f"warren: consume {q}: timed out after 1 s with 0 message(s) of 1", r.stderr.decode())

    # ---- metrics (--metrics-listen)

    def scrape(self, address):
        from prometheus_client.parser import text_string_to_metric_families
        import re
        import urllib.request
        with urllib.request.urlopen(address, timeout=10) as r:
            self.assertEqual(r.status, 200)
            self.assertTrue(r.headers["Content-Type"].startswith("text/plain; version=0.0.4"), r.headers["Content-Type"])
            text = r.read().decode()
        samples = {}
        valid = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
        for family in text_string_to_metric_families(text):
            self.assertRegex(family.name, valid)
            for s in family.samples:
                self.assertRegex(s.name, valid)
                for label in s.labels:
                    self.assertRegex(label, r"^[a-zA-Z_][a-zA-Z0-9_]*$")
                samples[(s.name, tuple(sorted(s.labels.items())))] = (family.type, s.value)
        return samples

    def test_metrics_listen_serves_what_a_prometheus_scraper_reads_and_the_broker_counted(self):
        for driver in ("uv", "asio"):
            with self.subTest(driver=driver):
                q = self.declare()
                p = subprocess.Popen([WARREN, "consume", "--queue", q, "--driver", driver, "--url", URL,
                                      "--metrics-listen", "127.0.0.1:0"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                try:
                    first = p.stderr.readline().decode()
                    self.assertRegex(first, r"^warren: metrics at http://127\.0\.0\.1:\d+/metrics\n$")
                    address = first.split(" at ")[1].strip()
                    self.ok(warren("publish", "--routing-key", q, "--confirm", stdin=b"1\n2\n3\n4\n5"))
                    labels = (("messaging_destination_name", q), ("messaging_operation_name", "deliver"),
                              ("messaging_system", "rabbitmq"))
                    key = ("messaging_client_consumed_messages_total", labels)
                    deadline = time.monotonic() + 20
                    while True:
                        before = self.scrape(address)
                        if before.get(key, (None, 0))[1] == 5:
                            break
                        self.assertLess(time.monotonic(), deadline, f"consumed never reached 5: {before.get(key)}")
                        time.sleep(0.2)
                    # What the broker counted: all five taken and acknowledged, none left.
                    out = subprocess.run([CTL, "-q", "list_queues", "name", "messages", "messages_unacknowledged"],
                                         capture_output=True, text=True, check=True).stdout
                    self.assertIn(f"{q}\t0\t0", out.splitlines())
                    self.assertEqual(before[key][0], "counter")
                    acks = ("warren_delivery_settled_total", (("messaging_operation_name", "ack"), ("requeue", "false")))
                    self.assertEqual(before[acks][1], 5)
                    self.assertEqual(before[("warren_connections", ())], ("gauge", 1))
                    self.assertGreaterEqual(before[("warren_channels", ())][1], 1)
                    process = ("messaging_process_duration_seconds_count", labels[:1] + (("messaging_operation_name", "process"),) + labels[2:])
                    self.assertEqual(before[process][1], 5)
                    # Counters never go back.
                    after = self.scrape(address)
                    for k, (kind, v) in before.items():
                        if kind == "counter":
                            self.assertGreaterEqual(after[k][1], v, k)
                finally:
                    p.terminate()
                    p.communicate(timeout=30)

    def test_metrics_listen_errors(self):
        r = warren("consume", "--queue", "q", "--metrics-listen", "nonsense")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr.decode(), "warren: --metrics-listen: expected HOST:PORT (127.0.0.1:9464, [::1]:9464), not 'nonsense'\n")
        import socket
        with socket.socket() as busy:
            busy.bind(("127.0.0.1", 0))
            busy.listen()
            port = busy.getsockname()[1]
            r = warren("consume", "--queue", "q", "--metrics-listen", f"127.0.0.1:{port}")
            self.assertEqual(r.returncode, 1)
            self.assertEqual(r.stderr.decode(),
                             f"warren: --metrics-listen 127.0.0.1:{port}: cannot listen there (in use, or not this host's address)\n")

    # ---- topology

    def test_declare_bind_publish_through_an_exchange_and_delete(self):
        q = self.declare(None, "--durable", "--type", "quorum", "--arg", "x-max-length=100")
        x = unique("cli-x")
        self.ok(warren("declare", "exchange", x, "--type", "topic"))
        self.ok(warren("bind", q, x, "--routing-key", "a.*"))
        self.ok(warren("publish", "--exchange", x, "--routing-key", "a.b", "--confirm", "--mandatory", "--body", "via"))
        self.assertEqual(self.ok(warren("consume", "--queue", q, "--count", "1")), "via\n")
        listing = subprocess.run([CTL, "-q", "list_queues", "name", "type", "durable", "arguments"],
                                 capture_output=True, text=True, check=True).stdout
        row = next(l for l in listing.splitlines() if l.startswith(q + "\t"))
        self.assertIn("quorum", row)
        self.assertIn("true", row)
        self.assertIn("x-max-length", row)
        self.ok(warren("delete", "exchange", x))
        r = warren("publish", "--exchange", x, "--routing-key", "a.b", "--confirm", "--body", "gone")
        self.assertEqual(r.returncode, 1)
        self.assertIn("not found (404)", r.stderr.decode())

    def test_declare_queue_prints_its_name_and_counts(self):
        q = unique("cli")
        self.addCleanup(lambda: warren("delete", "queue", q))
        self.assertEqual(self.ok(warren("declare", "queue", q)), f"{q} messages=0 consumers=0\n")

    def test_nothing_warren_declares_by_default_is_a_transient_shared_queue(self):
        # Issue 38: RabbitMQ 4.3 refuses a queue that is neither durable nor exclusive by default.
        # What the CLI declares unasked: `declare queue` without flags, `perf -u` and `rpc serve`
        # on a missing queue. (The layers' declares: the Compatibility test of tests/sim.)
        declared, perfed, served = unique("compat"), unique("compat-perf"), unique("compat-rpc")
        for q in (declared, perfed, served):
            self.addCleanup(lambda q=q: warren("delete", "queue", q))
        self.ok(warren("declare", "queue", declared))
        self.ok(warren("perf", "-x", "1", "-y", "0", "-C", "10", "-u", perfed, "--json"))
        server = subprocess.Popen([WARREN, "rpc", "serve", "--queue", served, "--url", URL],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        try:
            self.assertEqual(server.stdout.readline().decode().strip(), f"serving {served}")
        finally:
            server.terminate()
            server.wait(10)
        listed = subprocess.run([CTL, "-q", "list_queues", "name", "durable", "exclusive"], capture_output=True,
                                text=True, check=True).stdout
        flags = {line.split("\t")[0]: line.split("\t")[1:] for line in listed.splitlines() if "\t" in line}
        for q in (declared, perfed, served):
            self.assertEqual(flags.get(q), ["true", "false"], q)
        # Transient only when asked; with --durable it is a contradiction.
        transient = unique("compat-t")
        self.addCleanup(lambda: warren("delete", "queue", transient))
        self.ok(warren("declare", "queue", transient, "--transient"))
        r = warren("declare", "queue", transient, "--transient", "--durable")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--durable excludes --transient", r.stderr.decode())

    def test_delete_queue_removes_it(self):
        q = unique("cli")
        self.ok(warren("declare", "queue", q))
        self.ok(warren("delete", "queue", q))
        r = warren("consume", "--queue", q, "--count", "1")
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr.decode(), f"warren: consume {q}: not found (404): NOT_FOUND - no queue '{q}' in vhost '/'\n")

    # ---- rpc

    def test_rpc_serve_and_call_on_both_drivers(self):
        q = unique("cli-rpc")
        self.addCleanup(lambda: warren("delete", "queue", q))
        server = subprocess.Popen([WARREN, "rpc", "serve", "--queue", q, "--count", "2", "--url", URL],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.assertEqual(server.stdout.readline().decode(), f"serving {q}\n")
        self.assertEqual(self.ok(warren("rpc", "call", "--queue", q, "--body", "hello")), "HELLO\n")
        self.assertEqual(self.ok(warren("rpc", "call", "--queue", q, "--body", "Asio 1", "--driver", "asio")), "ASIO 1\n")
        self.assertEqual(server.wait(timeout=30), 0, server.stderr.read().decode())

    def test_rpc_call_to_a_missing_queue_fails_at_once(self):
        q = unique("missing")
        start = time.monotonic()
        r = warren("rpc", "call", "--queue", q, "--body", "x", "--timeout", "30")
        self.assertLess(time.monotonic() - start, 10)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr.decode(), f"warren: rpc call {q}: returned 312 NO_ROUTE\n")

    def test_rpc_call_without_a_server_times_out(self):
        q = self.declare()
        r = warren("rpc", "call", "--queue", q, "--body", "x", "--timeout", "1")
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr.decode(), f"warren: rpc call {q}: timed out: no reply within 1 s\n")

    # ---- perf

    def test_perf_json_summary(self):
        for driver in ("uv", "asio"):
            with self.subTest(driver=driver):
                r = self.ok(warren("perf", "--driver", driver, "-x", "1", "-y", "1", "-s", "64", "-C", "2000", "-c", "100",
                                   "-q", "100", "-A", "10", "--json"))
                lines = r.splitlines()
                self.assertEqual(len(lines), 1)  # the progress lines go to stderr
                s = json.loads(lines[0])
                self.assertEqual((s["sent"], s["confirmed"], s["received"]), (2000, 2000, 2000))
                for key in ("seconds", "send_rate", "receive_rate", "cpu_seconds", "cpu_us_per_msg"):
                    self.assertGreater(s[key], 0, key)
                self.assertGreater(s["latency_us"]["p99"], 0)
                self.assertGreaterEqual(s["latency_us"]["p99"], s["latency_us"]["p50"])

    def test_perf_prints_a_line_each_second_on_stderr_and_keeps_stdout_for_the_summary(self):
        import re
        line = re.compile(r"^time: \d+\.\d{3} s, sent: \d+ msg/s, received: \d+ msg/s, "
                          r"min/median/75th/95th/99th consumer latency: \d+/\d+/\d+/\d+/\d+ us$")
        r = warren("perf", "-x", "1", "-y", "1", "-s", "64", "-r", "400", "-z", "2.5", "--json")
        self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace"))
        out = r.stdout.decode().splitlines()
        self.assertEqual(len(out), 1, out)
        s = json.loads(out[0])
        progress = r.stderr.decode().splitlines()
        self.assertEqual(len(progress), 2, progress)  # at 1 s and 2 s of a 2.5 s run
        for text in progress:
            self.assertRegex(text, line)
        # -r 400 is a limit: about 1,000 messages in 2.5 s, never the hundreds of thousands
        # of a run flat out.
        self.assertLessEqual(s["sent"], 400 * 2.5 + 2)
        self.assertGreater(s["sent"], 400 * 2.5 * 0.8)
        self.assertLessEqual(s["send_rate"], 400 * 1.01)

    def test_perf_consumer_channel_count_gives_each_connection_that_many_consumers(self):
        q = self.declare()
        # It runs long enough for a slow rabbitmqctl (an Erlang VM per call, seconds on a busy
        # machine) to see all six consumers before it ends.
        run = subprocess.Popen([WARREN, "perf", "-x", "0", "-y", "2", "-Y", "3", "-u", q, "-z", "10", "--json", "--url", URL],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            consumers = channel_count = None
            deadline = time.monotonic() + 8
            while time.monotonic() < deadline:
                out = subprocess.run([CTL, "-q", "list_consumers", "queue_name", "channel_pid"], capture_output=True,
                                     text=True, check=True).stdout
                channels = [l.split("\t")[1] for l in out.splitlines() if l.split("\t")[0] == q]
                consumers, channel_count = len(channels), len(set(channels))
                if consumers == 6:
                    break
                time.sleep(0.1)
            self.assertEqual(consumers, 6)
            self.assertEqual(channel_count, 6, "each consumer on a channel of its own")
        finally:
            out, err = run.communicate(timeout=30)
        self.assertEqual(run.returncode, 0, err.decode(errors="replace"))

    def test_perf_in_throughput_mode_moves_every_message(self):
        for driver in ("uv", "asio"):
            with self.subTest(driver=driver):
                r = self.ok(warren("perf", "--driver", driver, "-x", "1", "-y", "1", "-s", "64", "-C", "5000", "-c", "500",
                                   "-q", "300", "-A", "50", "--read-min-bytes", "32768", "--read-max-wait", "2000", "--json"))
                s = json.loads(r)
                self.assertEqual((s["sent"], s["confirmed"], s["received"]), (5000, 5000, 5000))

    def test_perf_batching_past_bursts_moves_every_message_and_needs_a_mark(self):
        for driver in ("uv", "asio"):
            with self.subTest(driver=driver):
                r = self.ok(warren("perf", "--driver", driver, "-x", "1", "-y", "1", "-s", "64", "-C", "5000", "-c", "500",
                                   "-q", "300", "-A", "50", "--read-min-bytes", "32768", "--read-burst-bytes", "4096",
                                   "--json"))
                s = json.loads(r)
                self.assertEqual((s["sent"], s["confirmed"], s["received"]), (5000, 5000, 5000))
        r = warren("perf", "-x", "1", "-y", "1", "-C", "10", "--read-burst-bytes", "4096")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--read-burst-bytes needs --read-min-bytes", r.stderr.decode())

    def test_perf_idle_phase_reports_what_idle_connections_cost_then_measures(self):
        q = self.declare()
        for driver in ("uv", "asio"):
            with self.subTest(driver=driver):
                r = warren("perf", "--driver", driver, "-x", "0", "-y", "3", "-Y", "2", "-u", q, "--idle-seconds", "1",
                           "-z", "0.5", "--json", url=URL + "?heartbeat=1")
                self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace"))
                self.assertEqual(r.stderr.decode().splitlines(),
                                 ["idle: 3 connections ready, idle for 1.0 s", "measuring: 3 connections"])
                s = json.loads(r.stdout)
                self.assertEqual(s["connections"], 3)
                idle = s["idle"]
                self.assertGreater(idle["seconds"], 0.95)  # the loop's timer, measured on the clock
                self.assertGreater(idle["rss_before_kb"], 0)
                self.assertGreater(idle["rss_kb"], idle["rss_before_kb"])  # three connections, six channels
                self.assertGreater(idle["cpu_us_per_s"], 0)  # a 1 s heartbeat each way
                self.assertGreater(idle["wakeups_per_s"], 0)
        r = warren("perf", "-x", "0", "-y", "1", "-u", q, "--idle-seconds", "-1")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--idle-seconds must be a number of seconds, 0 or more", r.stderr.decode())

    def test_perf_consumers_read_what_is_there(self):
        q = self.declare()
        self.ok(warren("publish", "--routing-key", q, "--confirm", "--size", "10", "--count", "300"))
        s = json.loads(self.ok(warren("perf", "-x", "0", "-y", "1", "-u", q, "--json")))
        self.assertEqual(s["received"], 300)
        self.assertEqual(queue_depth(q), 0)

    # ---- errors

    def test_refused_port(self):
        for driver in ("uv", "asio"):
            with self.subTest(driver=driver):
                r = warren("declare", "queue", "x", "--driver", driver, url="amqp://127.0.0.1:1")
                self.assertEqual(r.returncode, 1)
                self.assertEqual(r.stderr.decode(), "warren: connect 127.0.0.1:1: connection refused\n")

    def test_wrong_password(self):
        r = warren("declare", "queue", "x", url=f"amqp://guest:wrong@127.0.0.1:{PORT}")
        self.assertEqual(r.returncode, 1)
        self.assertTrue(r.stderr.decode().startswith("warren: access refused (403): ACCESS_REFUSED"), r.stderr)
        self.assertNotIn("wrong", r.stderr.decode())

    def test_failover_to_the_next_url_and_host(self):
        q = self.declare()
        self.ok(warren("publish", "--routing-key", q, "--body", "a", "--url", "amqp://127.0.0.1:1",
                       url=f"amqp://guest:guest@127.0.0.1:1,127.0.0.1:{PORT}"))
        self.assertEqual(self.ok(warren("consume", "--queue", q, "--count", "1")), "a\n")

    def test_vhost_in_the_url_is_read_as_rabbitmq_reads_it(self):
        q = unique("cli-vhost")
        self.addCleanup(lambda: warren("delete", "queue", q))
        self.ok(warren("declare", "queue", q, url=f"{URL}/%2f"))  # "/" named explicitly
        self.ok(warren("delete", "queue", q, url=URL))  # no path: also "/"
        r = warren("declare", "queue", q, url=f"{URL}/")  # the empty vhost, which does not exist
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr.decode(), "warren: connection closed (530): NOT_ALLOWED - vhost  not found "
                         f"(the URL \"amqp://127.0.0.1:{PORT}/\" names the empty vhost; "
                         "the default vhost \"/\" is written \"/%2f\")\n")

    def test_bad_url_parameter(self):
        r = warren("declare", "queue", "x", url=f"amqp://127.0.0.1:{PORT}?hearbeat=5")
        self.assertEqual(r.returncode, 2)
        self.assertTrue(r.stderr.decode().startswith("warren: invalid URL: unknown parameter hearbeat"), r.stderr)

    def test_bad_header_syntax(self):
        for spec, why in (("novalue", "expected K=V or K:type=V"), ("n:int=x", "not a signed 64-bit integer"),
                          ("b:bool=yes", "a bool is true or false"), ("k:date=1", "unknown type 'date' (string, int, bool, float)")):
            with self.subTest(spec=spec):
                r = warren("publish", "--header", spec, "--body", "x")
                self.assertEqual(r.returncode, 2)
                self.assertEqual(r.stderr.decode(), f"warren: invalid argument: --header '{spec}': {why}\n")

    def test_bad_property(self):
        r = warren("publish", "--property", "colour=red", "--body", "x")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr.decode(), "warren: invalid argument: --property 'colour=red': unknown property 'colour'\n")

    def test_unknown_subcommand_and_help(self):
        r = warren("frobnicate", url=None)
        self.assertEqual(r.returncode, 2)
        self.assertTrue(r.stderr.decode().startswith("warren: "))
        for cmd in ([], ["publish"], ["consume"], ["declare", "queue"], ["rpc", "call"], ["perf"]):
            with self.subTest(cmd=cmd):
                h = warren(*cmd, "--help", url=None)
                self.assertEqual(h.returncode, 0)
                self.assertIn("--url" if cmd else "publish", h.stdout.decode())

    def test_protocol_fault_is_reported_when_seen(self):
        broker = fake_broker.FakeBroker(fake_broker.corrupt_frame_end)
        self.addCleanup(broker.close)
        for driver in ("uv", "asio"):
            with self.subTest(driver=driver):
                start = time.monotonic()
                # A command that does not recover (consume would dial again, as after any loss).
                r = warren("rpc", "call", "--queue", "q", "--body", "x", "--timeout", "30", "--driver", driver,
                           url=f"amqp://127.0.0.1:{broker.port}")
                self.assertLess(time.monotonic() - start, 5)
                self.assertEqual(r.returncode, 1)
                self.assertEqual(r.stderr.decode(), "warren: protocol error: frame end byte 0x41 is not 0xCE\n")

    def test_heartbeat_detects_a_silent_broker(self):
        broker = fake_broker.FakeBroker(fake_broker.silent_after_open)
        self.addCleanup(broker.close)
        start = time.monotonic()
        # A command that does not recover (consume would dial again, as after any loss).
        r = warren("rpc", "call", "--queue", "q", "--body", "x", "--timeout", "30",
                   url=f"amqp://127.0.0.1:{broker.port}?heartbeat=1")
        elapsed = time.monotonic() - start
        self.assertEqual(r.returncode, 1)
        self.assertLess(elapsed, 4, "a 1 s heartbeat must notice silence within about 2 s")
        self.assertIn("heartbeat", r.stderr.decode())

    def test_a_subscription_the_broker_never_answers_is_made_again(self):
        # Issue 39: a quorum queue's leader (or a stream member) that hangs leaves a
        # basic.consume unanswered on a connection that lives; each command that subscribes as a
        # service (its first consume dropped by the proxy, so its request times out after 10 s)
        # says so once and subscribes again. Run side by side: one 10 s wait for all three. (A
        # stream read without --follow took the unanswered look for an empty stream: exit 0,
        # nothing printed.)
        proxy = fake_broker.SilentToFirstConsume(PORT)
        self.addCleanup(proxy.close)
        prefix = unique("again")
        queue = prefix + "-plain"
        with pika.BlockingConnection(pika.URLParameters(URL)) as c:
            ch = c.channel()
            ch.queue_declare(queue, arguments={"x-queue-type": "classic"}, durable=True)
            for i in range(2):
                ch.basic_publish("", queue, f"c{i}".encode())
        self.addCleanup(lambda: warren("delete", "queue", queue))
        self.assertEqual(warren("work", "put", "--queue", "jobs", "--prefix", prefix, stdin=b"w0\nw1\n").returncode, 0)
        self.assertEqual(warren("log", "append", "--log", "events", "--prefix", prefix, stdin=b"l0\nl1\n").returncode, 0)
        url = proxy.url + "/%2f"
        runs = {
            "consume": ["consume", "--queue", queue, "--count", "2", "--timeout", "40"],
            "work run": ["work", "run", "--queue", "jobs", "--prefix", prefix, "--exec", "cat >/dev/null", "--count", "2",
                         "--timeout", "40"],
            "log read": ["log", "read", "--log", "events", "--prefix", prefix, "--follow", "--count", "2"],
        }
        procs = {k: subprocess.Popen([WARREN, *a, "--url", url], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE) for k, a in runs.items()}
        results = {k: p.communicate(timeout=60) for k, p in procs.items()}
        self.assertEqual(proxy.dropped, 3, results)
        for k, (out, err) in results.items():
            with self.subTest(command=k):
                self.assertEqual(procs[k].returncode, 0, err)
                said = err.decode().splitlines()
                self.assertEqual(len(said), 1, said)
                self.assertIn("timed out", said[0])
                self.assertRegex(said[0], r"; (subscribing|reading) again$")
        self.assertEqual(results["consume"][0].decode().split(), ["c0", "c1"])
        self.assertEqual(len(results["work run"][0].decode().splitlines()), 2)
        self.assertEqual([line.split("\t")[1] for line in results["log read"][0].decode().splitlines()], ["l0", "l1"])
        names = subprocess.run([CTL, "-q", "list_queues", "name"], capture_output=True, text=True).stdout.split()
        for name in names:
            if name.startswith(prefix + "."):
                warren("delete", "queue", name)


if __name__ == "__main__":
    unittest.main(verbosity=2)
