// Driven by tests/integration/test_js_client.py: two JavaScript clients in one topic's
// presence, one leaving and coming back, then (after the test kills the primary) the member
// list rebuilt by the new primary. Prints JSON lines: {"ready": ...} then {"result": ...}.
// Usage: node presence_failover.mjs <broker url> <topic>
import { createInterface } from "node:readline";

import { connect } from "../../../clients/js/tritonmq.js";

const [url, topic] = process.argv.slice(2);
const say = (obj) => process.stdout.write(`${JSON.stringify(obj)}\n`);
const until = async (pred, what, ms = 60_000) => {
  const deadline = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
};
const infos = (sub) => [...sub.members.values()].map((m) => m.info).sort();

const a = await connect(url);
const b = await connect(url);
const events = [];
const alice = await a.subscribe(topic, () => {}, { presence: true, info: "Alice" });
for (const kind of ["join", "leave"]) alice.on(kind, (m) => events.push([kind, m.info, m.client]));
alice.on("members", (list) => events.push(["members", list.map((m) => m.info).sort()]));
alice.on("subscribed", (e) => events.push(["subscribed", e.resumed, e.recovered]));
await until(() => alice.members.size === 1, "alice's own entry");

let bob = await b.subscribe(topic, () => {}, { presence: true, info: "Bob" });
await until(() => infos(alice).includes("Bob"), "bob's join");
const listed = (await a.presence(topic)).map((m) => m.info).sort();
bob.close();
await until(() => !infos(alice).includes("Bob"), "bob's leave");
bob = await b.subscribe(topic, () => {}, { presence: true, info: "Bob" });
await until(() => infos(alice).includes("Bob"), "bob's second join");
const before = [...alice.members.keys()].sort();

say({ ready: true });
for await (const _ of createInterface({ input: process.stdin })) break; // the test killed the primary

await until(() => events.some((e) => e[0] === "subscribed" && e[1]), "alice's resubscription");
await until(() => infos(alice).length === 2 && [...alice.members.keys()].every((c) => !before.includes(c)), "the rebuilt member list");
say({ result: { listed, events, before, after: [...alice.members.keys()].sort(), members: infos(alice) } });
await a.close();
await b.close();
