"""W3C trace context through `warren pipe` with a real peer: node's amqplib with its OpenTelemetry
instrumentation (tests/interop/otel) publishes a traced message, `warren pipe` runs a stage
command on it and publishes the output, and an instrumented node consumer takes that. From the
spans both node processes export (an in-memory exporter, printed as JSON lines) and the
TRACEPARENT the stage command was handed: one trace from the producer's publish span to the
consumer's process span, and the consumer's parent is the stage's span, not the producer's.

Needs node (18.19+ or 20.6+) and the npm packages of tests/interop/otel/package-lock.json,
installed by tests/interop/otel/install.sh into tests/interop/otel/node_modules, or into
DIR/node_modules with WARREN_OTEL_NODE_MODULES=DIR/node_modules. Missing either fails."""
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

import pika

sys.path.insert(0, os.path.dirname(__file__))
from cli_env import WARREN, URL, require_warren_and_broker, unique  # noqa: E402

OTEL = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "interop", "otel"))
NODE_MODULES = os.environ.get("WARREN_OTEL_NODE_MODULES") or os.path.join(OTEL, "node_modules")
TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


def missing_packages():
    """The pinned packages of package.json not installed at their version in NODE_MODULES."""
    with open(os.path.join(OTEL, "package.json")) as f:
        pinned = json.load(f)["dependencies"]
    missing = []
    for name, version in pinned.items():
        try:
            with open(os.path.join(NODE_MODULES, name, "package.json")) as f:
                installed = json.load(f)["version"]
        except OSError:
            installed = None
        if installed != version:
            missing.append(f"{name}@{version} (found: {installed or 'none'})")
    return missing


class InteropOtel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_warren_and_broker()

    def setUp(self):
        self.node = shutil.which("node")
        if not self.node:
            self.fail("node is missing: install nodejs (18.19+ or 20.6+) and npm, then run tests/interop/otel/install.sh")
        if missing := missing_packages():
            self.fail(f"npm packages missing in {NODE_MODULES}: {', '.join(missing)}; "
                      f"run tests/interop/otel/install.sh (or set WARREN_OTEL_NODE_MODULES to where it installed them)")
        self.conn = pika.BlockingConnection(pika.URLParameters(URL + "/%2f"))
        self.addCleanup(self.conn.close)
        self.ch = self.conn.channel()

    def queue(self):
        q = unique("otel")
        self.ch.queue_declare(q)
        self.addCleanup(self.delete_queue, q)
        return q

    def delete_queue(self, q):  # on a connection of its own: a failed step may have closed self.ch
        with pika.BlockingConnection(pika.URLParameters(URL + "/%2f")) as c:
            c.channel().queue_delete(q)

    def node_run(self, script, *args):
        """Runs a script of tests/interop/otel; returns (the message it printed or None, its spans)."""
        env = dict(os.environ)
        if os.environ.get("WARREN_OTEL_NODE_MODULES"):
            env["NODE_PATH"] = NODE_MODULES
        r = subprocess.run([self.node, os.path.join(OTEL, script), *args], capture_output=True, text=True,
                           timeout=30, env=env, cwd=OTEL)
        self.assertEqual(r.returncode, 0, f"{script} failed: {r.stderr}")
        lines = [json.loads(line) for line in r.stdout.splitlines()]
        spans = [line["span"] for line in lines if "span" in line]
        self.assertTrue(spans, f"{script} printed no span: {r.stdout!r} {r.stderr!r}")
        message = next((line["message"] for line in lines if "message" in line), None)
        return message, spans

    def test_the_consumer_continues_the_trace_under_the_pipe_stages_span(self):
        src, out = self.queue(), self.queue()
        _, produced = self.node_run("produce.js", src, "traced by node")
        [producer] = [s for s in produced if s["kind"] == "PRODUCER"]
        self.assertEqual(self.ch.queue_declare(src, passive=True).method.message_count, 1)

        seen = os.path.join(tempfile.mkdtemp(), "traceparent")
        self.addCleanup(shutil.rmtree, os.path.dirname(seen))
        stage = f'printf "%s\\n" "$TRACEPARENT" >> {shlex.quote(seen)}; cat'
        pipe = subprocess.Popen([WARREN, "pipe", "--url", URL, "--from", src, "--to", "", "--routing-key", out,
                                 "--exec", stage, "--on-error", "stop", "--timeout", "60"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            message, consumed = self.node_run("consume.js", out, "10")  # waits up to 10 s for the output
        finally:
            pipe.send_signal(signal.SIGTERM)
            try:
                _, err = pipe.communicate(timeout=20)
            finally:
                if pipe.poll() is None:
                    pipe.kill()
        self.assertEqual((pipe.returncode, err.decode(errors="replace")), (0, ""))

        with open(seen) as f:
            lines = f.read().splitlines()
        self.assertEqual(len(lines), 1, f"the stage ran {len(lines)} times: {lines}")
        m = TRACEPARENT.match(lines[0])
        self.assertIsNotNone(m, f"the stage's TRACEPARENT: {lines[0]!r}")
        stage_trace, stage_span, stage_flags = m.groups()
        [consumer] = [s for s in consumed if s["kind"] == "CONSUMER"]
        self.assertEqual(consumer["name"], f"{out} process")
        self.assertEqual(message["body"], "traced by node")
        detail = f"producer {producer}, stage {lines[0]}, output headers {message['headers']}, consumer {consumer}"

        # One trace, from node through warren back to node.
        self.assertEqual(stage_trace, producer["traceId"], detail)
        self.assertEqual(consumer["traceId"], producer["traceId"], detail)
        # The stage ran in a span of its own under the producer's (sampled, as the producer's was).
        self.assertNotEqual(stage_span, producer["spanId"], detail)
        self.assertEqual(stage_flags, "01", detail)
        # The output names the stage's span, so the consumer's parent is the stage, not the producer.
        self.assertEqual(message["headers"].get("traceparent"), lines[0], detail)
        self.assertEqual(consumer["parentSpanId"], stage_span, detail)
        self.assertNotEqual(consumer["parentSpanId"], producer["spanId"], detail)


if __name__ == "__main__":
    unittest.main(verbosity=2)
