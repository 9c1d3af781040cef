// The client (protocol and shell together) against fake brokers, a fake socket and a fake
// clock: batching, retries with the same uuids, redirects, resume and redelivery drop, the
// `recovered` flag and skipped ranges, acks after the callback, state events.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Client, TritonError, toBytes } from "../tritonmq.js";
import { FakeClock, FakeNet, settle } from "./fakes.mjs";

const hex = (b) => Array.from(toBytes(b), (x) => x.toString(16).padStart(2, "0")).join("");

async function setup(brokers = [["ws://b1", { id: "b1" }]], options = {}, prepare = (_net) => {}) {
  const net = new FakeNet();
  for (const [url, o] of brokers) net.add(url, o);
  prepare(net); // before the client's first read of the cluster
  const clock = new FakeClock();
  const client = new Client(brokers[0][0], { WebSocket: net.WebSocket, clock, random: () => 0.5, ...options });
  const states = [];
  client.on("state", (e) => states.push(e));
  const opened = client._open();
  await clock.advance(0);
  await opened;
  return { net, clock, client, states };
}

/** Run `promise` while the fake clock moves in small steps, up to `ms`. */
async function within(clock, ms, promise) {
  let done = false;
  const p = promise.finally(() => {
    done = true;
  });
  for (let t = 0; t < ms && !done; t += 10) await clock.advance(10);
  assert.ok(done, `not settled within ${ms} ms of fake time`);
  return p;
}

test("publishes in one turn go out as one batch; a batch is cut at batchSize", async () => {
  const { net, clock, client } = await setup([["ws://b1", { id: "b1" }]], { batchSize: 3 });
  const acks = Promise.all(["a", "b", "c", "d", "e"].map((v) => client.publish("chat", v)));
  const got = await within(clock, 100, acks);
  assert.deepStrictEqual(got.map((a) => a.ts), [1, 2, 3, 4, 5]);
  assert.deepStrictEqual(got[0], { topic: "chat", ts: 1, group: "g1" });
  const pubs = net.sent("pub");
  assert.deepStrictEqual(pubs.map((f) => [f.id, f.records.map((r) => r[2])]), [[1, ["a", "b", "c"]], [2, ["d", "e"]]]);
  await client.close();
});

test("after a dropped connection every unacknowledged batch is resent in order, same ids and uuids", async () => {
  const { net, clock, client } = await setup([["ws://b1", { id: "b1" }]]);
  const b1 = net.brokers.get("ws://b1");
  b1.autoAck = false;
  const first = client.publish("chat", "one");
  await clock.advance(0);
  const second = client.publish("chat", new Uint8Array([0xff, 0x00]));
  await clock.advance(0);
  assert.equal(b1.pubs.length, 2);
  const before = b1.pubs.map(([, f]) => [f.id, f.records.map((r) => hex(r[0]))]);
  b1.ack(b1.pubs[0][0], b1.pubs[0][1]); // the first was stamped, its puback lost with the connection
  b1.pubs[0][0].drop();
  b1.autoAck = true;
  b1.pubs.length = 0;
  const acks = await within(clock, 2000, Promise.all([first, second]));
  const after = b1.pubs.map(([, f]) => [f.id, f.records.map((r) => hex(r[0]))]);
  assert.deepStrictEqual(after, before);
  assert.deepStrictEqual(acks.map((a) => a.ts), [1, 2]); // the first kept its ts: stored once
  assert.equal(net.log.length, 2);
  await client.close();
});

test("a retriable refusal drops the connection and resends from the refused batch on, in order", async () => {
  const { net, clock, client } = await setup([["ws://b1", { id: "b1" }]], { linger: 0 });
  const b1 = net.brokers.get("ws://b1");
  let refusals = 1;
  b1.refuse = (f) => (f.op === "pub" && f.id === 1 && refusals-- > 0 ? { code: "NOT_ENOUGH_REPLICAS" } : null);
  const acks = await within(clock, 3000, Promise.all([client.publish("t", "x"), client.publish("t", "y")]));
  assert.deepStrictEqual(acks.map((a) => a.ts), [1, 2]);
  assert.deepStrictEqual(net.log.map(([, , r]) => r[2]), ["x", "y"]);
  await client.close();
});

