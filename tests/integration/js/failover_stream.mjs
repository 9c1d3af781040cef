// Driven by tests/integration/test_js_client.py: one producer and one consumer (two clients
// of clients/js/tritonmq.js) on one topic through a failover the test causes. Prints one JSON
// object per line: {"acked": n} as acknowledgements come, then {"result": ...} at the end.
// Usage: node failover_stream.mjs <broker url> <topic> <records> <batch>
import { connect } from "../../../clients/js/tritonmq.js";

const [url, topic, total, batch] = [process.argv[2], process.argv[3], Number(process.argv[4]), Number(process.argv[5])];
const say = (obj) => process.stdout.write(`${JSON.stringify(obj)}\n`);

const states = [];
const consumer = await connect(url);
consumer.on("state", (e) => states.push(e.state));
const delivered = [];
const subscribed = [];
const sub = await consumer.subscribe(topic, (msg) => delivered.push([msg.ts, msg.value]), { from: "latest" });
sub.on("subscribed", (e) => subscribed.push(e));

const producer = await connect(url);
const acked = [];
const failed = [];
for (let i = 0; i < total; i += batch) {
  const values = Array.from({ length: Math.min(batch, total - i) }, (_, j) => `m-${String(i + j).padStart(6, "0")}`);
  const results = await Promise.allSettled(values.map((v) => producer.publish(topic, v)));
  results.forEach((r, j) => (r.status === "fulfilled" ? acked.push([r.value.ts, values[j]]) : failed.push([values[j], r.reason.code, r.reason.message])));
  say({ acked: acked.length });
}

const deadline = Date.now() + 60_000;
while (delivered.length < acked.length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
await new Promise((r) => setTimeout(r, 500)); // a duplicate would arrive now, if any
say({ result: { acked, failed, delivered, subscribed, states, subClosed: sub.closed, subError: sub.error?.message ?? null } });
await producer.close();
await consumer.close();
