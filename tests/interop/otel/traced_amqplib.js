// amqplib with OpenTelemetry's instrumentation registered first (it patches the require), its
// finished spans kept in memory; spanLine(span) is the JSON line produce.js and consume.js print
// for each: {"span": {traceId, spanId, parentSpanId, name, kind, attributes}}.
'use strict';
const { SpanKind } = require('@opentelemetry/api');
const { NodeTracerProvider, SimpleSpanProcessor, InMemorySpanExporter } = require('@opentelemetry/sdk-trace-node');
const { registerInstrumentations } = require('@opentelemetry/instrumentation');
const { AmqplibInstrumentation } = require('@opentelemetry/instrumentation-amqplib');

const exporter = new InMemorySpanExporter();
const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
provider.register();  // the AsyncLocalStorage context manager and the W3C propagator
registerInstrumentations({ tracerProvider: provider, instrumentations: [new AmqplibInstrumentation()] });
const amqp = require('amqplib');  // after registerInstrumentations: it patches the require

const spanLine = s => JSON.stringify({ span: {
  traceId: s.spanContext().traceId, spanId: s.spanContext().spanId,
  parentSpanId: s.parentSpanContext?.spanId ?? null, name: s.name, kind: SpanKind[s.kind],
  attributes: s.attributes } });

module.exports = { amqp, provider, exporter, spanLine };
