#!/usr/bin/python3
"""Frames encoded by pika (python3-pika, an implementation nobody here wrote), one per line:

    kind <TAB> pika's frame bytes in hex <TAB> what the frame says, in warren's printed form

The printed form is built here from the values handed to pika and pika's documented choice of
field types (str -> S, bytes -> x, bool -> t, int -> I or l, dict -> F, list -> A, None -> V,
Decimal -> D, datetime -> T), never from warren's output. The C++ side decodes pika's bytes,
compares the printed form, and re-encodes to pika's exact bytes.
"""
import datetime
import decimal
import sys

import pika.frame
import pika.spec as spec


def quote(data):
    if isinstance(data, str):
        data = data.encode("utf-8")
    out = '"'
    for b in data:
        if 0x20 <= b < 0x7F and b not in (0x22, 0x5C):
            out += chr(b)
        else:
            out += "\\x%02X" % b
    return out + '"'


def value(v):
    if isinstance(v, bool):
        return "t:" + ("true" if v else "false")
    if isinstance(v, int):
        return ("I:%d" if -(2**31) <= v < 2**31 else "l:%d") % v
    if isinstance(v, str):
        return "S:" + quote(v)
    if isinstance(v, bytes):
        return "x:" + quote(v)
    if isinstance(v, decimal.Decimal):
        v = v.normalize()
        exp = v.as_tuple().exponent
        scale = -exp if exp < 0 else 0
        return "D:%d:%d" % (scale, int(v * (decimal.Decimal(10) ** scale)))
    if isinstance(v, datetime.datetime):
        return "T:%d" % int(v.replace(tzinfo=datetime.timezone.utc).timestamp())
    if isinstance(v, dict):
        return "F:" + table(v)
    if isinstance(v, list):
        return "A:[" + ", ".join(value(x) for x in v) + "]"
    if v is None:
        return "V"
    raise TypeError(v)


def table(d):
    return "{" + ", ".join(quote(k) + ": " + value(v) for k, v in d.items()) + "}"


def field(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, (str, bytes)):
        return quote(v)
    if isinstance(v, dict):
        return table(v)
    if v is None:
        return "{}"
    raise TypeError(v)


HIDDEN = object()

# warren's name for each field, in wire order, with pika's attribute name where it differs.
# Reserved fields (ticket, capabilities, insist, out-of-band, ...) are not printed by warren.
FIELDS = {
    "Connection.Start": ["version_major", "version_minor", "server_properties", "mechanisms", "locales"],
    "Connection.StartOk": ["client_properties", "mechanism", ("response", HIDDEN), "locale"],
    "Connection.Secure": ["challenge"],
    "Connection.SecureOk": [("response", HIDDEN)],
    "Connection.Tune": ["channel_max", "frame_max", "heartbeat"],
    "Connection.TuneOk": ["channel_max", "frame_max", "heartbeat"],
    "Connection.Open": ["virtual_host"],
    "Connection.OpenOk": [],
    "Connection.Close": ["reply_code", "reply_text", "class_id", "method_id"],
    "Connection.CloseOk": [],
    "Connection.Blocked": ["reason"],
    "Connection.Unblocked": [],
    "Channel.Open": [],
    "Channel.OpenOk": [],
    "Channel.Flow": ["active"],
    "Channel.FlowOk": ["active"],
    "Channel.Close": ["reply_code", "reply_text", "class_id", "method_id"],
    "Channel.CloseOk": [],
    "Exchange.Declare": ["exchange", "type", "passive", "durable", "auto_delete", "internal",
                         ("no_wait", "nowait"), "arguments"],
    "Exchange.DeclareOk": [],
    "Exchange.Delete": ["exchange", "if_unused", ("no_wait", "nowait")],
    "Exchange.DeleteOk": [],
    "Exchange.Bind": ["destination", "source", "routing_key", ("no_wait", "nowait"), "arguments"],
    "Exchange.BindOk": [],
    "Exchange.Unbind": ["destination", "source", "routing_key", ("no_wait", "nowait"), "arguments"],
    "Exchange.UnbindOk": [],
    "Queue.Declare": ["queue", "passive", "durable", "exclusive", "auto_delete", ("no_wait", "nowait"),
                      "arguments"],
    "Queue.DeclareOk": ["queue", "message_count", "consumer_count"],
    "Queue.Bind": ["queue", "exchange", "routing_key", ("no_wait", "nowait"), "arguments"],
    "Queue.BindOk": [],
    "Queue.Purge": ["queue", ("no_wait", "nowait")],
    "Queue.PurgeOk": ["message_count"],
    "Queue.Delete": ["queue", "if_unused", "if_empty", ("no_wait", "nowait")],
    "Queue.DeleteOk": ["message_count"],
    "Queue.Unbind": ["queue", "exchange", "routing_key", "arguments"],
    "Queue.UnbindOk": [],
    "Basic.Qos": ["prefetch_size", "prefetch_count", ("global", "global_qos")],
    "Basic.QosOk": [],
    "Basic.Consume": ["queue", "consumer_tag", "no_local", "no_ack", "exclusive", ("no_wait", "nowait"),
                      "arguments"],
    "Basic.ConsumeOk": ["consumer_tag"],
    "Basic.Cancel": ["consumer_tag", ("no_wait", "nowait")],
    "Basic.CancelOk": ["consumer_tag"],
    "Basic.Publish": ["exchange", "routing_key", "mandatory", "immediate"],
    "Basic.Return": ["reply_code", "reply_text", "exchange", "routing_key"],
    "Basic.Deliver": ["consumer_tag", "delivery_tag", "redelivered", "exchange", "routing_key"],
    "Basic.Get": ["queue", "no_ack"],
    "Basic.GetOk": ["delivery_tag", "redelivered", "exchange", "routing_key", "message_count"],
    "Basic.GetEmpty": [],
    "Basic.Ack": ["delivery_tag", "multiple"],
    "Basic.Reject": ["delivery_tag", "requeue"],
    "Basic.Recover": ["requeue"],
    "Basic.RecoverOk": [],
    "Basic.Nack": ["delivery_tag", "multiple", "requeue"],
    "Confirm.Select": [("no_wait", "nowait")],
    "Confirm.SelectOk": [],
}

