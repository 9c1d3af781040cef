// The pure ClientProtocol (no socket, no timer): backoff with jitter, handshake rules,
// probing a silent primary, acks kept across a disconnect. Events in with `now`, actions out.
import assert from "node:assert/strict";
import { test } from "node:test";

import { ClientProtocol, State } from "../tritonmq.js";

const of = (actions, type) => actions.filter((a) => a.type === type);
const meta = (role = "primary", extra = {}) => ({ op: "meta", id: 0, group: "g1", role, epoch: 1, primary_url: null, ...extra });

/** Connect `p` to `url` at `now`: resolve, open, meta. Returns every action. */
function connect(p, url, now) {
  const out = [...p.handle({ type: "tick" }, now)];
  out.push(...p.handle({ type: "resolved", urls: [url] }, now));
  out.push(...p.handle({ type: "opened", conn: p.conn }, now));
  out.push(...p.handle({ type: "frame", conn: p.conn, frame: meta() }, now));
  return out;
}

test("backoff doubles from 20 ms to 500 ms, scaled by a jitter factor in [0.5, 1)", () => {
  for (const [r, factor] of [[0, 0.5], [0.999999, 0.9999995]]) {
    const p = new ClientProtocol({}, () => r);
    const delays = [0, 1, 2, 3, 4, 5, 6, 40].map((n) => p.backoffDelay(n));
    const base = [20, 40, 80, 160, 320, 500, 500, 500];
    delays.forEach((d, i) => assert.ok(Math.abs(d - base[i] * factor) < 1e-6, `${i}: ${d}`));
    delays.forEach((d, i) => assert.ok(d >= base[i] * 0.5 && d < base[i], `${i}: ${d} outside [${base[i] / 2}, ${base[i]})`));
  }
});

test("every candidate failing waits the backoff, then reads the cluster again; a handshake resets it", () => {
  const rolls = [0.2, 0.8, 0.4, 0.6];
  const p = new ClientProtocol({}, () => rolls.shift() ?? 0.5);
  let now = 0;
  const waits = [];
  for (let round = 0; round < 4; round++) {
    const out = p.handle({ type: "tick" }, now);
    assert.equal(of(out, "resolve").length, 1, `round ${round} resolves`);
    const failed = p.handle({ type: "resolved", urls: ["ws://a"] }, now);
    assert.deepStrictEqual(of(failed, "connect").map((a) => a.url), ["ws://a"]);
    const after = p.handle({ type: "failed", conn: p.conn, error: "refused" }, now);
    assert.equal(p.state, State.DISCONNECTED);
    const [wake] = of(after, "wakeAt");
    waits.push(wake.at - now);
    assert.equal(of(p.handle({ type: "tick" }, wake.at - 1), "resolve").length, 0, "not before the backoff");
    now = wake.at;
  }
  assert.deepStrictEqual(waits.map((w) => Math.round(w * 1000) / 1000), [20 * 0.6, 40 * 0.9, 80 * 0.7, 160 * 0.8]);
  assert.match(p.lastError, /ws:\/\/a: refused/);
  connect(p, "ws://a", now);
  assert.equal(p.state, State.CONNECTED);
  p.handle({ type: "closed", conn: p.conn, reason: "gone" }, now);
  p.handle({ type: "tick" }, now);
  p.handle({ type: "resolved", urls: [] }, now);
  assert.equal(p.backoffDelay(0), p.backoffDelay(0)); // pure: same roll, same delay
  assert.ok(p._reconnectAt - now <= 20, "failures were reset by the handshake");
});

test("a backup's meta sends the client to the primary it names", () => {
  const p = new ClientProtocol({ group: "g1" }, () => 0.5);
  p.handle({ type: "tick" }, 0);
  p.handle({ type: "resolved", urls: ["ws://b2", "ws://b3"] }, 0);
  p.handle({ type: "opened", conn: 1 }, 0);
  const out = p.handle({ type: "frame", conn: 1, frame: meta("backup", { primary_url: "ws://b1" }) }, 0);
  assert.deepStrictEqual(out.filter((a) => a.type === "disconnect" || a.type === "connect"), [
    { type: "disconnect", conn: 1 },
    { type: "connect", conn: 2, url: "ws://b1" },
  ]);
  assert.match(p.lastError, /not the primary/);
});