test("a backup redirects to its primary; NOT_PRIMARY with a hint is followed", async () => {
  const { net, clock, client } = await setup(
    [
      ["ws://b2", { id: "b2", role: "backup" }],
      ["ws://b1", { id: "b1" }],
    ],
    {},
    (net) => {
      net.stalePrimary.g1 = "ws://b2"; // cluster reads name a backup as the primary
    },
  );
  const ack = await within(clock, 2000, client.publish("chat", "hi"));
  assert.equal(ack.ts, 1);
  const b1 = net.brokers.get("ws://b1");
  assert.equal(b1.pubs.length, 1);
  assert.deepStrictEqual(net.sockets.filter((s) => s.sent.some((f) => f.op === "hello" && !s.sent.some((g) => g.op === "meta"))).map((s) => s.url).slice(0, 2), ["ws://b2", "ws://b1"]);
  delete net.stalePrimary.g1;
  // the primary moves: b1 refuses with NOT_PRIMARY naming b3
  const b3 = net.add("ws://b3", { id: "b3", epoch: 2 });
  b1.role = "backup";
  b1.refuse = (f) => (f.op === "pub" ? { code: "NOT_PRIMARY", primary: "ws://b3" } : null);
  const ack2 = await within(clock, 2000, client.publish("chat", "again"));
  assert.equal(ack2.ts, 2);
  assert.equal(b3.pubs.length, 1);
  await client.close();
});

test("WRONG_GROUP re-reads the slot map and publishes the same uuids to the owner", async () => {
  const net = new FakeNet();
  net.add("ws://a1", { id: "a1", group: "g1" });
  net.add("ws://c1", { id: "c1", group: "g2" });
  net.owners = ["g1"]; // stale: every topic in g1
  const clock = new FakeClock();
  const client = new Client("ws://a1", { WebSocket: net.WebSocket, clock, random: () => 0.5 });
  const opened = client._open();
  await clock.advance(0);
  await opened;
  const a1 = net.brokers.get("ws://a1");
  a1.refuse = (f) => (f.op === "pub" ? { code: "WRONG_GROUP", group: "g2" } : null);
  net.owners = ["g2"]; // what the next read says
  const ack = await within(clock, 2000, client.publish("orders", "o-1"));
  assert.equal(ack.group, "g2");
  const c1 = net.brokers.get("ws://c1");
  assert.equal(hex(c1.pubs[0][1].records[0][0]), hex(a1.pubs[0][1].records[0][0]));
  await client.close();
});

test("during a slot move a publish follows the group the refusal names, not the stale map", async () => {
  const net = new FakeNet();
  net.add("ws://a1", { id: "a1", group: "g1" });
  net.add("ws://c1", { id: "c1", group: "g2" });
  net.owners = ["g1"]; // the map names the old owner until the move completes
  const clock = new FakeClock();
  const client = new Client("ws://a1", { WebSocket: net.WebSocket, clock, random: () => 0.5 });
  const opened = client._open();
  await clock.advance(0);
  await opened;
  const a1 = net.brokers.get("ws://a1");
  const c1 = net.brokers.get("ws://c1");
  a1.refuse = (f) => (f.op === "pub" ? { code: "WRONG_GROUP", group: "g2" } : null);
  let early = 2; // the new group is not ready at first: "moving here"
  c1.refuse = (f) => (f.op === "pub" && early-- > 0 ? { code: "UNAVAILABLE", message: "slot 0 is moving here; retry" } : null);
  const ack = await within(clock, 5000, client.publish("orders", "o-1"));
  assert.equal(ack.group, "g2");
  assert.equal(a1.pubs.length, 1, "the old group was asked once");
  assert.equal(hex(c1.pubs.at(-1)[1].records[0][0]), hex(a1.pubs[0][1].records[0][0]));
  await client.close();
});