WARREN_NAME = {
    "Connection.StartOk": "connection.start-ok", "Connection.SecureOk": "connection.secure-ok",
    "Connection.TuneOk": "connection.tune-ok", "Connection.OpenOk": "connection.open-ok",
    "Connection.CloseOk": "connection.close-ok", "Channel.OpenOk": "channel.open-ok",
    "Channel.FlowOk": "channel.flow-ok", "Channel.CloseOk": "channel.close-ok",
    "Exchange.DeclareOk": "exchange.declare-ok", "Exchange.DeleteOk": "exchange.delete-ok",
    "Exchange.BindOk": "exchange.bind-ok", "Exchange.UnbindOk": "exchange.unbind-ok",
    "Queue.DeclareOk": "queue.declare-ok", "Queue.BindOk": "queue.bind-ok",
    "Queue.PurgeOk": "queue.purge-ok", "Queue.DeleteOk": "queue.delete-ok",
    "Queue.UnbindOk": "queue.unbind-ok", "Basic.QosOk": "basic.qos-ok",
    "Basic.ConsumeOk": "basic.consume-ok", "Basic.CancelOk": "basic.cancel-ok",
    "Basic.GetOk": "basic.get-ok", "Basic.GetEmpty": "basic.get-empty",
    "Basic.RecoverOk": "basic.recover-ok", "Confirm.SelectOk": "confirm.select-ok",
}

ARGS = {"x-max-length": 10, "x-queue-type": "quorum", "x-big": 2**40, "flag": False,
        "nested": {"list": [1, "two", None, {"deep": True}], "bytes": b"\x00\xff"},
        "price": decimal.Decimal("3.14"), "when": datetime.datetime(2024, 1, 2, 3, 4, 5),
        "void": None, "utf8": "h\u00e9llo"}
SERVER = {"product": "RabbitMQ", "version": "3.10.8",
          "capabilities": {"publisher_confirms": True, "basic.nack": True}}

