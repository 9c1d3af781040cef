// Test doubles for the client's shell: a fake clock and a fake network of fake brokers that
// speak tritonmq.v1.json through fake WebSockets. Not a test file itself (it has no tests).
import { decodeFrame, encodeFrame, SUBPROTOCOL, toBytes } from "../tritonmq.js";

/** Timers that fire only when the test advances time. */
export class FakeClock {
  constructor() {
    this.t = 1000;
    this.timers = new Map();
    this.nextId = 1;
  }

  now() {
    return this.t;
  }

  setTimeout(fn, ms) {
    const id = this.nextId++;
    this.timers.set(id, { at: this.t + Math.max(0, ms), fn });
    return id;
  }

  clearTimeout(id) {
    this.timers.delete(id);
  }

  /** Run every timer due within `ms`, in time order, letting promise jobs run between them. */
  async advance(ms) {
    const target = this.t + ms;
    await settle();
    for (;;) {
      let next = null;
      for (const [id, tm] of this.timers) if (tm.at <= target && (next === null || tm.at < next[1].at)) next = [id, tm];
      if (next === null) break;
      this.timers.delete(next[0]);
      this.t = Math.max(this.t, next[1].at);
      next[1].fn();
      await settle();
    }
    this.t = target;
    await settle();
  }
}

/** Let pending promise jobs and queued microtasks run. */
export async function settle() {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
}

const hex = (b) => Array.from(toBytes(b), (x) => x.toString(16).padStart(2, "0")).join("");

/** A broker as a client sees it: answers hello/meta, stamps pubs (dedup by uuid), delivers. */
export class FakeBroker {
  constructor(net, url, { id, group = "g1", role = "primary", epoch = 1 } = {}) {
    this.net = net;
    this.url = url;
    this.id = id ?? url;
    this.group = group;
    this.role = role;
    this.epoch = epoch;
    this.up = true;
    this.autoAck = true; // answer each pub with a puback at once
    this.pubs = []; // [socket, frame] of every pub received
    this.subs = []; // [socket, frame]
    this.acks = []; // frames
    this.refuse = null; // (frame) => error frame fields, or null
    this.present = []; // presence members: {ws, sid, topic, member}, in join order
    this.clients = 0;
    this.admin = null; // (frame) => the answer's fields, for ops the fake does not know
  }

  /** A member leaves: every other member of its topic is told. */
  leave(gone) {
    this.present = this.present.filter((m) => m !== gone);
    for (const m of this.present) if (m.topic === gone.topic) m.ws.deliver({ op: "leave", sid: m.sid, topic: m.topic, member: gone.member });
  }

  disconnected(ws) {
    for (const m of this.present.filter((x) => x.ws === ws)) this.leave(m);
  }

  meta(id, cluster) {
    const g = this.net.groupInfo(this.group, false);
    const f = {
      op: "meta", id, group: this.group, broker: this.id, role: this.role, epoch: this.epoch,
      primary: null, primary_url: g.primary_url, isr: [], members: g.members, commit: this.net.ts, bytes: 0, records: 0,
    };
    if (cluster) {
      f.groups = this.net.groups();
      if (this.net.owners) f.slots = { slots: this.net.owners.length, owners: this.net.owners, version: 0 };
    }
    return f;
  }

  receive(ws, f) {
    switch (f.op) {
      case "hello":
        if (this.net.requiredToken !== null && f.token !== this.net.requiredToken) {
          ws.deliver({ op: "error", code: "UNAUTHENTICATED", message: "no valid token", retriable: false });
        } else {
          ws.deliver(this.meta(0, false));
        }
        break;
      case "meta":
        ws.deliver(this.meta(f.id, true));
        break;
      case "pub": {
        this.pubs.push([ws, f]);
        const refusal = this.refuse?.(f);
        if (refusal) ws.deliver({ op: "error", id: f.id, message: refusal.code, retriable: true, ...refusal });
        else if (this.autoAck) this.ack(ws, f);
        break;
      }
      case "sub":
        this.subs.push([ws, f]);
        const refusal = this.refuse?.(f);
        if (refusal) ws.deliver({ op: "error", sid: f.sid, message: refusal.code, retriable: false, ...refusal });
        else {
          ws.deliver({ op: "subok", sid: f.sid, next: typeof f.from === "number" ? f.from : this.net.ts + 1 });
          for (const m of this.present.filter((x) => x.ws === ws && x.sid === f.sid)) this.leave(m);
          if (f.presence) {
            const joined = { ws, sid: f.sid, topic: f.topic, member: { client: `${this.id}.${++this.clients}`, user: "", info: f.info ?? "" } };
            for (const m of this.present) if (m.topic === f.topic) m.ws.deliver({ op: "join", sid: m.sid, topic: m.topic, member: joined.member });
            this.present.push(joined);
          }
        }
        break;
      case "unsub":
        for (const m of this.present.filter((x) => x.ws === ws && x.sid === f.sid)) this.leave(m);
        break;
      case "presence":
        ws.deliver({ op: "members", id: f.id, topic: f.topic, members: this.present.filter((m) => m.topic === f.topic).map((m) => m.member) });
        break;
      case "ack":
        this.acks.push(f);
        break;
      default:
        if (this.admin) ws.deliver({ id: f.id, ...this.admin(f) });
    }
  }

