// node produce.js QUEUE [BODY]: publishes one message to QUEUE through the default exchange on
// a confirm channel, with amqplib's OpenTelemetry instrumentation, whose "publish" span puts
// `traceparent` in the message's headers. Once the broker confirmed it, prints each span the
// instrumentation ended as a JSON line {"span": {...}} and exits 0; anything else exits 1.
// The broker: amqp://guest:guest@127.0.0.1:$RMQ_PORT (tests/cli/cli_env.py's URL).
'use strict';
const { amqp, provider, exporter, spanLine: json } = require('./traced_amqplib');

const [queue, body = 'traced by node'] = process.argv.slice(2);
if (!queue || !process.env.RMQ_PORT) {
  console.error('usage: RMQ_PORT=PORT node produce.js QUEUE [BODY]');
  process.exit(2);
}

(async () => {
  const conn = await amqp.connect(`amqp://guest:guest@127.0.0.1:${process.env.RMQ_PORT}`);
  conn.on('error', fail);
  const ch = await conn.createConfirmChannel();
  let returned = false;  // a return (no such queue) comes before the confirm
  ch.on('return', () => { returned = true; });
  await new Promise((resolve, reject) =>
    ch.publish('', queue, Buffer.from(body), { contentType: 'text/plain', mandatory: true },
      err => (err ? reject(new Error(`publish to ${queue} was nacked`)) : resolve())));
  if (returned) throw new Error(`publish to ${queue} was returned: no such queue`);
  await conn.close();
  await provider.forceFlush();
  const spans = exporter.getFinishedSpans();
  if (spans.length === 0) throw new Error('the instrumentation ended no span');
  for (const s of spans) console.log(json(s));
})().catch(fail);

function fail(err) {
  console.error(`produce.js: ${err.message}`);
  process.exit(1);
}
