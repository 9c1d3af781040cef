// Print every message of a topic; survives a failover without losing or repeating one.
//
//   node --experimental-websocket node_consumer.mjs ws://127.0.0.1:7001 chat.lobby [name]   # Node 20
//
// With a subscription name the subscription is durable: a restart resumes after what it
// acknowledged. TRITONMQ_TOKEN: a JWT for brokers that require one (docs/security.md).
import { connect } from "../js/tritonmq.js";

const [url = "ws://127.0.0.1:7001", topic = "chat.lobby", name] = process.argv.slice(2);

const client = await connect(url, { token: process.env.TRITONMQ_TOKEN });
client.on("state", ({ state, reason }) => console.error(`[${state}] ${reason}`));

const sub = await client.subscribe(
  topic,
  (msg) => console.log(`${msg.topic} ts=${msg.ts}: ${typeof msg.value === "string" ? msg.value : `<${msg.value.length} bytes>`}`),
  { subscription: name, from: name ? "latest" : "earliest", gaps: "skip" }, // acked when the callback returns
);
sub.on("subscribed", ({ resumed, recovered, skipped }) => {
  if (resumed) console.error(recovered ? "[resumed: nothing missed]" : `[resumed: skipped ts ${skipped.first}..${skipped.last}]`);
});
sub.on("closed", (err) => err && console.error(`subscription ended: ${err.code}: ${err.message}`));
process.on("SIGINT", () => client.close().then(() => process.exit(0)));
