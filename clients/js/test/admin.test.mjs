// BrokerConnection, the operators' connection the web console speaks through: requests
// answered by id after the hello, a broker's refusal as a typed error, a refused token
// failing what waits, a dropped connection failing what it carried and the next request
// opening a new one.
import assert from "node:assert/strict";
import { test } from "node:test";

import { BrokerConnection } from "../tritonmq.js";
import { FakeClock, FakeNet, settle } from "./fakes.mjs";

function setup(admin) {
  const net = new FakeNet();
  const b1 = net.add("ws://b1", { id: "b1" });
  b1.admin = admin;
  const clock = new FakeClock();
  const conn = new BrokerConnection("ws://b1", { WebSocket: net.WebSocket, clock, token: "t0k" });
  return { net, b1, clock, conn };
}

test("requests go out after the hello, with ids, and resolve with their answers", async () => {
  const { net, conn } = setup((f) =>
    f.op === "slotmove"
      ? { op: "slotinfo", slot: f.slot, owner: "g1", era: 0, state: "moving", to: f.to }
      : { op: "stats", group: "g1", broker: "b1", role: "primary", topics: [] },
  );
  const [moved, stats, meta] = await Promise.all([conn.moveSlot(3, "g2"), conn.stats(), conn.meta()]);
  assert.deepStrictEqual([moved.op, moved.slot, moved.owner, moved.state, moved.to], ["slotinfo", 3, "g1", "moving", "g2"]);
  assert.equal(stats.broker, "b1");
  assert.equal(meta.group, "g1");
  assert.ok(meta.groups.g1);
  const sent = net.sockets[0].sent;
  assert.deepStrictEqual(sent.map((f) => f.op), ["hello", "slotmove", "stats", "meta"]);
  assert.equal(sent[0].token, "t0k");
  assert.deepStrictEqual(sent.slice(1).map((f) => f.id), [1, 2, 3]);
  assert.equal(conn.hello.broker, "b1");
  assert.equal(net.sockets.length, 1); // one connection for every request
  conn.close();
});

test("a broker's refusal rejects with its code; the connection goes on", async () => {
  const { conn } = setup((f) =>
    f.op === "subdel"
      ? { op: "error", code: "FORBIDDEN", message: "'bob' may not administer subscriptions", retriable: false }
      : { op: "subinfo", topic: f.topic, subscription: f.subscription, action: "reset", to: 0, executed: f.execute },
  );
  await assert.rejects(conn.deleteSubscription("t", "s", { execute: true }), (e) => e.code === "FORBIDDEN" && /administer/.test(e.message));
  const info = await conn.resetSubscription("t", "s", "earliest");
  assert.equal(info.executed, false);
  conn.close();
});

test("a refused token rejects every waiting request with its code", async () => {
  const { net, conn } = setup(null);
  net.requiredToken = "another";
  await assert.rejects(conn.stats(), (e) => e.code === "UNAUTHENTICATED");
});

test("a dropped connection fails what it carried; the next request reconnects", async () => {
  const { net, b1, conn } = setup((f) => ({ op: "stats", group: "g1", broker: "b1", role: f.topic ? "primary" : "backup" }));
  b1.admin = null; // no answer: the request waits
  const waiting = conn.stats();
  await settle();
  net.sockets[0].drop();
  await assert.rejects(waiting, (e) => e.code === "UNAVAILABLE");
  b1.admin = () => ({ op: "stats", group: "g1", broker: "b1", role: "primary" });
  assert.equal((await conn.stats()).role, "primary");
  assert.equal(net.sockets.length, 2);
  conn.close();
});

test("an unanswered request fails with TIMEOUT", async () => {
  const { clock, conn } = setup(null);
  const waiting = conn.stats();
  const failed = assert.rejects(waiting, (e) => e.code === "TIMEOUT");
  await clock.advance(10_001);
  await failed;
  conn.close();
});