/** Two groups: g1 (broker a1) and g2 (broker c1); the first cluster read puts every topic in g1. */
async function twoGroups() {
  const net = new FakeNet();
  const a1 = net.add("ws://a1", { id: "a1", group: "g1" });
  const c1 = net.add("ws://c1", { id: "c1", group: "g2" });
  net.owners = ["g1"];
  const clock = new FakeClock();
  const client = new Client("ws://a1", { WebSocket: net.WebSocket, clock, random: () => 0.5 });
  const opened = client._open();
  await clock.advance(0);
  await opened;
  return { net, clock, client, a1, c1 };
}

/** Move the fake clock 1 ms at a time until `cond()` holds (at most `ms`). */
async function until(clock, ms, cond) {
  for (let t = 0; t < ms && !cond(); t++) await clock.advance(1);
  assert.ok(cond(), `not within ${ms} ms of fake time`);
}

test("a publish made while an earlier one of its topic re-routes is stored after it", async () => {
  // the earlier one is refused at g1 and then at g2 (groups disagree for a moment while a
  // slot moves) and pauses 50 ms before its next re-route; a later publish, routed by the
  // re-read map straight to g2, must not be stored ahead of it (docs/protocol.md §9)
  const { net, clock, client, a1, c1 } = await twoGroups();
  a1.refuse = (f) => (f.op === "pub" ? { code: "WRONG_GROUP", group: "g2" } : null);
  let disagree = 1;
  c1.refuse = (f) => (f.op === "pub" && disagree-- > 0 ? { code: "WRONG_GROUP", group: "g2" } : null);
  net.owners = ["g2"];
  const first = client.publish("orders", "o-1");
  await until(clock, 40, () => c1.pubs.length === 1); // refused at g2 once: pausing
  assert.equal(client.groupOf("orders"), "g2");
  const second = client.publish("orders", "o-2");
  const acks = await within(clock, 2000, Promise.all([first, second]));
  assert.deepStrictEqual(net.log.map(([, , r]) => r[2]), ["o-1", "o-2"], "stored in publish order");
  assert.deepStrictEqual(acks.map((a) => [a.group, a.ts]), [["g2", 1], ["g2", 2]]);
  await client.close();
});

test("a publish routed to another group waits until the earlier ones of its topic are acknowledged", async () => {
  const { net, clock, client, a1, c1 } = await twoGroups();
  a1.autoAck = false;
  const first = client.publish("orders", "o-1");
  await until(clock, 40, () => a1.pubs.length === 1);
  net.owners = ["g2"]; // the slot moved; the client reads it before the first is acknowledged
  await within(clock, 1000, client.refresh());
  const second = client.publish("orders", "o-2");
  const other = client.publish("other", "x"); // another topic does not wait
  await within(clock, 1000, other);
  assert.deepStrictEqual(c1.pubs.map(([, f]) => f.topic), ["other"], "o-2 waits for o-1");
  a1.ack(...a1.pubs[0]);
  await within(clock, 1000, Promise.all([first, second]));
  assert.deepStrictEqual(net.log.map(([, , r]) => r[2]), ["x", "o-1", "o-2"], "o-1 stamped at its ack, o-2 after it");
  await client.close();
});

test("close() fails a publish waiting for an earlier one of its topic with CLOSED", async () => {
  const { net, clock, client, a1, c1 } = await twoGroups();
  a1.autoAck = false;
  const first = client.publish("orders", "o-1");
  await until(clock, 40, () => a1.pubs.length === 1);
  net.owners = ["g2"];
  await within(clock, 1000, client.refresh());
  const second = client.publish("orders", "o-2");
  await clock.advance(10);
  await client.close();
  for (const p of [first, second]) await assert.rejects(p, (e) => e instanceof TritonError && e.code === "CLOSED");
  assert.equal(c1.pubs.length, 0);
});