  /** Stamp a pub's records (a uuid seen before keeps its ts) and answer with a puback. */
  ack(ws, f) {
    const ts = f.records.map((r) => {
      const key = hex(r[0]);
      if (!this.net.dedup.has(key)) {
        this.net.ts += 1;
        this.net.dedup.set(key, this.net.ts);
        this.net.log.push([this.net.ts, f.topic, r]);
      }
      return this.net.dedup.get(key);
    });
    ws.deliver({ op: "puback", id: f.id, ts, group: this.group });
  }

  /** The sockets connected to this broker that are still open. */
  sockets() {
    return this.net.sockets.filter((s) => s.broker === this && s.readyState === 1);
  }
}

/** Fake brokers by URL, and the WebSocket constructor that reaches them. */
export class FakeNet {
  constructor() {
    this.brokers = new Map();
    this.sockets = [];
    this.ts = 0;
    this.dedup = new Map();
    this.log = [];
    this.owners = null;
    this.requiredToken = null;
    this.stalePrimary = {}; // group -> the primary_url cluster reads claim
    const net = this;
    this.WebSocket = class extends FakeSocket {
      constructor(url, protocols) {
        super(net, url, protocols);
      }
    };
  }

  add(url, options) {
    const b = new FakeBroker(this, url, options);
    this.brokers.set(url, b);
    return b;
  }

  /** A group's primary and members; a cluster read (`view`) may give a stale primary. */
  groupInfo(group, view = true) {
    const members = {};
    let primaryUrl = null;
    for (const b of this.brokers.values()) {
      if (b.group !== group || !b.up) continue;
      members[b.id] = b.url;
      if (b.role === "primary") primaryUrl = b.url;
    }
    if (view && this.stalePrimary[group]) primaryUrl = this.stalePrimary[group];
    return { primary_url: primaryUrl, members };
  }

  groups() {
    const out = {};
    for (const b of this.brokers.values()) out[b.group] = this.groupInfo(b.group);
    return out;
  }

  /** Frames of `op` sent by clients to the brokers, in order. */
  sent(op) {
    return this.sockets.flatMap((s) => s.sent.filter((f) => f.op === op));
  }
}

export class FakeSocket {
  constructor(net, url, protocols) {
    this.net = net;
    this.url = url;
    this.protocols = protocols;
    this.sent = [];
    this.readyState = 0;
    this.protocol = "";
    this.broker = net.brokers.get(url) ?? null;
    this.onopen = this.onmessage = this.onclose = this.onerror = null;
    net.sockets.push(this);
    queueMicrotask(() => {
      if (this.readyState !== 0) return;
      if (this.broker === null || !this.broker.up || !protocols.includes(SUBPROTOCOL)) {
        this.readyState = 3;
        this.onerror?.({});
        this.onclose?.({ code: 1006, reason: "connection refused" });
        return;
      }
      this.readyState = 1;
      this.protocol = SUBPROTOCOL;
      this.onopen?.({});
    });
  }

  send(text) {
    if (this.readyState !== 1) throw new Error("socket not open");
    const f = decodeFrame(text, "client");
    this.sent.push(f);
    this.broker.receive(this, f);
  }

  /** A frame from the broker, encoded and decoded as on the wire, after the current job. */
  deliver(frame) {
    const text = encodeFrame(frame);
    queueMicrotask(() => {
      if (this.readyState === 1) this.onmessage?.({ data: text });
    });
  }

  close() {
    if (this.readyState >= 2) return;
    this.readyState = 3;
    this.broker?.disconnected(this);
    queueMicrotask(() => this.onclose?.({ code: 1000, reason: "" }));
  }

  /** The network drops the connection (a broker killed). */
  drop() {
    if (this.readyState === 3) return;
    this.readyState = 3;
    this.broker?.disconnected(this);
    this.onclose?.({ code: 1006, reason: "dropped" });
  }
}
