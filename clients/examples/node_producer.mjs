// Publish lines typed on stdin (or a few greetings) to a topic, and print where each landed.
//
//   node --experimental-websocket node_producer.mjs ws://127.0.0.1:7001 chat.lobby   # Node 20
//   node node_producer.mjs ws://127.0.0.1:7001 chat.lobby                            # Node 22+
//
// TRITONMQ_TOKEN: a JWT for brokers that require one (docs/security.md).
import { createInterface } from "node:readline";

import { connect } from "../js/tritonmq.js";

const [url = "ws://127.0.0.1:7001", topic = "chat.lobby"] = process.argv.slice(2);

const client = await connect(url, { token: process.env.TRITONMQ_TOKEN });
client.on("state", ({ state, reason }) => console.error(`[${state}] ${reason}`));

const lines = process.stdin.isTTY ? createInterface({ input: process.stdin }) : ["hello", "from", "node"];
for await (const line of lines) {
  const { ts, group } = await client.publish(topic, line); // resolves once every in-sync replica has it
  console.log(`${topic} ts=${ts} (group ${group}): ${line}`);
}
await client.close();