test("an ack says the era of a record the slot's previous group stored, as the puback's eras do", async () => {
  const { net, clock, client } = await setup([["ws://b1", { id: "b1", group: "g2" }]]);
  const b1 = net.brokers.get("ws://b1");
  b1.autoAck = false;
  const acked = client.publishBatch("orders", ["o-1", "o-2"]);
  await clock.advance(0);
  const [ws, f] = b1.pubs[0];
  ws.deliver({ op: "puback", id: f.id, ts: [1043, 88], group: "g2", eras: [0, 1] });
  const acks = await within(clock, 1000, acked);
  assert.deepStrictEqual(acks, [
    { topic: "orders", ts: 1043, group: "g2", era: 0 },
    { topic: "orders", ts: 88, group: "g2", era: 1 },
  ]);
  b1.autoAck = true;
  assert.deepStrictEqual(await within(clock, 1000, client.publish("orders", "o-3")), { topic: "orders", ts: 1, group: "g2" });
  await client.close();
});

test("resume after a failover: from the last delivered ts, redeliveries dropped, recovered: true", async () => {
  const { net, clock, client, states } = await setup([
    ["ws://b1", { id: "b1" }],
    ["ws://b2", { id: "b2", role: "backup" }],
  ]);
  const got = [];
  const events = [];
  const subP = client.subscribe("chat", (m) => got.push([m.ts, m.value]), { from: "earliest" });
  const sub = await within(clock, 1000, subP);
  sub.on("subscribed", (e) => events.push(e));
  const b1 = net.brokers.get("ws://b1");
  const ws = b1.subs[0][0];
  assert.deepStrictEqual(b1.subs[0][1], { op: "sub", sid: 1, topic: "chat", from: "earliest" });
  ws.deliver({ op: "deliver", sid: 1, topic: "chat", records: [[5, "u5", null, "five", null], [6, "u6", null, new Uint8Array([0xff]), null]] });
  await clock.advance(10);
  assert.deepStrictEqual(got, [[5, "five"], [6, new Uint8Array([0xff])]]);
  assert.deepStrictEqual(b1.acks.at(-1), { op: "ack", sid: 1, ts: 6 });
  // failover: b1 dies, b2 becomes primary and redelivers 6 (its offset lagged) then 7
  b1.up = false;
  b1.role = "backup";
  const b2 = net.brokers.get("ws://b2");
  b2.role = "primary";
  b2.epoch = 2;
  ws.drop();
  await clock.advance(10);
  assert.ok(states.some((s) => s.state === "disconnected" && s.reason.includes("dropped")), JSON.stringify(states));
  await within(clock, 2000, new Promise((r) => (b2.subs.length ? r() : sub.on("subscribed", r))));
  assert.deepStrictEqual(b2.subs[0][1], { op: "sub", sid: 1, topic: "chat", from: 7, resume: true });
  b2.subs[0][0].deliver({ op: "deliver", sid: 1, topic: "chat", records: [[6, "u6", null, "dup", null], [7, "u7", null, "seven", null]] });
  await clock.advance(10);
  assert.deepStrictEqual(got.map(([ts]) => ts), [5, 6, 7]);
  assert.deepStrictEqual(events, [{ next: 7, resumed: true, recovered: true, skipped: null }]);
  assert.deepStrictEqual(states.at(-1), { state: "connected", reason: "", group: "g1" }); // no stale reason
  await client.close();
});

