#!/usr/bin/python3
"""The pika side of the side-by-side benchmark (bench/compare.sh): the same three workloads as
`warren perf` and rabbitmqc-perf, written the way pika's documentation uses it, and the same
JSON summary line.
  pika_perf.py --port P --queue Q --workload publish|confirm|consume --count N [--size B]
Q must exist (compare.sh declares it, with the same arguments for every client).
  publish: N messages without confirms on a BlockingConnection, until the broker holds them
  confirm: N messages with at most 1,000 unconfirmed in flight, on a SelectConnection (a
           BlockingConnection waits for each confirm in turn, which is another workload)
  consume: N messages already in Q on a BlockingConnection, prefetch 500, a multiple ack
           every 100
CPU is this process's user + system time (getrusage) from the first publish or the
subscription to the end, as for the other clients.
"""
import argparse
import json
import resource
import sys
import time

import pika


def cpu_seconds():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def peak_rss_kb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def params(port):
    return pika.ConnectionParameters(host="127.0.0.1", port=port, heartbeat=0)


def queue_depth(channel, queue):
    return channel.queue_declare(queue=queue, passive=True).method.message_count


def publish(port, queue, count, body):
    conn = pika.BlockingConnection(params(port))
    ch = conn.channel()
    start = queue_depth(ch, queue)
    t0, c0 = time.monotonic(), cpu_seconds()
    for _ in range(count):
        ch.basic_publish(exchange="", routing_key=queue, body=body)
    while queue_depth(ch, queue) < start + count:
        time.sleep(0.005)
    seconds, cpu = time.monotonic() - t0, cpu_seconds() - c0
    conn.close()
    return {"sent": count, "confirmed": 0, "received": 0, "seconds": seconds, "cpu": cpu}


def confirm(port, queue, count, body, window=1000):
    state = {"sent": 0, "confirmed": 0, "t0": 0.0, "c0": 0.0, "seconds": 0.0, "cpu": 0.0, "error": None}
    conn_box = {}

    def publish_more(ch):
        while state["sent"] < count and state["sent"] - state["confirmed"] < window:
            ch.basic_publish(exchange="", routing_key=queue, body=body)
            state["sent"] += 1

    def on_confirm(frame, ch):
        method = frame.method
        if isinstance(method, pika.spec.Basic.Nack):
            state["error"] = "nacked"
            conn_box["conn"].close()
            return
        # Confirms come in order: a multiple confirm settles everything up to its tag.
        state["confirmed"] = method.delivery_tag
        # A full window is topped up once a quarter of it is free, as warren perf does.
        if state["sent"] - state["confirmed"] > window * 3 // 4 and state["sent"] < count:
            return
        if state["confirmed"] >= count:
            state["seconds"] = time.monotonic() - state["t0"]
            state["cpu"] = cpu_seconds() - state["c0"]
            conn_box["conn"].close()
            return
        publish_more(ch)

    def on_channel(ch):
        def on_select(_frame):
            state["t0"], state["c0"] = time.monotonic(), cpu_seconds()
            publish_more(ch)

        ch.confirm_delivery(lambda frame: on_confirm(frame, ch), callback=on_select)

    def on_open(conn):
        conn.channel(on_open_callback=on_channel)

    def on_failed(_conn, err):
        state["error"] = str(err)
        conn_box["conn"].ioloop.stop()

    conn = pika.SelectConnection(params(port), on_open_callback=on_open, on_open_error_callback=on_failed,
                                 on_close_callback=lambda c, reason: c.ioloop.stop())
    conn_box["conn"] = conn
    conn.ioloop.start()
    if state["error"] or state["confirmed"] < count:
        sys.exit(f"pika_perf: confirm: {state['error'] or 'the connection closed early'}")
    return {"sent": count, "confirmed": count, "received": 0, "seconds": state["seconds"], "cpu": state["cpu"]}


def consume(port, queue, count):
    conn = pika.BlockingConnection(params(port))
    ch = conn.channel()
    ch.basic_qos(prefetch_count=500)
    state = {"received": 0}

    def on_message(channel, method, _properties, _body):
        state["received"] += 1
        n = state["received"]
        if n % 100 == 0 or n == count:
            channel.basic_ack(delivery_tag=method.delivery_tag, multiple=True)
        if n == count:
            channel.stop_consuming()

    t0, c0 = time.monotonic(), cpu_seconds()
    ch.basic_consume(queue=queue, on_message_callback=on_message)
    ch.start_consuming()
    seconds, cpu = time.monotonic() - t0, cpu_seconds() - c0
    conn.close()
    return {"sent": 0, "confirmed": 0, "received": state["received"], "seconds": seconds, "cpu": cpu}


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--port", type=int, required=True)
    a.add_argument("--queue", required=True)
    a.add_argument("--workload", choices=["publish", "confirm", "consume"], required=True)
    a.add_argument("--count", type=int, required=True)
    a.add_argument("--size", type=int, default=64)
    args = a.parse_args()
    body = b"w" * args.size
    if args.workload == "publish":
        r = publish(args.port, args.queue, args.count, body)
    elif args.workload == "confirm":
        r = confirm(args.port, args.queue, args.count, body)
    else:
        r = consume(args.port, args.queue, args.count)
    moved = max(r["sent"], r["received"], 1)
    s = r["seconds"]
    print(json.dumps({
        "sent": r["sent"], "confirmed": r["confirmed"], "received": r["received"], "seconds": s,
        "send_rate": r["sent"] / s if s > 0 else 0.0, "receive_rate": r["received"] / s if s > 0 else 0.0,
        "cpu_seconds": r["cpu"], "cpu_us_per_msg": r["cpu"] * 1e6 / moved, "peak_rss_kb": peak_rss_kb(),
    }))


if __name__ == "__main__":
    main()