test("a meta of another group is refused even when it says primary", () => {
  const p = new ClientProtocol({ group: "g1" }, () => 0.5);
  p.handle({ type: "tick" }, 0);
  p.handle({ type: "resolved", urls: ["ws://x", "ws://y"] }, 0);
  p.handle({ type: "opened", conn: 1 }, 0);
  const out = p.handle({ type: "frame", conn: 1, frame: meta("primary", { group: "g9", primary_url: "ws://z" }) }, 0);
  assert.deepStrictEqual(of(out, "connect").map((a) => a.url), ["ws://y"]);
});

test("a batch waiting probeAfter asks the other brokers; a newer epoch elsewhere moves the connection and resends", () => {
  const p = new ClientProtocol({}, () => 0.5);
  connect(p, "ws://b1", 0);
  p.handle({ type: "publish", ticket: 1, topic: "t", records: [["u1", null, "v", null]] }, 0);
  const sent = p.handle({ type: "tick" }, 0);
  assert.deepStrictEqual(of(sent, "send").map((a) => a.frame.op), ["pub"]);
  assert.deepStrictEqual(of(p.handle({ type: "tick" }, 999), "probe"), []);
  assert.deepStrictEqual(of(p.handle({ type: "tick" }, 1000), "probe"), [{ type: "probe", exclude: "ws://b1" }]);
  const moved = p.handle({ type: "epochSeen", epoch: 2, primaryUrl: "ws://b2" }, 1001);
  assert.deepStrictEqual(of(moved, "disconnect"), [{ type: "disconnect", conn: 1 }]);
  const again = p.handle({ type: "tick" }, 1001);
  assert.deepStrictEqual(of(again, "connect"), [{ type: "connect", conn: 2, url: "ws://b2" }]);
  p.handle({ type: "opened", conn: 2 }, 1002);
  const resent = p.handle({ type: "frame", conn: 2, frame: meta("primary", { epoch: 2 }) }, 1002);
  assert.deepStrictEqual(of(resent, "send").map((a) => [a.frame.op, a.frame.id, a.frame.records?.[0][0]]), [["pub", 1, "u1"]]);
});

test("acks made while disconnected are kept and sent after the resubscription", () => {
  const p = new ClientProtocol({}, () => 0.5);
  connect(p, "ws://b1", 0);
  p.handle({ type: "subscribe", sid: 1, topic: "t", name: null, start: "latest" }, 0);
  p.handle({ type: "frame", conn: 1, frame: { op: "subok", sid: 1, next: 5 } }, 0);
  p.handle({ type: "frame", conn: 1, frame: { op: "deliver", sid: 1, topic: "t", records: [[5, "u", null, "a", null]] } }, 0);
  p.handle({ type: "closed", conn: 1, reason: "gone" }, 1);
  p.handle({ type: "ack", sid: 1, ts: 5 }, 1);
  assert.deepStrictEqual(of(p.handle({ type: "tick" }, 1), "send"), []);
  p.handle({ type: "resolved", urls: ["ws://b2"] }, 1);
  p.handle({ type: "opened", conn: 2 }, 2);
  const out = p.handle({ type: "frame", conn: 2, frame: meta() }, 2);
  assert.deepStrictEqual(of(out, "send").map((a) => a.frame), [
    { op: "sub", sid: 1, topic: "t", from: 6, resume: true },
    { op: "ack", sid: 1, ts: 5 },
  ]);
});

test("a silent primary gets a liveness hello when the client only subscribes", () => {
  const p = new ClientProtocol({}, () => 0.5);
  connect(p, "ws://b1", 0);
  p.handle({ type: "subscribe", sid: 1, topic: "t", name: null, start: "latest" }, 0);
  p.handle({ type: "frame", conn: 1, frame: { op: "subok", sid: 1, next: 1 } }, 0);
  const out = p.handle({ type: "tick" }, 1000);
  assert.deepStrictEqual(of(out, "send").map((a) => a.frame.op), ["hello"]);
  assert.deepStrictEqual(of(p.handle({ type: "tick" }, 2000), "probe"), [{ type: "probe", exclude: "ws://b1" }]);
});