test("a resume that finds records purged: skipped range with gaps 'skip', PURGED error by default", async () => {
  for (const gaps of ["skip", "fail"]) {
    const { net, clock, client } = await setup([["ws://b1", { id: "b1" }]]);
    const b1 = net.brokers.get("ws://b1");
    const events = [];
    const closed = [];
    const sub = await within(clock, 1000, client.subscribe("chat", () => {}, { from: 1, gaps }));
    sub.on("subscribed", (e) => events.push(e));
    sub.on("closed", (e) => closed.push(e));
    b1.subs[0][0].deliver({ op: "deliver", sid: 1, topic: "chat", records: [[3, "u", null, "v", null]] });
    await clock.advance(10);
    let once = true;
    b1.refuse = (f) => (f.op === "sub" && f.resume && once ? ((once = false), { code: "PURGED", first: 4, last: 20 }) : null);
    b1.subs[0][0].drop();
    await clock.advance(1000);
    if (gaps === "skip") {
      assert.deepStrictEqual(events, [{ next: 21, resumed: true, recovered: false, skipped: { first: 4, last: 20 } }]);
      assert.deepStrictEqual(b1.subs.at(-1)[1], { op: "sub", sid: 1, topic: "chat", from: 21, resume: true });
      assert.equal(sub.closed, false);
    } else {
      assert.equal(closed.length, 1);
      assert.ok(closed[0] instanceof TritonError);
      assert.deepStrictEqual([closed[0].code, closed[0].first, closed[0].last], ["PURGED", 4, 20]);
      assert.equal(sub.closed, true);
    }
    await client.close();
  }
});

test("a record is acknowledged only after the callback's promise resolves", async () => {
  const { net, clock, client } = await setup();
  let release;
  const gate = new Promise((r) => (release = r));
  const seen = [];
  await within(clock, 1000, client.subscribe("chat", async (m) => {
    seen.push(m.ts);
    await gate;
  }));
  const b1 = net.brokers.get("ws://b1");
  b1.subs[0][0].deliver({ op: "deliver", sid: 1, topic: "chat", records: [[1, "u", null, "a", null], [2, "u", null, "b", null]] });
  await clock.advance(50);
  assert.deepStrictEqual(seen, [1]);
  assert.equal(b1.acks.length, 0);
  release();
  await clock.advance(50);
  assert.deepStrictEqual(seen, [1, 2]);
  assert.deepStrictEqual(b1.acks.at(-1), { op: "ack", sid: 1, ts: 2 });
  await client.close();
});

test("close() fails pending publishes with CLOSED and reports disconnected", async () => {
  const { net, clock, client, states } = await setup();
  net.brokers.get("ws://b1").autoAck = false;
  const p = client.publish("t", "x");
  await clock.advance(0);
  await client.close();
  await assert.rejects(p, (e) => e instanceof TritonError && e.code === "CLOSED");
  assert.equal(states.at(-1).state, "disconnected");
  await assert.rejects(client.publish("t", "y"), (e) => e.code === "CLOSED");
});

test("bad arguments are CONFIG errors", async () => {
  const { client } = await setup();
  await assert.rejects(client.publish("t", 42), (e) => e.code === "CONFIG");
  await assert.rejects(client.publish("t", "\ud800"), (e) => e.code === "CONFIG");
  assert.throws(() => client.subscribe("t", () => {}, { from: -1 }), (e) => e.code === "CONFIG");
  assert.throws(() => client.subscribe("t", () => {}, { mode: "shared" }), (e) => e.code === "CONFIG");
  assert.throws(() => new Client("http://x"), (e) => e.code === "CONFIG");
  await client.close();
});

test("a refused token fails connect with UNAUTHENTICATED; the right one connects", async () => {
  const net = new FakeNet();
  net.add("ws://b1", { id: "b1" });
  net.requiredToken = "good";
  const clock = new FakeClock();
  const bad = new Client("ws://b1", { WebSocket: net.WebSocket, clock, token: "bad" });
  const opened = bad._open();
  opened.catch(() => {});
  await clock.advance(0);
  await assert.rejects(opened, (e) => e.code === "UNAUTHENTICATED");
  const good = new Client("ws://b1", { WebSocket: net.WebSocket, clock, token: "good" });
  const ok = good._open();
  await clock.advance(0);
  await ok;
  const ack = await within(clock, 1000, good.publish("t", "x"));
  assert.equal(ack.ts, 1);
  assert.ok(net.sent("hello").every((f) => f.token === "good" || f.token === "bad"));
  await good.close();
});

