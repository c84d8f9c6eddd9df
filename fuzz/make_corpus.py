#!/usr/bin/python3
"""Writes the seed corpus in fuzz/corpus/ from the frames pika encodes (tests/pika/pika_vectors.py):
whole frames for the frame decoder, method and header payloads, and the field tables inside them.
Run it again after changing the vectors; the output is committed."""
import os
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
vectors = subprocess.run(["/usr/bin/python3", os.path.join(here, "..", "tests", "pika", "pika_vectors.py")],
                         check=True, capture_output=True, text=True).stdout.splitlines()


def write(target, name, data):
    d = os.path.join(here, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


stream = b""
for i, line in enumerate(vectors):
    kind, hexdata, _ = line.split("\t", 2)
    frame = bytes.fromhex(hexdata)
    payload = frame[7:-1]
    stream += frame
    # Frame decoder inputs start with two control bytes: the cut step and the frame_max switch.
    write("frame_decoder", "%02d-%s" % (i, kind), bytes([i % 64, i % 2]) + frame)
    if kind == "method":
        write("method", "%02d" % i, payload)
        # A method whose last field is a table: take its content as a field-table seed.
        if payload[:4] in (bytes.fromhex("0032000a"), bytes.fromhex("000a000a"), bytes.fromhex("003c0014")):
            for start in range(len(payload) - 4):
                n = int.from_bytes(payload[start:start + 4], "big")
                if n > 8 and start + 4 + n <= len(payload):
                    write("field_table", "%02d-%d" % (i, start), payload[start + 4:start + 4 + n])
                    break
    elif kind == "header":
        write("content_header", "%02d" % i, payload)
write("frame_decoder", "all-in-one", bytes([7, 1]) + stream)
print("corpus written", file=sys.stderr)
