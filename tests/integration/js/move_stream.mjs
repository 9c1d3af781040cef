// Driven by tests/integration/test_js_client.py: one producer and two subscriptions (unnamed
// and durable) of clients/js/tritonmq.js on one topic whose slot the test moves between
// groups meanwhile, and a third (unnamed, "earliest") subscribing once every record is
// published: it reads every era still retained. Prints {"acked": n} as acknowledgements
// come, then {"result": ...}.
// Usage: node move_stream.mjs <broker url> <topic> <records> <batch> <pause ms>
import { connect } from "../../../clients/js/tritonmq.js";

const [url, topic] = [process.argv[2], process.argv[3]];
const [total, batch, pause] = [Number(process.argv[4]), Number(process.argv[5]), Number(process.argv[6])];
const say = (obj) => process.stdout.write(`${JSON.stringify(obj)}\n`);

const consumer = await connect(url);
const unnamed = [];
const durable = [];
const subs = [
  await consumer.subscribe(topic, (msg) => unnamed.push(msg.value), { from: "latest" }),
  await consumer.subscribe(topic, (msg) => durable.push(msg.value), { from: "earliest", subscription: "js-audit" }),
];

const producer = await connect(url);
const acked = [];
const failed = [];
for (let i = 0; i < total; i += batch) {
  const values = Array.from({ length: Math.min(batch, total - i) }, (_, j) => `m-${String(i + j).padStart(6, "0")}`);
  const results = await Promise.allSettled(values.map((v) => producer.publish(topic, v)));
  results.forEach((r, j) => (r.status === "fulfilled" ? acked.push(values[j]) : failed.push([values[j], r.reason.code, r.reason.message])));
  say({ acked: acked.length });
  await new Promise((r) => setTimeout(r, pause));
}

const late = [];
subs.push(await consumer.subscribe(topic, (msg) => late.push(msg.value), { from: "earliest" }));

const deadline = Date.now() + 60_000;
const behind = () => Math.min(unnamed.length, durable.length, late.length) < acked.length;
while (behind() && Date.now() < deadline) {
  await new Promise((r) => setTimeout(r, 50));
}
await new Promise((r) => setTimeout(r, 500)); // a duplicate would arrive now, if any
say({ result: { acked, failed, unnamed, durable, late, errors: subs.map((s) => s.error?.message ?? null) } });
await producer.close();
await consumer.close();