test("no reachable broker: connect fails with UNAVAILABLE after connectTimeout", async () => {
  const net = new FakeNet();
  const clock = new FakeClock();
  const client = new Client("ws://nowhere", { WebSocket: net.WebSocket, clock, connectTimeout: 2000 });
  const opened = client._open();
  opened.catch(() => {});
  await clock.advance(3000);
  await settle();
  await assert.rejects(opened, (e) => e.code === "UNAVAILABLE");
});

test("presence: members after subok, join and leave as others come and go, rebuilt after a failover", async () => {
  const { net, clock, client } = await setup([
    ["ws://b1", { id: "b1" }],
    ["ws://b2", { id: "b2", role: "backup" }],
  ]);
  const other = new Client("ws://b1", { WebSocket: net.WebSocket, clock, random: () => 0.5 });
  const opened = other._open();
  await clock.advance(0);
  await opened;
  const seen = [];
  const alice = await within(clock, 1000, client.subscribe("room", () => {}, { presence: true, info: "Alice" }));
  alice.on("join", (m) => seen.push(["join", m.info]));
  alice.on("leave", (m) => seen.push(["leave", m.info]));
  alice.on("members", (list) => seen.push(["members", list.map((m) => m.info)]));
  await clock.advance(10);
  assert.deepStrictEqual([...alice.members.values()].map((m) => m.info), ["Alice"]);
  const bob = await within(clock, 1000, other.subscribe("room", () => {}, { presence: true, info: "Bob" }));
  await clock.advance(10);
  assert.deepStrictEqual(seen, [["join", "Bob"]]);
  assert.deepStrictEqual([...alice.members.values()].map((m) => m.info), ["Alice", "Bob"]);
  assert.deepStrictEqual((await within(clock, 1000, bob.presence())).map((m) => m.info), ["Alice", "Bob"]);
  bob.close();
  await clock.advance(10);
  assert.deepStrictEqual(seen.at(-1), ["leave", "Bob"]);
  assert.deepStrictEqual([...alice.members.values()].map((m) => m.info), ["Alice"]);
  // failover: the new primary knows nobody until the clients re-send their subs with presence
  const b1 = net.brokers.get("ws://b1");
  const b2 = net.brokers.get("ws://b2");
  b1.up = false;
  b1.role = "backup";
  b2.role = "primary";
  b2.epoch = 2;
  for (const s of b1.sockets()) s.drop();
  await clock.advance(1000);
  assert.deepStrictEqual(b2.subs.map(([, f]) => [f.presence, f.info]), [[true, "Alice"]]);
  assert.deepStrictEqual(seen.at(-1), ["members", ["Alice"]]);
  await client.close();
  await other.close();
});

test("info without presence is a CONFIG error", async () => {
  const { client } = await setup();
  assert.throws(() => client.subscribe("t", () => {}, { info: "x" }), (e) => e.code === "CONFIG");
  await client.close();
});

test("a topic name outside the rule is a CONFIG error, patterns included (clients/vectors/topic_names.json)", async () => {
  const { readFileSync } = await import("node:fs");
  const vectors = JSON.parse(readFileSync(new URL("../../vectors/topic_names.json", import.meta.url), "utf8"));
  const expand = (n) => (/^x-\d+$/.test(n) ? "x".repeat(Number(n.slice(2))) : n);
  const { topicProblem } = await import("../tritonmq.js");
  for (const name of vectors.valid) assert.equal(topicProblem(expand(name)), null, name);
  for (const { name, rule } of vectors.invalid) {
    const problem = topicProblem(expand(name));
    assert.ok(problem !== null && problem.includes(rule), `${JSON.stringify(name)}: ${problem}`);
  }
  const { client } = await setup();
  assert.throws(() => client.subscribe("chat.*", () => {}), (e) => e instanceof TritonError && e.code === "CONFIG" && /pattern/.test(e.message));
  await assert.rejects(client.publish("chat.>", "x"), (e) => e.code === "CONFIG" && e.message.includes("'>'"));
  await client.close();
});
