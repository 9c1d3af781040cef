// Driven by tests/integration/test_js_client.py: one producer and one consumer (two clients
// of clients/js/tritonmq.js) on one topic through a failover the test causes. Prints one JSON
// object per line: {"acked": n} as acknowledgements come, then {"result": ...} at the end.
// Usage: node failover_stream.mjs <broker url> <topic> <records> <batch>
import { connect } from "../../../clients/js/tritonmq.js";
import { produce, say, settle } from "./stream.mjs";

const [url, topic, total, batch] = [process.argv[2], process.argv[3], Number(process.argv[4]), Number(process.argv[5])];

const states = [];
const consumer = await connect(url);
consumer.on("state", (e) => states.push(e.state));
const delivered = [];
const subscribed = [];
const sub = await consumer.subscribe(topic, (msg) => delivered.push([msg.ts, msg.value]), { from: "latest" });
sub.on("subscribed", (e) => subscribed.push(e));

const producer = await connect(url);
const { acked, failed } = await produce(producer, topic, total, batch, 0, (ack, value) => [ack.ts, value]);
await settle(() => delivered.length < acked.length);
say({ result: { acked, failed, delivered, subscribed, states, subClosed: sub.closed, subError: sub.error?.message ?? null } });
await producer.close();
await consumer.close();