test("a publish not acknowledged within the timeout fails with TIMEOUT naming the last error", () => {
  const p = new ClientProtocol({ timeout: 5000 }, () => 0.5);
  p.handle({ type: "publish", ticket: 7, topic: "t", records: [["u", null, "v", null]] }, 0);
  p.handle({ type: "tick" }, 0);
  p.handle({ type: "resolveFailed", error: "nobody home" }, 0);
  const out = p.handle({ type: "tick" }, 5000);
  const [failed] = of(out, "publishFailed");
  assert.equal(failed.ticket, 7);
  assert.equal(failed.error.code, "TIMEOUT");
  assert.match(failed.error.message, /nobody home/);
});

test("shared: a resubscription carries member, acked and held; an acknowledged record coming back is acked again, not handed over", () => {
  const p = new ClientProtocol({}, () => 0.25);
  connect(p, "ws://b1", 0);
  const first = p.handle({ type: "subscribe", sid: 2, topic: "jobs", name: "workers", start: "earliest", mode: "shared" }, 0);
  const [sub] = of(first, "send").map((a) => a.frame);
  assert.deepStrictEqual(sub, { op: "sub", sid: 2, topic: "jobs", from: "earliest", subscription: "workers", mode: "shared", member: "4000000040000000" });
  p.handle({ type: "frame", conn: 1, frame: { op: "subok", sid: 2, next: 1 } }, 0);
  const got = p.handle({ type: "frame", conn: 1, frame: { op: "deliver", sid: 2, topic: "jobs", records: [[1, "u", null, "a", null], [2, "u", null, "b", null]] } }, 0);
  assert.deepStrictEqual(of(got, "deliver")[0].records.map((r) => r[0]), [1, 2]);
  p.handle({ type: "ack", sid: 2, ts: 1 }, 0);
  p.handle({ type: "tick" }, 0);
  p.handle({ type: "closed", conn: 1, reason: "gone" }, 1);
  p.handle({ type: "tick" }, 1);
  p.handle({ type: "resolved", urls: ["ws://b2"] }, 1);
  p.handle({ type: "opened", conn: 2 }, 1);
  const again = of(p.handle({ type: "frame", conn: 2, frame: meta() }, 1), "send").map((a) => a.frame);
  assert.deepStrictEqual(again, [{ op: "sub", sid: 2, topic: "jobs", from: "latest", subscription: "workers", mode: "shared", resume: true, acked: [1], held: [2], member: "4000000040000000" }]);
  // the new primary hands out 1 (acknowledged) and 2 (held from the old connection) again, and 3
  const out = p.handle({ type: "frame", conn: 2, frame: { op: "deliver", sid: 2, topic: "jobs", records: [[1, "u", null, "a", null], [2, "u", null, "b", null], [3, "u", null, "c", null]] } }, 2);
  assert.deepStrictEqual(of(out, "deliver")[0].records.map((r) => r[0]), [3]);
  assert.deepStrictEqual(of(p.handle({ type: "tick" }, 2), "send").map((a) => a.frame), [{ op: "ack", sid: 2, ts: 1 }]);
});

// --- a moved slot (docs/replication.md M3-M5; docs/protocol.md C6, C7) ---------------------

const rec = (ts) => [ts, "u", null, "v", null];

test("a moved slot's positions are (era, ts): an older era's records and acks never pass a newer one", () => {
  const p = new ClientProtocol({}, () => 0.5);
  connect(p, "ws://b1", 0);
  p.handle({ type: "subscribe", sid: 1, topic: "t", name: null, start: "latest" }, 0);
  p.handle({ type: "frame", conn: 1, frame: { op: "subok", sid: 1, next: 10 } }, 0);
  const deliver = (records, era) => of(p.handle({ type: "frame", conn: 1, frame: { op: "deliver", sid: 1, topic: "t", records, era } }, 0), "deliver");
  assert.deepStrictEqual(deliver([rec(10), rec(11)]).map((a) => [a.era, a.records.length]), [[0, 2]]);
  assert.deepStrictEqual(deliver([rec(3)], 1).map((a) => [a.era, a.records[0][0]]), [[1, 3]], "another group's ts");
  assert.deepStrictEqual(deliver([rec(12)]), [], "era 0 is behind it");
  p.handle({ type: "ack", sid: 1, ts: 11, era: 0 }, 0);
  assert.deepStrictEqual(of(p.handle({ type: "tick" }, 0), "send"), [], "an ack of an era left behind");
  p.handle({ type: "ack", sid: 1, ts: 3, era: 1 }, 0);
  assert.deepStrictEqual(of(p.handle({ type: "tick" }, 0), "send").map((a) => a.frame), [{ op: "ack", sid: 1, ts: 3 }]);
  p.handle({ type: "closed", conn: 1, reason: "gone" }, 1);
  p.handle({ type: "tick" }, 1);
  p.handle({ type: "resolved", urls: ["ws://b2"] }, 1);
  p.handle({ type: "opened", conn: 2 }, 2);
  const out = p.handle({ type: "frame", conn: 2, frame: meta() }, 2);
  assert.deepStrictEqual(of(out, "send").map((a) => a.frame), [{ op: "sub", sid: 1, topic: "t", from: 4, resume: true, era: 1 }]);
  const again = p.handle({ type: "frame", conn: 2, frame: { op: "subok", sid: 1, next: 4, era: 1 } }, 2);
  assert.deepStrictEqual(of(again, "send").map((a) => a.frame), [{ op: "ack", sid: 1, ts: 3 }], "acked again on subok");
});

