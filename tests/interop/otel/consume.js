// node consume.js QUEUE [TIMEOUT_SECONDS]: consumes one message from QUEUE (manual ack), with
// amqplib's OpenTelemetry instrumentation, whose "process" span takes its parent from the
// message's `traceparent` header and ends on the ack. Prints the message as a JSON line
// {"message": {"body", "headers"}} and each span the instrumentation ended as {"span": {...}},
// then exits 0; no message within the timeout (default 10 s), or no span, exits 1.
// The broker: amqp://guest:guest@127.0.0.1:$RMQ_PORT (tests/cli/cli_env.py's URL).
'use strict';
const { amqp, provider, exporter, spanLine: json } = require('./traced_amqplib');

const [queue, timeout = '10'] = process.argv.slice(2);
if (!queue || !process.env.RMQ_PORT) {
  console.error('usage: RMQ_PORT=PORT node consume.js QUEUE [TIMEOUT_SECONDS]');
  process.exit(2);
}
const text = v => (Buffer.isBuffer(v) ? v.toString() : v);

(async () => {
  const conn = await amqp.connect(`amqp://guest:guest@127.0.0.1:${process.env.RMQ_PORT}`);
  conn.on('error', fail);
  const ch = await conn.createChannel();
  ch.on('error', fail);  // a missing queue (404) closes the channel
  await ch.prefetch(1);
  let timer;
  const msg = await new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`no message on ${queue} within ${timeout} s`)), Number(timeout) * 1000);
    ch.consume(queue, m => {
      if (!m) return reject(new Error(`the broker cancelled the consumer on ${queue}`));
      ch.ack(m);  // the instrumentation ends the process span here
      resolve(m);
    }).catch(reject);
  });
  clearTimeout(timer);
  await conn.close();
  await provider.forceFlush();
  const headers = Object.fromEntries(Object.entries(msg.properties.headers ?? {}).map(([k, v]) => [k, text(v)]));
  console.log(JSON.stringify({ message: { body: msg.content.toString(), headers } }));
  const spans = exporter.getFinishedSpans();
  if (spans.length === 0) throw new Error('the instrumentation ended no span');
  for (const s of spans) console.log(json(s));
})().catch(fail);

function fail(err) {
  console.error(`consume.js: ${err.message}`);
  process.exit(1);
}
