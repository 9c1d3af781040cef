// The web console's view (clients/console/view.js): groups joined with their primary's stats,
// slots with their moves, and what the page reports as seen between two reads.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Watch, fmtBytes, groupRows, slotRows, subscriptionRows, tokenClaims, topicRows } from "../../console/view.js";
import { crc32 } from "../tritonmq.js";

const groups = (e1, p1) => ({
  g0: { epoch: e1, primary: p1, primary_url: `ws://${p1}`, isr: [p1], members: { a: "ws://a", b: "ws://b" } },
  g1: { epoch: 1, primary: "c", primary_url: "ws://c", isr: ["c", "d"], members: { c: "ws://c", d: "ws://d" } },
});
const slots = (moved = {}) => ({ slots: 4, owners: ["g0", "g1", "g0", "g1"], version: 1, moved });

test("a group shows its primary's figures, or none when it did not answer", () => {
  const stats = { g0: { records: 5, bytes: 900, max_bytes: 4096, rate: 2.5, subscriptions: [{ lag: 3 }, { lag: 7 }] } };
  const [g0, g1] = groupRows(groups(2, "a"), stats);
  assert.deepStrictEqual([g0.group, g0.epoch, g0.primary, g0.isr, g0.underReplicated, g0.maxLag], ["g0", 2, "a", ["a"], true, 7]);
  assert.deepStrictEqual([g1.records, g1.rate, g1.maxLag, g1.underReplicated], [null, null, null, false]);
});

test("slots show their owner and a move in progress; topics their slot", () => {
  const rows = slotRows(slots({ 2: { group: "g0", state: "moving", move: { to: "g1", until: null } } }));
  assert.deepStrictEqual(rows.map((r) => [r.slot, r.owner, r.state, r.to]), [
    [0, "g0", "normal", null], [1, "g1", "normal", null], [2, "g0", "moving", "g1"], [3, "g1", "normal", null],
  ]);
  const stats = { g0: { topics: [{ topic: "a", bytes: 1 }, { topic: "b", bytes: 9 }] } };
  const topics = topicRows(slots(), stats, crc32);
  assert.deepStrictEqual(topics.map((t) => [t.topic, t.slot]), [["b", crc32("b") % 4], ["a", crc32("a") % 4]]);
  const subs = subscriptionRows({ g1: { subscriptions: [{ topic: "t", subscription: "z" }, { topic: "t", subscription: "a" }] } });
  assert.deepStrictEqual(subs.map((s) => [s.subscription, s.group]), [["a", "g1"], ["z", "g1"]]);
});

test("the watch reports failovers and slot moves seen between reads, not what it found", () => {
  const w = new Watch();
  w.saw({ groups: groups(1, "a"), slots: slots() }, 1);
  assert.deepStrictEqual(w.events, []);
  w.saw({ groups: groups(2, "b"), slots: slots({ 0: { group: "g0", state: "moving", move: { to: "g1" } } }) }, 2);
  w.saw({ groups: groups(3, "b"), slots: { ...slots(), owners: ["g1", "g1", "g0", "g1"], moved: { 0: { group: "g1", era: 1, state: "normal", history: [{}] } } } }, 3);
  assert.deepStrictEqual(w.events.map((e) => e.text), [
    "g0: primary a → b (epoch 1 → 2)",
    "slot 0: moving g0 → g1",
    "g0: b re-elected (epoch 2 → 3)",
    "slot 0: now owned by g1 (era 1)",
  ]);
  assert.equal(w.failovers.get("g0"), 1);
});

test("a token's claims are read for display; a malformed one is null", () => {
  const body = Buffer.from(JSON.stringify({ sub: "root", admin: true })).toString("base64url");
  assert.deepStrictEqual(tokenClaims(`x.${body}.y`), { sub: "root", admin: true });
  assert.equal(tokenClaims("garbage"), null);
  assert.equal(fmtBytes(1536), "1.5 KiB");
});