test("a puback's eras (a moved slot) reach publishDone record by record; a puback without them adds none", () => {
  const p = new ClientProtocol({ batchSize: 2 }, () => 0.5);
  connect(p, "ws://b1", 0);
  const r = (u) => [u, null, "v", null];
  const sent = of(p.handle({ type: "publish", ticket: 1, topic: "t", records: [r("u1"), r("u2"), r("u3")] }, 0), "send");
  assert.deepStrictEqual(sent.map((a) => a.frame.id), [1, 2], "one ticket, two batches");
  const puback = (id, ts, eras) => p.handle({ type: "frame", conn: 1, frame: { op: "puback", id, ts, group: "g2", eras } }, 0);
  assert.deepStrictEqual(of(puback(2, [9]), "publishDone"), []);
  // the first batch was a retry straddling the seal: g1's ts 1043 of era 0, then g2's 8 of era 1
  assert.deepStrictEqual(of(puback(1, [1043, 8], [0, 1]), "publishDone"), [
    { type: "publishDone", ticket: 1, ts: [1043, 8, 9], group: "g2", eras: [0, 1, -1] },
  ]);
  p.handle({ type: "publish", ticket: 2, topic: "t", records: [r("u4")] }, 0);
  of(p.handle({ type: "tick" }, 0), "send");
  assert.deepStrictEqual(of(puback(3, [10]), "publishDone"), [{ type: "publishDone", ticket: 2, ts: [10], group: "g2" }]);
});

test("publishes of one topic asked at different durability levels go in different batches, each saying its level", () => {
  const p = new ClientProtocol({}, () => 0.5);
  connect(p, "ws://b1", 0);
  const r = (u) => [u, null, "v", null];
  p.handle({ type: "publish", ticket: 1, topic: "t", records: [r("u1")], durability: "synced" }, 0);
  p.handle({ type: "publish", ticket: 2, topic: "t", records: [r("u2")] }, 0);
  p.handle({ type: "publish", ticket: 3, topic: "t", records: [r("u3")], durability: "synced" }, 0);
  const sent = of(p.handle({ type: "tick" }, 0), "send").map((a) => [a.frame.durability ?? "", a.frame.records.length]);
  assert.deepStrictEqual(sent.sort(), [["", 1], ["synced", 2]]);
});

test("WRONG_GROUP moves a subscription: unnamed from (era, after + 1), named from its offset", () => {
  const p = new ClientProtocol({}, () => 0.5);
  connect(p, "ws://b1", 0);
  p.handle({ type: "subscribe", sid: 1, topic: "t", name: null, start: "latest" }, 0);
  p.handle({ type: "subscribe", sid: 2, topic: "t", name: "audit", start: "earliest" }, 0);
  p.handle({ type: "frame", conn: 1, frame: { op: "subok", sid: 1, next: 10 } }, 0);
  const wrong = (sid, extra) => ({ op: "error", code: "WRONG_GROUP", message: "on", retriable: true, sid, group: "g2", ...extra });
  let out = p.handle({ type: "frame", conn: 1, frame: wrong(1, { era: 1, after: 7 }) }, 0);
  assert.deepStrictEqual(of(out, "subscriptionMoved"), [{ type: "subscriptionMoved", sid: 1, group: "g2", era: 1, after: 7, resume: true }]);
  out = p.handle({ type: "frame", conn: 1, frame: wrong(2, {}) }, 0);
  assert.deepStrictEqual(of(out, "subscriptionMoved"), [{ type: "subscriptionMoved", sid: 2, group: "g2", era: null, after: null, resume: false }]);
  // at the other group's connection it goes on from there, resumed
  const q = new ClientProtocol({}, () => 0.5);
  connect(q, "ws://c1", 0);
  out = q.handle({ type: "subscribe", sid: 1, topic: "t", name: null, start: 8, era: 1, resume: true }, 0);
  assert.deepStrictEqual(of(out, "send").map((a) => a.frame), [{ op: "sub", sid: 1, topic: "t", from: 8, resume: true, era: 1 }]);
});

