// Driven by tests/integration/test_js_client.py: one producer and two subscriptions (unnamed
// and durable) of clients/js/tritonmq.js on one topic whose slot the test moves between
// groups meanwhile, and a third (unnamed, "earliest") subscribing once every record is
// published: it reads every era still retained. Prints {"acked": n} as acknowledgements
// come, then {"result": ...}.
// Usage: node move_stream.mjs <broker url> <topic> <records> <batch> <pause ms>
import { connect } from "../../../clients/js/tritonmq.js";
import { produce, say, settle } from "./stream.mjs";

const [url, topic] = [process.argv[2], process.argv[3]];
const [total, batch, pause] = [Number(process.argv[4]), Number(process.argv[5]), Number(process.argv[6])];

const consumer = await connect(url);
const unnamed = [];
const durable = [];
const subs = [
  await consumer.subscribe(topic, (msg) => unnamed.push(msg.value), { from: "latest" }),
  await consumer.subscribe(topic, (msg) => durable.push(msg.value), { from: "earliest", subscription: "js-audit" }),
];

const producer = await connect(url);
const { acked, failed } = await produce(producer, topic, total, batch, pause, (ack, value) => value);

const late = [];
subs.push(await consumer.subscribe(topic, (msg) => late.push(msg.value), { from: "earliest" }));

await settle(() => Math.min(unnamed.length, durable.length, late.length) < acked.length);
say({ result: { acked, failed, unnamed, durable, late, errors: subs.map((s) => s.error?.message ?? null) } });
await producer.close();
await consumer.close();