METHODS = [
    spec.Connection.Start(0, 9, SERVER, "PLAIN AMQPLAIN", "en_US"),
    spec.Connection.StartOk({"product": "pika", "capabilities": {"basic.nack": True}}, "PLAIN",
                            "\0guest\0guest", "en_US"),
    spec.Connection.Secure("challenge"),
    spec.Connection.SecureOk("answer"),
    spec.Connection.Tune(2047, 131072, 60),
    spec.Connection.TuneOk(1000, 65536, 30),
    spec.Connection.Open("/prod"),
    spec.Connection.OpenOk(),
    spec.Connection.Close(320, "CONNECTION_FORCED - shutdown", 0, 0),
    spec.Connection.CloseOk(),
    spec.Connection.Blocked("low on memory"),
    spec.Connection.Unblocked(),
    spec.Channel.Open(),
    spec.Channel.OpenOk(),
    spec.Channel.Flow(True),
    spec.Channel.FlowOk(False),
    spec.Channel.Close(406, "PRECONDITION_FAILED - inequivalent arg", 50, 10),
    spec.Channel.CloseOk(),
    spec.Exchange.Declare(0, "logs", "topic", False, True, True, False, False, {"alternate-exchange": "ae"}),
    spec.Exchange.DeclareOk(),
    spec.Exchange.Delete(0, "logs", True, True),
    spec.Exchange.DeleteOk(),
    spec.Exchange.Bind(0, "dst", "src", "a.*.c", False, {"x-match": "all"}),
    spec.Exchange.BindOk(),
    spec.Exchange.Unbind(0, "dst", "src", "a.#", True, {}),
    spec.Exchange.UnbindOk(),
    spec.Queue.Declare(0, "jobs", False, True, False, True, False, ARGS),
    spec.Queue.DeclareOk("amq.gen-abc", 42, 3),
    spec.Queue.Bind(0, "jobs", "logs", "error.#", True, {"k": 1}),
    spec.Queue.BindOk(),
    spec.Queue.Purge(0, "jobs", True),
    spec.Queue.PurgeOk(17),
    spec.Queue.Delete(0, "jobs", True, True, False),
    spec.Queue.DeleteOk(9),
    spec.Queue.Unbind(0, "jobs", "logs", "error.#", {"k": "v"}),
    spec.Queue.UnbindOk(),
    spec.Basic.Qos(0, 250, True),
    spec.Basic.QosOk(),
    spec.Basic.Consume(0, "jobs", "ctag-1", False, True, True, False, {"x-priority": 5}),
    spec.Basic.ConsumeOk("amq.ctag-xyz"),
    spec.Basic.Cancel("ctag-1", True),
    spec.Basic.CancelOk("ctag-1"),
    spec.Basic.Publish(0, "logs", "error.disk", True, False),
    spec.Basic.Return(312, "NO_ROUTE", "logs", "nowhere"),
    spec.Basic.Deliver("amq.ctag-xyz", 2**40 + 5, True, "logs", "error.disk"),
    spec.Basic.Get(0, "jobs", True),
    spec.Basic.GetOk(77, False, "", "jobs", 1234),
    spec.Basic.GetEmpty(),
    spec.Basic.Ack(2**33, True),
    spec.Basic.Reject(5, False),
    spec.Basic.Recover(True),
    spec.Basic.RecoverOk(),
    spec.Basic.Nack(6, True, False),
    spec.Confirm.Select(False),
    spec.Confirm.SelectOk(),
]


def method_text(m):
    parts = []
    for f in FIELDS[m.NAME]:
        name, attr = (f, f) if isinstance(f, str) else f
        if attr is HIDDEN:
            parts.append(name + "=<hidden>")
        else:
            parts.append(name + "=" + field(getattr(m, attr)))
    wname = WARREN_NAME.get(m.NAME, m.NAME.lower())
    return wname + "(" + ", ".join(parts) + ")"


PROPS = [
    spec.BasicProperties(),
    spec.BasicProperties(delivery_mode=2, correlation_id="r-1", reply_to="amq.rabbitmq.reply-to"),
    spec.BasicProperties(content_type="application/json", content_encoding="gzip",
                         headers={"attempt": 3, "trace": {"id": "abc", "hops": [1, 2]}, "none": None},
                         delivery_mode=1, priority=9, correlation_id="c", reply_to="r",
                         expiration="60000", message_id="m-1", timestamp=1700000000, type="event",
                         user_id="guest", app_id="warren-tests", cluster_id="cl"),
]
PROP_FIELDS = ["content_type", "content_encoding", "headers", "delivery_mode", "priority",
               "correlation_id", "reply_to", "expiration", "message_id", "timestamp", "type",
               "user_id", "app_id", "cluster_id"]


def props_text(p):
    parts = []
    for name in PROP_FIELDS:
        v = getattr(p, name)
        if v is None:
            continue
        parts.append(name + "=" + (table(v) if isinstance(v, dict) else field(v)))
    return "{" + ", ".join(parts) + "}"


def main():
    out = sys.stdout
    for channel, m in enumerate(METHODS):
        frame = pika.frame.Method(channel % 3, m).marshal()
        out.write("method\t%s\t%s\n" % (frame.hex(), method_text(m)))
    for size, p in zip((0, 64, 2**33), PROPS):
        frame = pika.frame.Header(1, size, p).marshal()
        out.write("header\t%s\t%d %s\n" % (frame.hex(), size, props_text(p)))
    # A method frame pika wrote, followed by a body, as a broker would send a delivery.
    body = pika.frame.Body(1, b"hello \x00 world").marshal()
    out.write("body\t%s\t%s\n" % (body.hex(), quote(b"hello \x00 world")))


if __name__ == "__main__":
    main()