test("a subscription sent on before its first subok goes on as a new start, not resumed", () => {
  // "earliest" on a moved slot is sent to era 0's group and on past eras nothing is left
  // of: handed nothing yet, a resume there would be told PURGED for records simply gone
  const p = new ClientProtocol({}, () => 0.5);
  connect(p, "ws://b1", 0);
  p.handle({ type: "subscribe", sid: 1, topic: "t", name: null, start: "earliest" }, 0);
  const wrong = { op: "error", code: "WRONG_GROUP", message: "era 0", retriable: true, sid: 1, group: "g1", era: 0, after: 0 };
  const out = p.handle({ type: "frame", conn: 1, frame: wrong }, 0);
  assert.deepStrictEqual(of(out, "subscriptionMoved"), [{ type: "subscriptionMoved", sid: 1, group: "g1", era: 0, after: 0, resume: false }]);
  const q = new ClientProtocol({}, () => 0.5);
  connect(q, "ws://c1", 0);
  const sent = q.handle({ type: "subscribe", sid: 1, topic: "t", name: null, start: 4, era: 1, resume: false }, 0);
  assert.deepStrictEqual(of(sent, "send").map((a) => a.frame), [{ op: "sub", sid: 1, topic: "t", from: 4, era: 1 }]);
});

test("WRONG_GROUP fails every later batch of its topic, sent or not, and none is resent", () => {
  // simulator seed 116: the broker holds back the batches behind a WRONG_GROUP refusal on
  // that connection; they fail with it, in call order, for the caller to re-route behind
  // it, and a new connection must not resend one ahead of the refused batch
  const p = new ClientProtocol({ batchSize: 2, maxInFlight: 2, linger: 10 }, () => 0.5);
  connect(p, "ws://b1", 0);
  const r = (u) => [u, null, "v", null];
  for (const [ticket, topic] of [[1, "t"], [2, "t"], [3, "other"], [4, "t"]]) {
    p.handle({ type: "publish", ticket, topic, records: [r(`u${ticket}a`), r(`u${ticket}b`)] }, 0);
  }
  p.handle({ type: "publish", ticket: 5, topic: "t", records: [r("u5")] }, 0); // buffered, not yet a batch
  const wrong = { op: "error", id: 1, code: "WRONG_GROUP", message: "there", retriable: true, group: "g2" };
  const out = p.handle({ type: "frame", conn: 1, frame: wrong }, 0);
  assert.deepStrictEqual(of(out, "publishFailed").map((a) => [a.ticket, a.error.code]), [[1, "WRONG_GROUP"], [2, "WRONG_GROUP"], [4, "WRONG_GROUP"], [5, "WRONG_GROUP"]], "every later one of topic t, in call order; not 'other'");
  assert.deepStrictEqual(of(out, "send").map((a) => a.frame.topic), ["other"], "no later batch of t goes out on this connection");
  assert.deepStrictEqual(of(p.handle({ type: "tick" }, 20), "send"), [], "nothing of t was left buffered");
  p.handle({ type: "closed", conn: 1, reason: "gone" }, 20);
  p.handle({ type: "tick" }, 21);
  p.handle({ type: "resolved", urls: ["ws://b2"] }, 21);
  p.handle({ type: "opened", conn: 2 }, 21);
  const resent = p.handle({ type: "frame", conn: 2, frame: meta() }, 21);
  assert.deepStrictEqual(of(resent, "send").map((a) => a.frame.topic), ["other"]);
});
