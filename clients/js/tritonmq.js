// TritonMQ JavaScript client: one dependency-free ES module for browsers and Node 20+.
//
// It speaks the `tritonmq.v1.json` subprotocol (docs/protocol.md §12) and ports the
// reference Python client's rules (docs/protocol.md §11, tritonmq/client/protocol.py) one to
// one. The same split: `ClientProtocol` is a pure state machine (events in with `now`,
// actions out; no socket, no timer, no randomness of its own), `Link` is the thin shell
// that owns a group's WebSocket and timer and performs the actions, and `Client` routes
// topics to groups (docs/protocol.md §4) and is the API. Times are milliseconds.

export const SUBPROTOCOL = "tritonmq.v1.json";
export const CLIENT_NAME = "tritonmq-js/0.1";

// --- errors -------------------------------------------------------------------------

/** Codes whose requests may succeed later (tritonmq/wire/frames.py ErrorCode.retriable). */
const RETRIABLE = new Set(["NOT_PRIMARY", "NOT_ENOUGH_REPLICAS", "UNAVAILABLE", "WRONG_GROUP", "FULL"]);
const KNOWN_CODES = new Set([
  "BAD_FRAME", "TOO_LARGE", "UNKNOWN_OP", "BAD_REQUEST", "NOT_PRIMARY", "NOT_ENOUGH_REPLICAS",
  "UNAVAILABLE", "STALE_EPOCH", "WRONG_GROUP", "FULL", "PURGED", "INTERNAL", "UNAUTHENTICATED",
  "TOKEN_EXPIRED", "FORBIDDEN", "LIMIT",
]);

/**
 * Every error this client raises or reports. `code` is a broker error code (docs/protocol.md
 * §7) or one of the client's own: `CONFIG` (bad argument), `CLOSED` (the client or the
 * subscription was closed), `TIMEOUT` (a publish not acknowledged in time), `UNAVAILABLE`
 * (no primary reachable in time).
 */
export class TritonError extends Error {
  constructor(code, message, extra = {}) {
    super(message);
    this.name = "TritonError";
    this.code = code;
    this.retriable = extra.retriable ?? RETRIABLE.has(code);
    for (const k of ["primary", "group", "first", "last"]) {
      if (extra[k] !== undefined && extra[k] !== null) this[k] = extra[k];
    }
  }
}

/** The error an `error` frame stands for; a code this version does not know goes by the frame's flag. */
export function errorFromFrame(f) {
  const code = String(f.code);
  const retriable = KNOWN_CODES.has(code) ? RETRIABLE.has(code) : f.retriable === true;
  return new TritonError(code, String(f.message ?? code), {
    retriable, primary: f.primary, group: f.group, first: f.first, last: f.last,
  });
}

// --- codec: tritonmq.v1.json ---------------------------------------------------------

const utf8 = new TextEncoder();
const strictUtf8 = new TextDecoder("utf-8", { fatal: true });
const B64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
// Binary positions in records: pub [uuid, key, value, headers]; deliver and fetched
// [ts, uuid, key, value, headers].
const RECORD_OPS = { pub: [[0, 1, 2], 3], deliver: [[1, 2, 3], 4], fetched: [[1, 2, 3], 4] };

function b64encode(bytes) {
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    s += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  }
  return btoa(s);
}

function b64decode(text) {
  if (typeof text !== "string" || !B64.test(text)) {
    throw new TritonError("BAD_FRAME", "'b64' must be standard base64 with padding");
  }
  const raw = atob(text);
  const out = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
  return out;
}

/** A binary field's bytes: a string stands for its UTF-8 encoding. */
export function toBytes(v) {
  return typeof v === "string" ? utf8.encode(v) : v;
}

function binOut(v) {
  if (typeof v === "string") return v;
  try {
    return strictUtf8.decode(v);
  } catch {
    return { b64: b64encode(v) };
  }
}

function binIn(v) {
  if (typeof v === "string" || v === null) return v;
  if (isObject(v) && typeof v.b64 === "string" && Object.keys(v).length === 1) return b64decode(v.b64);
  throw new TritonError("BAD_FRAME", "a binary field must be a string or {\"b64\": ...}");
}

function isObject(v) {
  return typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array);
}

function headersOut(h) {
  const out = {};
  for (const [k, v] of Object.entries(h)) out[k] = v instanceof Uint8Array ? { b64: b64encode(v) } : v;
  return out;
}

function headersIn(h) {
  if (!isObject(h)) return h;
  const out = {};
  for (const [k, v] of Object.entries(h)) out[k] = isObject(v) ? binIn(v) : v;
  return out;
}

/**
 * A frame (a plain object with `op`) as the text of one `tritonmq.v1.json` message. Binary
 * fields may be `Uint8Array` (written as text when it is valid UTF-8, else as base64) or a
 * string (its UTF-8 bytes); a binary header value is always base64. Top-level `null` and
 * `undefined` fields are left out (absent means default, docs/protocol.md §2).
 */
export function encodeFrame(frame) {
  const out = {};
  for (const [k, v] of Object.entries(frame)) if (v !== undefined && v !== null) out[k] = v;
  const spec = RECORD_OPS[out.op];
  if (spec && Array.isArray(out.records)) {
    const [binary, hpos] = spec;
    out.records = out.records.map((r) => {
      const copy = r.slice();
      for (const i of binary) if (copy[i] !== null && copy[i] !== undefined) copy[i] = binOut(copy[i]);
      if (copy[hpos] === undefined) copy[hpos] = null;
      if (copy[hpos]) copy[hpos] = headersOut(copy[hpos]);
      return copy;
    });
  }
  return JSON.stringify(out);
}

function checkIntegers(v, depth) {
  if (depth > 16) throw new TritonError("BAD_FRAME", "frame nested deeper than 16");
  if (typeof v === "number") {
    if (Number.isInteger(v) && !Number.isSafeInteger(v)) {
      throw new TritonError("BAD_FRAME", `integer ${v} is above 2^53 - 1`);
    }
  } else if (Array.isArray(v)) {
    for (const x of v) checkIntegers(x, depth + 1);
  } else if (isObject(v)) {
    for (const x of Object.values(v)) checkIntegers(x, depth + 1);
  }
}

const INT = (v) => Number.isSafeInteger(v) && v >= 0;
const STR = (v) => typeof v === "string";
const OPT_STR = (v) => v === undefined || v === null || typeof v === "string";
const INTS = (v) => Array.isArray(v) && v.every(INT);
const RECORDS = (v) => Array.isArray(v) && v.every((r) => Array.isArray(r) && r.length === 5 && INT(r[0]));
/** The fields of the broker frames this client acts on, and what they must be. */
const BROKER_FIELDS = {
  meta: { id: INT, group: STR, role: STR, epoch: INT, primary_url: OPT_STR },
  puback: { id: INT, ts: INTS, group: STR, eras: (v) => v === undefined || INTS(v) },
  subok: { sid: INT, next: INT },
  deliver: { sid: INT, topic: STR, records: RECORDS },
  fetched: { id: INT, records: RECORDS, next: INT },
  committed: { id: INT, ts: INT, head: INT },
  subinfo: { id: INT },
  slotinfo: { id: INT, slot: INT, owner: STR, era: INT, state: STR, to: STR },
  stats: { id: INT, group: STR, broker: STR, role: STR },
  members: { id: INT, topic: STR, members: (v) => Array.isArray(v) && v.every(isObject) },
  join: { sid: INT, topic: STR, member: isObject },
  leave: { sid: INT, topic: STR, member: isObject },
  error: { code: STR },
};

/**
 * One `tritonmq.v1.json` message as a frame. Binary fields come back as the JSON carried
 * them: a string when the bytes were UTF-8 text, else a `Uint8Array`; a binary header value
 * is a `Uint8Array`. A broker frame this client acts on is checked field by field (a frame
 * going to a broker, `direction` "client", is not: that is the broker's job); anything
 * malformed (or an integer above 2^53 - 1) is a `TritonError` with code `BAD_FRAME`.
 */
export function decodeFrame(text, direction = "broker") {
  if (typeof text !== "string") throw new TritonError("BAD_FRAME", "a tritonmq.v1.json frame is text");
  let obj;
  try {
    obj = JSON.parse(text);
  } catch (e) {
    throw new TritonError("BAD_FRAME", `not JSON: ${e.message}`);
  }
  if (!isObject(obj) || typeof obj.op !== "string") {
    throw new TritonError("BAD_FRAME", "a frame is a JSON object with a string 'op'");
  }
  checkIntegers(obj, 0);
  for (const [k, v] of Object.entries(obj)) if (v === null) delete obj[k];
  const spec = RECORD_OPS[obj.op];
  if (spec && Array.isArray(obj.records)) {
    const [binary, hpos] = spec;
    obj.records = obj.records.map((r) => {
      if (!Array.isArray(r) || r.length !== hpos + 1) throw new TritonError("BAD_FRAME", "bad record shape");
      const copy = r.slice();
      for (const i of binary) copy[i] = binIn(copy[i]);
      copy[hpos] = headersIn(copy[hpos]);
      return copy;
    });
  }
  const fields = direction === "broker" ? BROKER_FIELDS[obj.op] : undefined;
  if (fields) {
    for (const [k, ok] of Object.entries(fields)) {
      if (!ok(obj[k])) throw new TritonError("BAD_FRAME", `'${obj.op}' frame: bad '${k}'`);
    }
  }
  return obj;
}

// --- routing (docs/protocol.md §4; tritonmq/client/routing.py) ------------------------

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

/** CRC-32 (zlib, IEEE) of a string's UTF-8 bytes, unsigned. */
export function crc32(text) {
  let c = 0xffffffff;
  for (const b of utf8.encode(text)) c = CRC_TABLE[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** What a `meta` said about the cluster, as the client routes by it. */
export class ClusterView {
  constructor(groups = {}, slots = null) {
    this.groups = groups;
    this.owners = slots && Array.isArray(slots.owners) && slots.owners.length ? slots.owners : null;
  }

  groupOf(topic) {
    if (this.owners) return this.owners[crc32(topic) % this.owners.length];
    const names = Object.keys(this.groups).sort();
    return names.length ? names[0] : "";
  }

  /** The group's primary first, then its other live members. */
  candidates(group) {
    const g = this.groups[group] ?? {};
    const urls = g.primary_url ? [g.primary_url] : [];
    for (const u of Object.values(g.members ?? {})) if (!urls.includes(u)) urls.push(u);
    return urls;
  }

  urls() {
    const out = [];
    for (const g of Object.keys(this.groups).sort()) {
      for (const u of this.candidates(g)) if (!out.includes(u)) out.push(u);
    }
    return out;
  }
}

// --- the protocol: a pure state machine ----------------------------------------------

export const State = Object.freeze({
  DISCONNECTED: "disconnected",
  RESOLVING: "resolving",
  CONNECTING: "connecting",
  CONNECTED: "connected",
  CLOSED: "closed",
});

export const DEFAULTS = Object.freeze({
  maxInFlight: 32,
  batchSize: 1000,
  batchBytes: 1024 * 1024,
  linger: 0,
  timeout: 30_000,
  retries: 1000,
  handshakeTimeout: 5000,
  backoffBase: 20,
  backoffMax: 500,
  refusalPauseMin: 50,
  refusalPauseMax: 1000,
  probeAfter: 1000, // null: no probing
  group: "",
});

const RECENT_ACKS_MS = 30_000;
const RECENT_ACKS_MAX = 50_000;
const HANDED_MAX = 100_000;
const NEVER = Infinity;

function utf8Length(s) {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    n += c < 0x80 ? 1 : c < 0x800 ? 2 : c >= 0xd800 && c < 0xdc00 ? (i++, 4) : 3;
  }
  return n;
}

function byteLength(v) {
  return v === null || v === undefined ? 0 : typeof v === "string" ? utf8Length(v) : v.length;
}

/** What a record adds to a `pub` frame, near enough to keep batches under the frame limit. */
function recordBytes([uuid, key, value, headers]) {
  let extra = 0;
  if (headers) for (const k of Object.keys(headers)) extra += k.length + 16;
  return byteLength(uuid) + byteLength(value) + byteLength(key) + extra + 8;
}

class PendingSub {
  constructor(e, now) {
    this.sid = e.sid;
    this.topic = e.topic;
    this.name = e.name ?? null;
    this.start = e.start ?? "latest";
    this.window = e.window ?? null;
    this.presence = e.presence === true; // C12: a member of the topic's presence
    this.info = e.info ?? null;
    this.shared = e.mode === "shared";
    this.skipGaps = e.gaps === "skip";
    this.askedAt = now;
    this.position = null; // subok.next of the first subok
    this.maxSeen = -1; // highest ts handed to the application
    this.skipped = null; // {first, last}: purged records skipped on this resume
    this.acked = new Map(); // shared: ts -> when acknowledged, oldest first
    this.handed = new Map(); // shared: ts handed over, not acknowledged -> connection
    this.member = e.member ?? "";
    // a moved slot (docs/replication.md M3): positions are (era, ts)
    this.era = e.era ?? 0;
    this.ackedTo = -1; // broadcast: the highest ts the application acknowledged, of `era`
    if (e.resume === true && Number.isSafeInteger(e.start)) this.position = e.start; // moved here (M4)
  }

  acknowledged(ts, now) {
    this.handed.delete(ts);
    this.acked.delete(ts);
    this.acked.set(ts, now);
    if (this.acked.size > RECENT_ACKS_MAX) this.acked.delete(this.acked.keys().next().value);
  }

  recentAcks(now) {
    for (const [ts, at] of this.acked) {
      if (at >= now - RECENT_ACKS_MS) break;
      this.acked.delete(ts);
    }
    return [...this.acked.keys()];
  }

  /** The `sub` frame for the next connection (docs/protocol.md §8 "Resuming"). */
  frame(now) {
    let start;
    if (this.shared) start = this.position !== null ? "latest" : this.start;
    else if (this.maxSeen >= 0) start = this.maxSeen + 1;
    else if (this.position !== null) start = this.position;
    else start = this.start;
    const resume = this.position !== null;
    const f = { op: "sub", sid: this.sid, topic: this.topic, from: start };
    if (this.name !== null) f.subscription = this.name;
    if (this.shared) f.mode = "shared";
    if (resume) f.resume = true;
    if (Number.isSafeInteger(start) && this.era) f.era = this.era;
    if (this.window !== null) f.window = this.window;
    if (this.presence) {
      f.presence = true; // on every sub, so a new primary rebuilds its members (§13)
      if (this.info !== null) f.info = this.info;
    }
    if (this.shared) {
      if (resume) {
        const acked = this.recentAcks(now);
        if (acked.length) f.acked = acked;
        if (this.handed.size) f.held = [...this.handed.keys()];
      }
      f.member = this.member;
    }
    return f;
  }
}

/**
 * The connection to one group's primary, as a pure state machine: `handle(event, now)`
 * applies an event and returns the actions the shell must perform, in order. Ported from
 * tritonmq/client/protocol.py and consuming.py (rules C1-C11 of docs/protocol.md §11):
 *
 * events: {type: "publish", ticket, topic, records, durability} (records `[uuid, key, value, headers]`
 *   with their uuids), "request" {ticket, frame}, "setToken" {token}, "subscribe" {sid,
 *   topic, name, start, window, mode, member, gaps, presence, info, era, resume}, "unsubscribe" {sid},
 *   "ack" {sid, ts, era},
 *   "resolved" {urls}, "resolveFailed" {error}, "opened" {conn}, "failed" {conn, error},
 *   "closed" {conn, reason}, "frame" {conn, frame}, "epochSeen" {epoch, primaryUrl},
 *   "tick", "close".
 * actions: "send" {frame}, "connect" {conn, url}, "disconnect" {conn}, "resolve",
 *   "probe" {exclude}, "publishDone" {ticket, ts, group, eras?}, "publishFailed" {ticket, error},
 *   "answered" {ticket, frame}, "requestFailed" {ticket, error}, "deliver" {sid, records, era},
 *   "subscribed" {sid, next, resumed, recovered, skipped}, "subscriptionMoved" {sid, group, era,
 *   after}, "subscriptionFailed" {sid, error},
 *   "presence" {sid, event: "join" | "leave", member}, "wakeAt" {at}.
 */
export class ClientProtocol {
  constructor(settings = {}, rand = Math.random, token = null) {
    this.settings = { ...DEFAULTS, ...settings };
    this.rand = rand;
    this.state = State.DISCONNECTED;
    this.group = "";
    this.token = token;
    this.epoch = 0;
    this.url = null;
    this.conn = 0;
    this.lastError = "";
    this._candidates = [];
    this._tried = new Set();
    this._failures = 0;
    this._reconnectAt = 0;
    this._handshakeDeadline = NEVER;
    this._disconnectedSince = null;
    this._pause = 0;
    this._hint = null;
    this._nextProbe = 0;
    this._probing = false;
    this._heard = 0;
    this._helloAt = null;
    this._batches = new Map(); // id -> batch, in id order
    this._unsent = [];
    this._inFlight = 0;
    this._nextId = 1;
    this._buffer = new Map(); // "<durability>\u0000<topic>" -> [[ticket, records]]: one level a batch
    this._buffered = new Map();
    this._flushAt = NEVER;
    this._tickets = new Map();
    this._requests = new Map(); // by wire id
    this._subs = new Map();
    this._acks = new Map();
    this._sharedAcks = new Map();
    this._wake = NEVER;
    this._out = [];
  }

  handle(event, now) {
    const out = (this._out = []);
    if (this.state === State.CLOSED) {
      this._whenClosed(event);
      return out;
    }
    switch (event.type) {
      case "publish":
        this._publish(event, now);
        break;
      case "request":
        this._request(event, now);
        break;
      case "subscribe":
        this._subscribe(event, now);
        break;
      case "unsubscribe":
        this._unsubscribe(event.sid);
        break;
      case "ack":
        this._ack(event.sid, event.ts, now, event.era ?? 0);
        break;
      case "resolved":
        if (this.state === State.RESOLVING) {
          const first = this._hint ? [this._hint] : [];
          this._hint = null;
          this._candidates = [...new Set([...first, ...event.urls])];
          this._tryNext(now);
        }
        break;
      case "resolveFailed":
        if (this.state === State.RESOLVING) {
          this.lastError = `cluster read failed: ${event.error}`;
          this._backoff(now);
        }
        break;
      case "opened":
        if (event.conn === this.conn && this.state === State.CONNECTING) {
          out.push({ type: "send", frame: this._hello() });
        }
        break;
      case "setToken":
        this.token = event.token ?? null;
        if (this.state === State.CONNECTED) out.push({ type: "send", frame: this._hello() });
        break;
      case "failed":
        if (event.conn === this.conn && this.state === State.CONNECTING) {
          this.lastError = `${this.url}: ${event.error}`;
          this._tryNext(now);
        }
        break;
      case "closed":
        if (event.conn === this.conn && this.state === State.CONNECTING) {
          this.lastError = `${this.url} closed: ${event.reason ?? ""}`;
          this._tryNext(now);
        } else if (event.conn === this.conn && this.state === State.CONNECTED) {
          this.lastError = `${this.url} closed: ${event.reason ?? ""}`;
          this._lost(now, this._pause);
        }
        break;
      case "frame":
        if (event.conn === this.conn) {
          this._heard = now;
          this._helloAt = null;
          this._frame(event.frame, now);
        }
        break;
      case "epochSeen":
        this._epochSeen(event.epoch, event.primaryUrl, now);
        break;
      case "tick":
        this._wake = NEVER;
        this._tick(now);
        break;
      case "close":
        this._close();
        return out;
      default:
        throw new TypeError(`unknown event ${event.type}`);
    }
    this._schedule(now);
    return out;
  }

  _hello() {
    const f = { op: "hello", client: CLIENT_NAME };
    if (this.token) f.token = this.token;
    return f;
  }

  // --- producing (C2-C4) ---

  _publish(e, now) {
    if (!e.records.length) {
      this._out.push({ type: "publishDone", ticket: e.ticket, ts: [], group: this.group });
      return;
    }
    const n = e.records.length;
    this._tickets.set(e.ticket, { topic: e.topic, ts: new Array(n).fill(0), missing: n });
    const key = `${e.durability ?? ""}\u0000${e.topic}`;
    if (!this._buffer.has(key)) this._buffer.set(key, []);
    this._buffer.get(key).push([e.ticket, e.records]);
    const buffered = (this._buffered.get(key) ?? 0) + n;
    this._buffered.set(key, buffered);
    if (buffered >= this.settings.batchSize) this._flush(now);
    else if (this._flushAt === NEVER) this._flushAt = now + this.settings.linger;
  }

  _flush(now) {
    this._flushAt = NEVER;
    const { batchSize: size, batchBytes: maxBytes } = this.settings;
    const deadline = now + this.settings.timeout;
    for (const [key, segments] of this._buffer) {
      const cut = key.indexOf("\u0000");
      const durability = key.slice(0, cut);
      const topic = key.slice(cut + 1);
      let records = [];
      let parts = [];
      let nbytes = 0;
      for (const [ticket, recs] of segments) {
        let at = 0;
        recs.forEach((r, i) => {
          const cost = recordBytes(r);
          if (records.length && (records.length === size || nbytes + cost > maxBytes)) {
            if (i > at) {
              parts.push([ticket, at, i - at]);
              at = i;
            }
            this._newBatch(topic, records, parts, deadline, durability);
            records = [];
            parts = [];
            nbytes = 0;
          }
          records.push(r);
          nbytes += cost;
        });
        if (recs.length > at) parts.push([ticket, at, recs.length - at]);
      }
      if (records.length) this._newBatch(topic, records, parts, deadline, durability);
    }
    this._buffer.clear();
    this._buffered.clear();
    this._pump(now);
  }

  _newBatch(topic, records, parts, deadline, durability = "") {
    const b = { id: this._nextId++, topic, records, parts, deadline, durability, attempts: 0, onWire: false, sentAt: 0 };
    this._batches.set(b.id, b);
    this._unsent.push(b.id);
  }

  _pump(now) {
    if (this.state !== State.CONNECTED) return;
    while (this._unsent.length && this._inFlight < this.settings.maxInFlight) {
      const b = this._batches.get(this._unsent.shift());
      if (b === undefined || b.onWire) continue;
      b.attempts += 1;
      b.onWire = true;
      b.sentAt = now;
      this._inFlight += 1;
      const frame = { op: "pub", id: b.id, topic: b.topic, records: b.records };
      if (b.durability) frame.durability = b.durability; // when the puback comes (D4)
      this._out.push({ type: "send", frame });
    }
  }

  _settle(b) {
    this._batches.delete(b.id);
    if (b.onWire) {
      b.onWire = false;
      this._inFlight -= 1;
    }
  }

  _puback(f, now) {
    const b = this._batches.get(f.id);
    if (b === undefined) return;
    this._settle(b);
    this._pause = 0;
    let at = 0;
    for (const [ticket, first, n] of b.parts) {
      const t = this._tickets.get(ticket);
      if (t !== undefined) {
        for (let i = 0; i < n; i++) t.ts[first + i] = f.ts[at + i];
        if (f.eras?.length) {
          // a moved slot: where each record's ts belongs, (era, ts); -1: the puback said none
          t.eras ??= new Array(t.ts.length).fill(-1);
          for (let i = 0; i < n; i++) t.eras[first + i] = f.eras[at + i];
        }
        t.missing -= n;
        if (t.missing <= 0) {
          this._tickets.delete(ticket);
          const done = { type: "publishDone", ticket, ts: t.ts, group: f.group || this.group };
          if (t.eras) done.eras = t.eras;
          this._out.push(done);
        }
      }
      at += n;
    }
    this._pump(now);
  }

  _failBatch(b, err, now, pump = true) {
    this._settle(b);
    for (const [ticket] of b.parts) {
      if (this._tickets.delete(ticket)) this._out.push({ type: "publishFailed", ticket, error: err });
    }
    if (pump) this._pump(now);
  }

  /** C4: a batch refused with WRONG_GROUP fails, and so does every later batch of its topic
   * (sent or not) and every record of it still buffered, in call order: the broker holds
   * them back on this connection until a refused one is resent, so the caller re-routes
   * them behind it, and none may be resent on a new connection ahead of it. Nothing of
   * the topic goes out between (one pump at the end). */
  _failTopicFrom(b, err, now) {
    for (const x of [...this._batches.values()]) {
      if (x.topic === b.topic && x.id >= b.id) this._failBatch(x, err, now, false);
    }
    for (const [key, segments] of [...this._buffer]) {
      if (key.slice(key.indexOf("\u0000") + 1) !== b.topic) continue;
      for (const [ticket] of segments) {
        if (this._tickets.delete(ticket)) this._out.push({ type: "publishFailed", ticket, error: err });
      }
      this._buffer.delete(key);
      this._buffered.delete(key);
    }
    this._pump(now);
  }

  /** C4: a retriable refusal (not WRONG_GROUP, within `retries`) drops the connection and
   * backs off; everything unanswered is resent on the next one. */
  _retryAfterRefusal(err, attempts, hint, now) {
    if (!err.retriable || err.code === "WRONG_GROUP" || attempts > this.settings.retries) return false;
    this.lastError = `${err.code}: ${err.message}`;
    const s = this.settings;
    this._pause = Math.min(Math.max(s.refusalPauseMin, this._pause * 2), s.refusalPauseMax);
    this._hint = hint ?? null;
    this._drop(now, this._pause);
    return true;
  }

  // --- requests answered once (C10) ---

  _request(e, now) {
    const rid = this._nextId++;
    const r = { ticket: e.ticket, frame: { ...e.frame, id: rid }, deadline: now + this.settings.timeout, attempts: 0 };
    this._requests.set(rid, r);
    if (this.state === State.CONNECTED) this._sendRequest(r);
  }

  _sendRequest(r) {
    r.attempts += 1;
    this._out.push({ type: "send", frame: r.frame });
  }

  _answered(frame) {
    const r = this._requests.get(frame.id);
    if (r === undefined) return;
    this._requests.delete(frame.id);
    this._out.push({ type: "answered", ticket: r.ticket, frame });
  }

  // --- frames from the broker ---

  _frame(f, now) {
    if (this.state === State.CONNECTING) {
      if (f.op === "meta") this._handshake(f, now);
      else if (f.op === "error" && f.id === undefined && f.sid === undefined) this._helloRefused(f, now);
      return;
    }
    if (this.state !== State.CONNECTED) return;
    switch (f.op) {
      case "deliver":
        this._deliver(f, now);
        break;
      case "puback":
        this._puback(f, now);
        break;
      case "subok": {
        const sub = this._subs.get(f.sid);
        if (sub !== undefined) {
          const resumed = sub.position !== null;
          if (!resumed) {
            sub.position = f.next;
            sub.era = f.era ?? 0;
          } else if (!sub.shared && sub.ackedTo >= 0 && (f.era ?? 0) === sub.era) {
            // C6: acks lost with a primary that died (or sent before a named sub attached)
            this._out.push({ type: "send", frame: { op: "ack", sid: f.sid, ts: sub.ackedTo } });
          }
          const skipped = sub.skipped;
          sub.skipped = null;
          this._out.push({
            type: "subscribed", sid: f.sid, next: f.next, resumed, recovered: resumed && skipped === null,
            skipped,
          });
        }
        break;
      }
      case "error":
        this._error(f, now);
        break;
      case "meta":
        if (f.epoch > this.epoch) this.epoch = f.epoch;
        if (f.id) this._answered(f);
        break;
      case "fetched":
      case "committed":
      case "subinfo":
      case "members":
        this._answered(f);
        break;
      case "join":
      case "leave":
        if (this._subs.get(f.sid)?.presence) this._out.push({ type: "presence", sid: f.sid, event: f.op, member: f.member });
        break;
      default: // an op this version does not know: ignored (docs/protocol.md §2)
    }
  }

  _error(f, now) {
    const err = errorFromFrame(f);
    if (f.id !== undefined) {
      const b = this._batches.get(f.id);
      const r = this._requests.get(f.id);
      if (b !== undefined) {
        if (!this._retryAfterRefusal(err, b.attempts, f.primary, now)) {
          if (err.code === "WRONG_GROUP") this._failTopicFrom(b, err, now);
          else this._failBatch(b, err, now);
        }
      } else if (r !== undefined) {
        if (!this._retryAfterRefusal(err, r.attempts, f.primary, now)) {
          this._requests.delete(f.id);
          this._out.push({ type: "requestFailed", ticket: r.ticket, error: err });
        }
      }
    } else if (f.sid !== undefined) {
      const sub = this._subs.get(f.sid);
      if (sub !== undefined) this._subError(sub, err, now, f);
    } else {
      this.lastError = `${err.code}: ${err.message}`;
    }
  }

  _handshake(meta, now) {
    const wrong = Boolean(this.settings.group) && meta.group !== this.settings.group;
    if (meta.role === "primary" && !wrong) {
      this.state = State.CONNECTED;
      this.group = meta.group;
      this.epoch = Math.max(this.epoch, meta.epoch);
      this._failures = 0;
      this._handshakeDeadline = NEVER;
      this._disconnectedSince = null;
      this._probing = false;
      this._nextProbe = 0;
      this._heard = now;
      this._helloAt = null;
      for (const sub of this._subs.values()) this._out.push({ type: "send", frame: sub.frame(now) });
      this._flushAcks();
      for (const rid of [...this._requests.keys()].sort((a, b) => a - b)) this._sendRequest(this._requests.get(rid));
      this._unsent = [...this._batches.keys()].sort((a, b) => a - b);
      this._pump(now);
      return;
    }
    this.lastError = `${this.url} is not the primary of ${this.settings.group || meta.group}`;
    this._out.push({ type: "disconnect", conn: this.conn });
    const hint = meta.primary_url;
    if (hint && !wrong && !this._tried.has(hint)) this._candidates.unshift(hint);
    this._tryNext(now);
  }

  /** C11: the broker refused our `hello` (its token). */
  _helloRefused(f, now) {
    const err = errorFromFrame(f);
    this.lastError = `${this.url}: ${err.code}: ${err.message}`;
    this._out.push({ type: "disconnect", conn: this.conn });
    if (err.retriable) {
      this._tryNext(now);
      return;
    }
    this._failPending(err);
    this._lost(now, this.settings.backoffMax);
  }

  // --- connecting (C1, C5) ---

  _tryNext(now) {
    while (this._candidates.length) {
      const url = this._candidates.shift();
      if (this._tried.has(url)) continue;
      this._tried.add(url);
      this.conn += 1;
      this.url = url;
      this.state = State.CONNECTING;
      this._handshakeDeadline = now + this.settings.handshakeTimeout;
      this._out.push({ type: "connect", conn: this.conn, url });
      return;
    }
    this._backoff(now);
  }

  _backoff(now) {
    this.state = State.DISCONNECTED;
    this.url = null;
    this._handshakeDeadline = NEVER;
    this._reconnectAt = now + this.backoffDelay(this._failures);
    this._failures += 1;
  }

  /** `min(max, base * 2**failures)` scaled by a random factor in [0.5, 1): full jitter's upper half. */
  backoffDelay(failures) {
    const s = this.settings;
    return Math.min(s.backoffMax, s.backoffBase * 2 ** Math.min(failures, 30)) * (0.5 + this.rand() / 2);
  }

  _start(now) {
    this._tried = new Set();
    this._candidates = [];
    if (this._hint) {
      this._candidates.push(this._hint);
      this._hint = null;
      this._tryNext(now);
      if (this.state === State.CONNECTING) return;
    }
    this.state = State.RESOLVING;
    this._out.push({ type: "resolve" });
  }

  _drop(now, pause) {
    if (this.state === State.CONNECTING || this.state === State.CONNECTED) {
      this._out.push({ type: "disconnect", conn: this.conn });
    }
    this._lost(now, pause);
  }

  _lost(now, pause) {
    this.state = State.DISCONNECTED;
    this.url = null;
    this._handshakeDeadline = NEVER;
    this._probing = false;
    this._helloAt = null;
    if (this._disconnectedSince === null) this._disconnectedSince = now;
    for (const b of this._batches.values()) b.onWire = false;
    this._inFlight = 0;
    this._unsent = [];
    this._reconnectAt = now + pause;
  }

  _epochSeen(epoch, primaryUrl, now) {
    this._probing = false;
    if (epoch === null || epoch === undefined || epoch <= this.epoch || !primaryUrl) return;
    if (this.state === State.CONNECTED && primaryUrl === this.url) {
      this.epoch = epoch;
      return;
    }
    if (this.state === State.CONNECTING && primaryUrl === this.url) return;
    this.lastError = `group moved to epoch ${epoch} at ${primaryUrl}`;
    this._hint = primaryUrl;
    if (this.state === State.RESOLVING) return;
    this._drop(now, 0);
  }

  // --- consuming (C6, C7, C9) ---

  _subscribe(e, now) {
    const sub = new PendingSub(e, now);
    if (sub.shared && !sub.member) {
      sub.member = Array.from({ length: 2 }, () => Math.floor(this.rand() * 2 ** 32).toString(16).padStart(8, "0")).join("");
    }
    this._subs.set(e.sid, sub);
    if (this.state === State.CONNECTED) this._out.push({ type: "send", frame: sub.frame(now) });
  }

  _unsubscribe(sid) {
    if (!this._subs.has(sid)) return;
    this._flushAcks();
    this._subs.delete(sid);
    if (this.state === State.CONNECTED) this._out.push({ type: "send", frame: { op: "unsub", sid } });
  }

  _ack(sid, ts, now, era = 0) {
    const sub = this._subs.get(sid);
    if (sub === undefined || era !== sub.era) return; // an era left behind is not ours to ack
    if (sub.shared) {
      if (!this._sharedAcks.has(sid)) this._sharedAcks.set(sid, []);
      this._sharedAcks.get(sid).push(ts);
      sub.acknowledged(ts, now);
    } else if (ts > (this._acks.get(sid) ?? -1)) {
      this._acks.set(sid, ts);
      sub.ackedTo = ts;
    }
    this._wake = Math.min(this._wake, now);
    this._out.push({ type: "wakeAt", at: now });
  }

  _flushAcks() {
    if (this.state !== State.CONNECTED) return; // kept until connected
    const acks = this._acks;
    const shared = this._sharedAcks;
    this._acks = new Map();
    this._sharedAcks = new Map();
    for (const [sid, ts] of acks) if (this._subs.has(sid)) this._out.push({ type: "send", frame: { op: "ack", sid, ts } });
    for (const [sid, many] of shared) {
      if (this._subs.has(sid) && many.length) {
        this._out.push({ type: "send", frame: { op: "ack", sid, ts: many.length === 1 ? many[0] : many } });
      }
    }
  }

  _deliver(f, now) {
    const sub = this._subs.get(f.sid);
    if (sub === undefined || !f.records.length) return;
    let records = f.records;
    if (sub.shared) {
      records = this._sharedRepeatsDropped(sub, records, now);
      if (!records.length) return;
    } else {
      const era = f.era ?? 0;
      if (era !== sub.era) {
        if (era < sub.era) return; // a moved slot: an older era's records came before (M4)
        sub.era = era;
        sub.maxSeen = -1;
        sub.ackedTo = -1;
      }
      const seen = sub.maxSeen;
      if (records[0][0] <= seen) {
        records = records.filter((r) => r[0] > seen); // a redelivery after a failover
        if (!records.length) return;
      }
      sub.maxSeen = records[records.length - 1][0];
    }
    this._out.push({ type: "deliver", sid: f.sid, records, era: f.era ?? 0 });
  }

  _sharedRepeatsDropped(sub, records, now) {
    const keep = [];
    for (const r of records) {
      const ts = r[0];
      if (sub.acked.has(ts)) {
        if (!this._sharedAcks.has(sub.sid)) this._sharedAcks.set(sub.sid, []);
        this._sharedAcks.get(sub.sid).push(ts);
        this._wake = Math.min(this._wake, now);
        this._out.push({ type: "wakeAt", at: now });
      } else if ((sub.handed.get(ts) ?? this.conn) !== this.conn) {
        sub.handed.set(ts, this.conn);
      } else {
        sub.handed.set(ts, this.conn);
        if (sub.handed.size > HANDED_MAX) sub.handed.delete(sub.handed.keys().next().value);
        keep.push(r);
      }
    }
    return keep;
  }

  _subError(sub, err, now, f = {}) {
    if (err.code === "WRONG_GROUP" && typeof f.group === "string" && f.group) {
      // C7: the subscription goes on at that group: an unnamed one from (era, after + 1), a
      // named one from its offset, one with no position yet as it started. One with no
      // position yet goes on as a new start, not resumed: it was handed nothing, so records
      // purged before it got there are no gap ("earliest" passing eras nothing is left of)
      const named = sub.name !== null;
      if (named || Number.isSafeInteger(f.era) || sub.position === null) {
        const moved = !named && Number.isSafeInteger(f.era) && Number.isSafeInteger(f.after);
        this._subs.delete(sub.sid);
        this._acks.delete(sub.sid);
        this._sharedAcks.delete(sub.sid);
        this._out.push({
          type: "subscriptionMoved", sid: sub.sid, group: f.group,
          era: moved ? f.era : null, after: moved ? f.after : null, resume: sub.position !== null,
        });
        return;
      }
    }
    if (err.retriable && err.code !== "WRONG_GROUP") {
      this.lastError = `subscription ${sub.sid}: ${err.code}`;
      this._drop(now, this._pause);
      return;
    }
    if (err.code === "PURGED" && sub.skipGaps && !sub.shared && sub.position !== null && Number.isSafeInteger(err.last)) {
      // opted in (gaps: "skip"): go on after the purged range and say so in "subscribed"
      const first = sub.skipped?.first ?? err.first ?? sub.maxSeen + 1;
      sub.skipped = { first, last: err.last };
      sub.maxSeen = Math.max(sub.maxSeen, err.last);
      this._out.push({ type: "send", frame: sub.frame(now) });
      return;
    }
    this._subs.delete(sub.sid);
    this._acks.delete(sub.sid);
    this._sharedAcks.delete(sub.sid);
    this._out.push({ type: "subscriptionFailed", sid: sub.sid, error: err });
  }

  // --- time (C5, C8) ---

  _tick(now) {
    if (now >= this._flushAt) this._flush(now);
    if (this._acks.size || this._sharedAcks.size) this._flushAcks();
    this._expire(now);
    const s = this.settings;
    if (this.state === State.DISCONNECTED && now >= this._reconnectAt) {
      this._start(now);
    } else if (this.state === State.CONNECTING && now >= this._handshakeDeadline) {
      this.lastError = `${this.url}: no meta within ${s.handshakeTimeout} ms`;
      this._out.push({ type: "disconnect", conn: this.conn });
      this._tryNext(now);
    } else if (this.state === State.CONNECTED && s.probeAfter !== null && this.url) {
      if (this._subs.size && this._helloAt === null && now - this._heard >= s.probeAfter) {
        this._helloAt = now; // is a silent primary still there?
        this._out.push({ type: "send", frame: { op: "hello", client: CLIENT_NAME } });
      }
      const oldest = this._oldestOnWire();
      if (oldest !== null && now - oldest >= s.probeAfter && now >= this._nextProbe && !this._probing) {
        this._probing = true;
        this._nextProbe = now + s.probeAfter;
        this._out.push({ type: "probe", exclude: this.url });
      }
    }
  }

  _oldestOnWire() {
    for (const b of this._batches.values()) {
      if (b.onWire) return this._helloAt === null ? b.sentAt : Math.min(b.sentAt, this._helloAt);
    }
    return this._helloAt;
  }

  _expire(now) {
    const expired = [];
    for (const b of this._batches.values()) {
      if (b.deadline > now) break;
      expired.push(b);
    }
    if (expired.length) {
      const err = new TritonError("TIMEOUT", `no acknowledgement within ${this.settings.timeout} ms (last error: ${this.lastError || "none"})`, { retriable: false });
      for (const b of expired) this._failBatch(b, err, now);
    }
    for (const r of [...this._requests.values()]) {
      if (r.deadline <= now) {
        this._requests.delete(r.frame.id);
        const err = new TritonError("UNAVAILABLE", `no answer within ${this.settings.timeout} ms (last error: ${this.lastError || "none"})`, { retriable: false });
        this._out.push({ type: "requestFailed", ticket: r.ticket, error: err });
      }
    }
    for (const sub of [...this._subs.values()]) {
      if (this._subDeadline(sub) <= now) {
        this._subs.delete(sub.sid);
        this._acks.delete(sub.sid);
        this._sharedAcks.delete(sub.sid);
        const what = sub.position === null ? "subscribed" : "connected to the group's primary";
        const err = new TritonError("UNAVAILABLE", `not ${what} for ${this.settings.timeout} ms (last error: ${this.lastError})`, { retriable: false });
        this._out.push({ type: "subscriptionFailed", sid: sub.sid, error: err });
      }
    }
  }

  _subDeadline(sub) {
    if (sub.position === null) return sub.askedAt + this.settings.timeout;
    if (this._disconnectedSince !== null && this.state !== State.CONNECTED) return this._disconnectedSince + this.settings.timeout;
    return NEVER;
  }

  _schedule(now) {
    let at = Math.min(this._flushAt, this._wakeForState());
    const firstBatch = this._batches.values().next();
    if (!firstBatch.done) at = Math.min(at, firstBatch.value.deadline);
    const firstRequest = this._requests.values().next();
    if (!firstRequest.done) at = Math.min(at, firstRequest.value.deadline);
    for (const sub of this._subs.values()) at = Math.min(at, this._subDeadline(sub));
    if (at < this._wake) {
      this._wake = at;
      this._out.push({ type: "wakeAt", at });
    }
  }

  _wakeForState() {
    const s = this.settings;
    if (this.state === State.DISCONNECTED) return this._reconnectAt;
    if (this.state === State.CONNECTING) return this._handshakeDeadline;
    if (this.state === State.CONNECTED && s.probeAfter !== null) {
      const oldest = this._oldestOnWire();
      if (oldest !== null) return Math.max(oldest + s.probeAfter, this._nextProbe);
      if (this._subs.size) return this._heard + s.probeAfter;
    }
    return NEVER;
  }

  // --- closing ---

  _close() {
    if (this.state === State.CONNECTING || this.state === State.CONNECTED) {
      this._out.push({ type: "disconnect", conn: this.conn });
    }
    this.state = State.CLOSED;
    this._failPending(new TritonError("CLOSED", "client closed", { retriable: false }));
  }

  _failPending(err) {
    for (const ticket of this._tickets.keys()) this._out.push({ type: "publishFailed", ticket, error: err });
    for (const sid of this._subs.keys()) this._out.push({ type: "subscriptionFailed", sid, error: err });
    for (const r of this._requests.values()) this._out.push({ type: "requestFailed", ticket: r.ticket, error: err });
    this._requests.clear();
    this._tickets.clear();
    this._subs.clear();
    this._batches.clear();
    this._buffer.clear();
    this._buffered.clear();
    this._unsent = [];
    this._inFlight = 0;
    this._flushAt = NEVER;
    this._acks.clear();
    this._sharedAcks.clear();
  }

  _whenClosed(event) {
    const error = new TritonError("CLOSED", "client closed", { retriable: false });
    if (event.type === "publish") this._out.push({ type: "publishFailed", ticket: event.ticket, error });
    else if (event.type === "subscribe") this._out.push({ type: "subscriptionFailed", sid: event.sid, error });
    else if (event.type === "request") this._out.push({ type: "requestFailed", ticket: event.ticket, error });
  }

  /** Ids of the batches not yet acknowledged, in order (for tests and status). */
  get unacknowledged() {
    return [...this._batches.keys()].sort((a, b) => a - b);
  }

  get inFlight() {
    return this._inFlight;
  }
}

// --- the shell ------------------------------------------------------------------------

/**
 * The unfinished publish calls of one topic, in call order, and which group's link each is
 * on (null: none), so that each topic's publishes reach the broker in call order across
 * slot moves (tritonmq/client/ordering.py, docs/protocol.md §9 "Re-routing"). One group's
 * link keeps its calls in order, so the only rule needed is: a call is handed to group G's
 * link only once every earlier unfinished call of its topic is on G's link too. A call
 * being re-routed is on no link, so everything after it waits for it.
 */
class TopicOrder {
  constructor() {
    this._next = 0;
    this._at = new Map(); // call -> group (null: on no link), in call order
    this._count = new Map(); // group -> how many calls are on its link
    this._waiting = []; // [call, group, go], in call order
    this._waking = false;
  }

  get size() {
    return this._at.size;
  }

  /** A new call, after every call so far; on no link yet. */
  enter() {
    const call = this._next++;
    this._move(call, null);
    return call;
  }

  /** Run `go` (which hands `call` to `group`'s link) once every earlier unfinished call is
   * on that link: at once in the common case, else when the last of them gets there. */
  turn(call, group, go) {
    if (this._mayGo(call, group)) {
      this._place(call, group);
      go(); // before any call after it
      this._wake();
    } else {
      this._waiting.push([call, group, go]);
      this._waiting.sort((x, y) => x[0] - y[0]); // re-routed calls may ask in any order
    }
  }

  /** `call` left its link (refused there, to be re-routed). */
  off(call) {
    this._move(call, null);
  }

  /** `call` is finished: acknowledged or failed for good (never while it waits). */
  leave(call) {
    this._counted(this._at.get(call), -1);
    this._at.delete(call);
    this._wake();
  }

  _mayGo(call, group) {
    const others = this._at.size - 1;
    const mine = this._at.get(call) === group ? 1 : 0;
    if ((this._count.get(group) ?? 0) - mine >= others) return true; // every other call is on this link
    for (const [n, g] of this._at) {
      if (n >= call) break;
      if (g !== group) return false;
    }
    return true;
  }

  _move(call, group) {
    this._place(call, group);
    this._wake();
  }

  _place(call, group) {
    if (this._at.has(call)) this._counted(this._at.get(call), -1);
    this._at.set(call, group);
    this._counted(group, 1);
  }

  _counted(group, by) {
    const n = (this._count.get(group) ?? 0) + by;
    if (n) this._count.set(group, n);
    else this._count.delete(group);
  }

  /** Hand over, in call order, every waiting call whose turn has come. A waiting call is on
   * no link, so only the first waiting one can be due; handing it over may make the next
   * due, which needs only the calls between them checked: one pass over the calls ahead,
   * stopping at the first on another link (nothing to do, or O(1), when none waits). */
  _wake() {
    if (this._waking || !this._waiting.length) return;
    this._waking = true; // `go` hands a publish to a link, which settles nothing at once
    try {
      let [due, group] = this._waiting[0];
      for (const [call, at] of this._at) {
        if (call < due) {
          if (at !== group) return;
          continue;
        }
        const [, , go] = this._waiting.shift();
        this._place(call, group);
        go();
        if (!this._waiting.length || this._waiting[0][1] !== group) return;
        due = this._waiting[0][0];
      }
    } finally {
      this._waking = false;
    }
  }
}


class Emitter {
  constructor() {
    this._handlers = new Map();
  }

  on(event, fn) {
    if (!this._handlers.has(event)) this._handlers.set(event, new Set());
    this._handlers.get(event).add(fn);
    return this;
  }

  off(event, fn) {
    this._handlers.get(event)?.delete(fn);
    return this;
  }

  _emit(event, ...args) {
    for (const fn of [...(this._handlers.get(event) ?? [])]) {
      try {
        fn(...args);
      } catch (e) {
        queueMicrotask(() => {
          throw e; // a listener's bug surfaces as an uncaught error, not as ours
        });
      }
    }
  }
}

const realClock = {
  now: () => performance.now(),
  setTimeout: (fn, ms) => globalThis.setTimeout(fn, ms),
  clearTimeout: (h) => globalThis.clearTimeout(h),
};

function randomUuid() {
  return globalThis.crypto.getRandomValues(new Uint8Array(16));
}

/** Events the shell reports as the application's view of a connection's state. */
function publicState(state) {
  if (state === State.CONNECTED) return "connected";
  if (state === State.RESOLVING || state === State.CONNECTING) return "connecting";
  return "disconnected";
}

/**
 * Open one WebSocket, send `frames`, and return the first answer `want` accepts; an `error`
 * frame without id/sid (a refused token) rejects. For cluster reads and probes.
 */
function ask(env, url, frames, want, timeoutMs) {
  return new Promise((resolve, reject) => {
    let ws;
    let done = false;
    const finish = (err, value) => {
      if (done) return;
      done = true;
      env.clock.clearTimeout(timer);
      try {
        ws?.close();
      } catch {
        // already closed
      }
      if (err) reject(err);
      else resolve(value);
    };
    const timer = env.clock.setTimeout(() => finish(new TritonError("UNAVAILABLE", `${url}: no answer within ${timeoutMs} ms`)), timeoutMs);
    try {
      ws = new env.WebSocket(url, [SUBPROTOCOL]);
    } catch (e) {
      finish(new TritonError("UNAVAILABLE", `${url}: ${e.message ?? e}`));
      return;
    }
    ws.onopen = () => {
      for (const f of frames) ws.send(encodeFrame(f));
    };
    ws.onmessage = (ev) => {
      let f;
      try {
        f = decodeFrame(ev.data);
      } catch {
        return;
      }
      if (f.op === "error" && f.id === undefined && f.sid === undefined) finish(errorFromFrame(f));
      else if (want(f)) finish(null, f);
    };
    ws.onerror = () => {};
    ws.onclose = (ev) => finish(new TritonError("UNAVAILABLE", `${url} closed: ${ev?.code ?? ""} ${ev?.reason ?? ""}`.trim()));
  });
}

/** The connection to one group's primary: performs what its `ClientProtocol` decides. */
class Link {
  constructor(client, group) {
    this.client = client;
    this.group = group;
    const o = client._options;
    const settings = { group };
    for (const k of Object.keys(DEFAULTS)) if (o[k] !== undefined && k !== "group") settings[k] = o[k];
    this.protocol = new ClientProtocol(settings, client._random, client._token);
    this._ws = null; // the open socket of the protocol's current connection
    this._sockets = new Map(); // conn -> socket
    this._timer = null;
    this._timerAt = Infinity;
    this._closed = false;
    this._resolved = false; // see Client._candidatesFor
    this._state = null;
  }

  start() {
    this.handle({ type: "tick" });
  }

  get state() {
    return publicState(this.protocol.state);
  }

  handle(event) {
    const actions = this.protocol.handle(event, this.client._clock.now());
    for (const a of actions) this._perform(a);
    const state = this.protocol.state === State.CLOSED ? "disconnected" : this.state;
    if (state !== this._state) {
      this._state = state;
      this.client._linkState(this, state, state === "connected" ? "" : this.protocol.lastError);
    }
  }

  _perform(a) {
    const c = this.client;
    switch (a.type) {
      case "send":
        if (this._ws !== null) this._ws.send(encodeFrame(a.frame));
        break;
      case "connect":
        this._connect(a.conn, a.url);
        break;
      case "disconnect":
        this._disconnect(a.conn);
        break;
      case "resolve":
        c._candidatesFor(this.group, this._resolved).then(
          (urls) => !this._closed && this.handle({ type: "resolved", urls }),
          (e) => !this._closed && this.handle({ type: "resolveFailed", error: e.message ?? String(e) }),
        );
        this._resolved = true;
        break;
      case "probe":
        c._probe(this.group, a.exclude).then(([epoch, primaryUrl]) => !this._closed && this.handle({ type: "epochSeen", epoch, primaryUrl }));
        break;
      case "publishDone":
        c._settle(a.ticket, null, a);
        break;
      case "publishFailed":
        c._settle(a.ticket, a.error, null);
        break;
      case "answered":
        c._settle(a.ticket, null, a.frame);
        break;
      case "requestFailed":
        c._settle(a.ticket, a.error, null);
        break;
      case "deliver":
        c._subs.get(a.sid)?._records(a.records, a.era);
        break;
      case "subscriptionMoved":
        c._subs.get(a.sid)?._moved(a);
        break;
      case "subscribed":
        c._subs.get(a.sid)?._subscribed(a);
        break;
      case "subscriptionFailed":
        c._subs.get(a.sid)?._failed(a.error);
        break;
      case "presence":
        c._subs.get(a.sid)?._presence(a.event, a.member);
        break;
      case "wakeAt":
        this._wakeAt(a.at);
        break;
      default:
        throw new TypeError(`unknown action ${a.type}`);
    }
  }

  _wakeAt(at) {
    if (this._closed || at >= this._timerAt) return;
    const clock = this.client._clock;
    if (this._timer !== null) clock.clearTimeout(this._timer);
    this._timerAt = at;
    this._timer = clock.setTimeout(() => {
      this._timer = null;
      this._timerAt = Infinity;
      if (!this._closed) this.handle({ type: "tick" });
    }, Math.max(0, at - clock.now()));
  }

  _connect(conn, url) {
    let ws;
    try {
      ws = new this.client._WebSocket(url, [SUBPROTOCOL]);
    } catch (e) {
      queueMicrotask(() => !this._closed && this.handle({ type: "failed", conn, error: e.message ?? String(e) }));
      return;
    }
    this._sockets.set(conn, ws);
    let opened = false;
    ws.onopen = () => {
      opened = true;
      this._ws = ws;
      this.handle({ type: "opened", conn });
    };
    ws.onmessage = (ev) => {
      let frame;
      try {
        frame = decodeFrame(ev.data);
      } catch (e) {
        this.client._emit("error", e); // a broker frame we cannot read: dropped, as the Python client does
        return;
      }
      this.handle({ type: "frame", conn, frame });
    };
    ws.onerror = () => {}; // a close event follows
    ws.onclose = (ev) => {
      this._sockets.delete(conn);
      if (this._ws === ws) this._ws = null;
      if (this._closed) return;
      const reason = `${ev?.code ?? ""} ${ev?.reason ?? ""}`.trim() || "closed";
      this.handle(opened ? { type: "closed", conn, reason } : { type: "failed", conn, error: reason });
    };
  }

  _disconnect(conn) {
    const ws = this._sockets.get(conn);
    this._sockets.delete(conn);
    if (ws === undefined) return;
    if (this._ws === ws) this._ws = null;
    ws.onopen = ws.onmessage = ws.onclose = null;
    try {
      ws.close(1000);
    } catch {
      // not open yet, or already closing
    }
  }

  close() {
    if (this._closed) return;
    this.handle({ type: "close" });
    this._closed = true;
    if (this._timer !== null) this.client._clock.clearTimeout(this._timer);
    for (const conn of [...this._sockets.keys()]) this._disconnect(conn);
  }
}

/**
 * A subscription: `onMessage(msg)` gets each record once, in ts order (broadcast), and the
 * record is acknowledged when the callback returns or its promise settles. Events:
 * "subscribed" `{next, resumed, recovered, skipped}` on every (re)subscription; "error" when
 * the callback throws (the record is still acknowledged: it was delivered); "closed" with
 * the error that ended it (`null` after `close()`). With `presence`: "members" (the whole list,
 * after every subok), "join" and "leave" (a member map `{client, user, info}`).
 */
export class Subscription extends Emitter {
  constructor(client, link, sid, topic, onMessage, options) {
    super();
    this._client = client;
    this._link = link;
    this.sid = sid;
    this.topic = topic;
    this.subscription = options.subscription ?? null;
    this.mode = options.mode ?? "broadcast";
    this.hasPresence = options.presence === true;
    /** With `presence`: the topic's members now, by `client` id (refreshed after every subok). */
    this.members = new Map();
    this._onMessage = onMessage;
    this._queue = [];
    this._running = false;
    this.closed = false;
    this.error = null;
    this._ready = null; // [resolve, reject] of subscribe()'s promise until the first subok
    this._options = options;
  }

  _records(records, era = 0) {
    if (this.closed) return;
    for (const r of records) this._queue.push([r, era]);
    if (!this._running) this._run();
  }

  /** Its slot moved (docs/replication.md M4, M5): it goes on at `a.group`'s link, an
   * unnamed one from (era, after + 1) (resumed if it had a position, `a.resume`), a named
   * one from its offset. */
  _moved(a) {
    if (this.closed) return;
    const o = this._options;
    const link = this._client._link(a.group);
    this._link = link;
    const moved = a.era !== null && a.after !== null;
    const start = moved ? a.after + 1 : this.subscription !== null ? "latest" : (o.from ?? "latest");
    link.handle({
      type: "subscribe", sid: this.sid, topic: this.topic, name: this.subscription, start,
      window: o.window ?? null, mode: this.mode, gaps: o.gaps ?? "fail", presence: this.hasPresence,
      info: o.info ?? null, era: moved ? a.era : 0, resume: moved && a.resume !== false,
    });
  }

  async _run() {
    this._running = true;
    try {
      while (this._queue.length && !this.closed) {
        const [[ts, uuid, key, value, headers], era] = this._queue.shift();
        const msg = { topic: this.topic, ts, value, key, headers: headers ?? null, uuid: toBytes(uuid) };
        try {
          await this._onMessage(msg);
        } catch (e) {
          this._emit("error", e);
        }
        if (!this.closed && !this._link._closed) this._link.handle({ type: "ack", sid: this.sid, ts, era });
      }
    } finally {
      this._running = false;
    }
  }

  _subscribed(a) {
    if (this._ready) {
      this._ready[0](this);
      this._ready = null;
    }
    this._emit("subscribed", { next: a.next, resumed: a.resumed, recovered: a.recovered, skipped: a.skipped });
    if (this.hasPresence) this._refreshMembers();
  }

  /** §13: a (new) primary's members replace the list; joins and leaves apply on top, in order. */
  _refreshMembers() {
    const frame = { op: "presence", topic: this.topic };
    const ticket = this._client._nextTicket++;
    this._client._pending.set(ticket, {
      resolve: (answer) => {
        if (this.closed) return;
        this.members = new Map(answer.members.map((m) => [m.client, m]));
        this._emit("members", [...this.members.values()]);
      },
      reject: (e) => this._emit("error", e),
    });
    this._link.handle({ type: "request", ticket, frame });
  }

  _presence(event, member) {
    if (this.closed) return;
    if (event === "join") this.members.set(member.client, member);
    else this.members.delete(member.client);
    this._emit(event, member);
  }

  /** The members of this subscription's topic now (a fresh `presence` request). */
  presence() {
    return this._client.presence(this.topic);
  }

  _failed(error) {
    this._client._subs.delete(this.sid);
    this.error = error;
    this.closed = true;
    if (this._ready) {
      this._ready[1](error);
      this._ready = null;
    }
    this._emit("closed", error);
  }

  /** Stop receiving: acks already due are sent first, then `unsub`. */
  close() {
    if (this.closed) return;
    this.closed = true;
    this._client._subs.delete(this.sid);
    if (!this._link._closed) this._link.handle({ type: "unsubscribe", sid: this.sid });
    this._emit("closed", null);
  }
}

/**
 * A TritonMQ client over `tritonmq.v1.json`. Use `connect(url, options)`; see tritonmq.d.ts
 * and docs/web.md. Events: "state" `{state, reason, group}` (`connecting`, `connected`,
 * `disconnected`), "error" (a broker frame that could not be read).
 */
export class Client extends Emitter {
  constructor(url, options = {}) {
    super();
    if (typeof url !== "string" || !/^wss?:\/\/./.test(url)) {
      throw new TritonError("CONFIG", `unsupported broker URL ${JSON.stringify(url)}: use ws:// or wss://host:port`);
    }
    this.url = url;
    this._options = options;
    this._WebSocket = options.WebSocket ?? globalThis.WebSocket;
    if (typeof this._WebSocket !== "function") {
      throw new TritonError("CONFIG", "no WebSocket here: pass the WebSocket option (Node 20: run with --experimental-websocket)");
    }
    this._clock = options.clock ?? realClock;
    this._random = options.random ?? Math.random;
    this._token = options.token ?? null;
    this._known = [url];
    this._view = new ClusterView();
    this._links = new Map();
    this._subs = new Map();
    this._nextSid = 1;
    this._nextTicket = 1;
    this._pending = new Map(); // ticket -> {resolve, reject, topic}
    this._orders = new Map(); // topic -> TopicOrder of its unfinished publishes
    this._closed = false;
    this._reading = null;
    this.state = "disconnected";
  }

  get _env() {
    return { WebSocket: this._WebSocket, clock: this._clock };
  }

  // --- the cluster view ---

  /** Re-read the slot map and every group's brokers from any known broker (`meta`). */
  async refresh() {
    if (this._reading === null) {
      this._reading = this._readCluster().finally(() => {
        this._reading = null;
      });
    }
    return this._reading;
  }

  async _readCluster() {
    let last = null;
    for (const url of [...this._known]) {
      const frames = [{ op: "hello", client: CLIENT_NAME, token: this._token }, { op: "meta", id: 1 }];
      let meta;
      try {
        meta = await ask(this._env, url, frames, (f) => f.op === "meta" && f.id === 1, 5000);
      } catch (e) {
        if (e.code === "UNAUTHENTICATED" || e.code === "TOKEN_EXPIRED") throw e;
        last = e;
        continue;
      }
      const groups = meta.groups ?? { [meta.group]: { primary_url: meta.primary_url ?? null, members: meta.members ?? {} } };
      for (const g of Object.values(groups)) {
        for (const u of Object.values(g.members ?? {})) if (!this._known.includes(u)) this._known.push(u);
      }
      this._view = new ClusterView(groups, meta.slots ?? null);
      return this._view;
    }
    throw new TritonError("UNAVAILABLE", `no broker reachable among ${this._known.join(", ")}: ${last?.message ?? "none"}`);
  }

  /** The brokers of `group` to try. A link's first resolve takes the view `connect()` has just
   * read; later ones (after its candidates failed) read the cluster again. */
  async _candidatesFor(group, again = true) {
    const held = !again && this._view ? this._view.candidates(group) : [];
    if (held.length) return held;
    await this.refresh();
    return this._view.candidates(group);
  }

  /** C5 without ZooKeeper: ask the group's other brokers for its epoch and primary. */
  async _probe(group, exclude) {
    const ours = this._view.candidates(group); // other groups' brokers cannot answer for this one
    const urls = (ours.length ? ours : this._known).filter((u) => u !== exclude);
    const hello = [{ op: "hello", client: CLIENT_NAME, token: this._token }];
    const answers = await Promise.allSettled(urls.map((u) => ask(this._env, u, hello, (f) => f.op === "meta", 1000)));
    let best = [null, null];
    for (const a of answers) {
      const m = a.status === "fulfilled" ? a.value : null;
      if (m && m.group === group && m.primary_url && (best[0] === null || m.epoch > best[0])) best = [m.epoch, m.primary_url];
    }
    return best;
  }

  _link(group) {
    if (this._closed) throw new TritonError("CLOSED", "client closed", { retriable: false });
    let link = this._links.get(group);
    if (link === undefined) {
      link = new Link(this, group);
      this._links.set(group, link);
      link.start();
    }
    return link;
  }

  _linkState(link, state, reason) {
    const states = [...this._links.values()].map((l) => (l === link ? state : l._state ?? "connecting"));
    const overall = this._closed ? "disconnected" : states.includes("disconnected") ? "disconnected" : states.includes("connecting") ? "connecting" : "connected";
    this._setState(overall, reason, link.group);
  }

  _setState(state, reason, group) {
    if (state === this.state) return;
    this.state = state;
    this._emit("state", { state, reason: reason ?? "", group: group ?? null });
  }

  // --- lifecycle ---

  async _open() {
    this._setState("connecting", "", null);
    const limit = this._options.connectTimeout ?? 30_000;
    const deadline = this._clock.now() + limit;
    let last = null;
    for (let failures = 0; !this._closed; failures++) {
      try {
        await this.refresh();
        if (!Object.keys(this._view.groups).length) throw new TritonError("UNAVAILABLE", `no broker group is registered at ${this.url}`);
        this._setState("connected", "", null);
        return this;
      } catch (e) {
        if (e.code === "UNAUTHENTICATED" || e.code === "TOKEN_EXPIRED") {
          this._setState("disconnected", e.message, null);
          throw e;
        }
        last = e;
      }
      const wait = Math.min(500, 20 * 2 ** failures) * (0.5 + this._random() / 2);
      if (this._clock.now() + wait >= deadline) break;
      await new Promise((r) => this._clock.setTimeout(r, wait));
    }
    const err = this._closed
      ? new TritonError("CLOSED", "client closed", { retriable: false })
      : new TritonError("UNAVAILABLE", `cluster not reachable within ${limit} ms: ${last?.message ?? ""}`, { retriable: false });
    this._setState("disconnected", err.message, null);
    throw err;
  }

  /** Close every connection; pending publishes and subscriptions fail with code `CLOSED`. */
  async close() {
    if (this._closed) return;
    this._closed = true;
    for (const link of this._links.values()) link.close();
    for (const sub of [...this._subs.values()]) sub._failed(new TritonError("CLOSED", "client closed", { retriable: false }));
    this._setState("disconnected", "client closed", null);
  }

  /** Present `token` from now on; live connections send it at once in a new `hello`. */
  setToken(token) {
    this._token = token;
    for (const link of this._links.values()) link.handle({ type: "setToken", token });
  }

  /** The group that owns `topic` in the cluster view last read. */
  groupOf(topic) {
    return this._view.groupOf(topic);
  }

  // --- producing ---

  /**
   * Publish one record (`value`: a string, published as UTF-8 text, or a `Uint8Array`).
   * Resolves with `{topic, ts, group}` once every in-sync replica holds it; with `era` too
   * when the record is not `group`'s of its slot's current era (a moved slot: a retry answered
   * with the ts the slot's previous group stored it at; docs/protocol.md §6 `puback`).
   */
  async publish(topic, value, options = {}) {
    const [ack] = await this.publishBatch(topic, [value], options);
    return ack;
  }

  /** Publish many values at once (batched on the wire); acks in the same order. */
  async publishBatch(topic, values, options = {}) {
    checkTopic(topic);
    if (!Array.isArray(values)) throw new TritonError("CONFIG", "values must be an array");
    const key = options.key ?? null;
    const headers = options.headers ?? null;
    if (key !== null) checkValue(key, "key");
    if (headers !== null && (!isObject(headers))) throw new TritonError("CONFIG", "headers must be an object");
    // when the broker acknowledges them: "memory", "written", "synced" (docs/protocol.md `pub`)
    const durability = options.durability ?? "";
    if (!["", "memory", "written", "synced"].includes(durability)) {
      throw new TritonError("CONFIG", "durability must be memory, written or synced");
    }
    const records = values.map((v) => {
      checkValue(v, "value");
      return [randomUuid(), key, v, headers];
    });
    // A slot move (docs/replication.md, "Slot moves"): the old group names the new one in
    // `group` while the map still names the old owner until the move completes, and the new
    // group's view may lag a moment: follow `group`, pausing 50 ms, doubling to 1 s, between
    // re-routes after the first. The topic's earlier publishes go first (TopicOrder).
    let order = this._orders.get(topic);
    if (order === undefined) this._orders.set(topic, (order = new TopicOrder()));
    const call = order.enter();
    try {
      let group = this._view.groupOf(topic);
      for (let i = 0; i < 12; i++) {
        const link = this._link(group);
        try {
          const hand = (ticket) => () => {
            try {
              link.handle({ type: "publish", ticket, topic, records, durability });
            } catch (e) {
              this._settle(ticket, e, null); // maybe later, from another call's turn: fail this one only
            }
          };
          const done = await this._call(topic, (ticket) => order.turn(call, group, hand(ticket)));
          return done.ts.map((ts, i) => {
            const era = done.eras?.[i] ?? -1; // said only for a moved slot (docs/protocol.md §6)
            return era >= 0 ? { topic, ts, group: done.group, era } : { topic, ts, group: done.group };
          });
        } catch (e) {
          if (e.code !== "WRONG_GROUP") throw e;
          order.off(call);
          if (i > 0) await new Promise((r) => this._clock.setTimeout(r, Math.min(1000, 50 * 2 ** (i - 1))));
          await this.refresh(); // the slot map moved: the same uuids go to the owner
          group = e.group && this._view.groups[e.group] ? e.group : this._view.groupOf(topic);
        }
      }
      throw new TritonError("WRONG_GROUP", `topic ${JSON.stringify(topic)} kept moving between groups`);
    } finally {
      order.leave(call);
      if (!order.size) this._orders.delete(topic);
    }
  }

  _call(topic, start) {
    if (this._closed) return Promise.reject(new TritonError("CLOSED", "client closed", { retriable: false }));
    return new Promise((resolve, reject) => {
      const ticket = this._nextTicket++;
      this._pending.set(ticket, { resolve, reject, topic });
      start(ticket);
    });
  }

  _settle(ticket, error, value) {
    const p = this._pending.get(ticket);
    if (p === undefined) return;
    this._pending.delete(ticket);
    if (error) p.reject(error);
    else p.resolve(value);
  }

  /** Who is subscribed to `topic` with presence now: `[{client, user, info}]` (§13). */
  async presence(topic) {
    checkTopic(topic);
    for (let i = 0; i < 5; i++) {
      const link = this._link(this._view.groupOf(topic));
      try {
        const answer = await this._call(topic, (ticket) => link.handle({ type: "request", ticket, frame: { op: "presence", topic } }));
        return answer.members;
      } catch (e) {
        if (e.code !== "WRONG_GROUP") throw e;
        await this.refresh();
      }
    }
    throw new TritonError("WRONG_GROUP", `topic ${JSON.stringify(topic)} kept moving between groups`);
  }

  // --- consuming ---

  /**
   * Subscribe to `topic`; resolves with the `Subscription` once the primary confirmed it.
   * options: `subscription` (a name: durable), `from` ("latest", "earliest" or a ts),
   * `window`, `mode` ("broadcast" or "shared"), `gaps` ("fail": a resume that finds records
   * purged ends the subscription with code PURGED and the range, as the Python client does;
   * "skip": go on after them and report `recovered: false, skipped: {first, last}`),
   * `presence` (true: be listed in the topic's presence, get "join"/"leave"/"members" events)
   * with `info` (what this member says about itself, e.g. a chat name).
   */
  subscribe(topic, onMessage, options = {}) {
    checkTopic(topic);
    if (typeof onMessage !== "function") throw new TritonError("CONFIG", "onMessage must be a function");
    const from = options.from ?? "latest";
    if (!(from === "latest" || from === "earliest" || (Number.isSafeInteger(from) && from >= 0))) {
      throw new TritonError("CONFIG", "from must be 'latest', 'earliest' or a ts >= 0");
    }
    const mode = options.mode ?? "broadcast";
    if (mode !== "broadcast" && mode !== "shared") throw new TritonError("CONFIG", "mode must be 'broadcast' or 'shared'");
    if (mode === "shared" && !options.subscription) throw new TritonError("CONFIG", "a shared subscription needs a name");
    if (options.info != null && (typeof options.info !== "string" || options.presence !== true)) {
      throw new TritonError("CONFIG", "info must be a string, given with presence: true");
    }
    const gaps = options.gaps ?? "fail";
    if (gaps !== "fail" && gaps !== "skip") throw new TritonError("CONFIG", "gaps must be 'fail' or 'skip'");
    const link = this._link(this._view.groupOf(topic));
    const sid = this._nextSid++;
    const sub = new Subscription(this, link, sid, topic, onMessage, options);
    this._subs.set(sid, sub);
    return new Promise((resolve, reject) => {
      sub._ready = [resolve, reject];
      link.handle({
        type: "subscribe", sid, topic, name: options.subscription ?? null, start: from,
        window: options.window ?? null, mode, gaps, presence: options.presence === true, info: options.info ?? null,
      });
    });
  }
}

/**
 * One connection to one broker for operators' requests (docs/protocol.md §5): `meta`,
 * `stats`, and the admin ops `subdel`, `subreset` and `slotmove`. It is what the web console
 * speaks (clients/console). Unlike `Client` it neither routes nor retries: the caller picks
 * the broker (any broker answers `meta`, `stats` and `slotmove`; `subdel`/`subreset` go to the
 * primary of the topic's group, else `NOT_PRIMARY`). The connection opens on the first request
 * with a `hello` carrying `token`; a refused token rejects every waiting request with its code
 * (`UNAUTHENTICATED`, `TOKEN_EXPIRED`); a dropped connection rejects what it carried with
 * `UNAVAILABLE`, and the next request opens a new one. A broker's refusal rejects with a
 * `TritonError` of the broker's code (`FORBIDDEN` for a principal that is not an admin).
 */
export class BrokerConnection {
  constructor(url, options = {}) {
    if (typeof url !== "string" || !/^wss?:\/\/./.test(url)) {
      throw new TritonError("CONFIG", `unsupported broker URL ${JSON.stringify(url)}: use ws:// or wss://host:port`);
    }
    this.url = url;
    this._token = options.token ?? null;
    this._WebSocket = options.WebSocket ?? globalThis.WebSocket;
    this._clock = options.clock ?? realClock;
    this._timeout = options.timeout ?? 10_000;
    this._ws = null;
    this._open = false; // the hello was answered
    this._queue = []; // frames waiting for the hello's answer
    this._waiting = new Map(); // id -> {resolve, reject, timer}
    this._nextId = 1;
    this.hello = null; // the broker's answer to hello: who it is, its group and role
  }

  /** Send `frame` (its `id` is set here); resolves with the answer, rejects with its error. */
  request(frame) {
    return new Promise((resolve, reject) => {
      const id = this._nextId++;
      const timer = this._clock.setTimeout(() => {
        this._settle(id, new TritonError("TIMEOUT", `${this.url}: no answer to ${frame.op} within ${this._timeout} ms`));
      }, this._timeout);
      this._waiting.set(id, { resolve, reject, timer });
      const f = encodeFrame({ ...frame, id });
      if (this._open) this._ws.send(f);
      else {
        this._queue.push(f);
        if (this._ws === null) this._connect();
      }
    });
  }

  meta() {
    return this.request({ op: "meta" });
  }

  stats(topic = null) {
    return this.request({ op: "stats", topic });
  }

  deleteSubscription(topic, subscription, { execute = false } = {}) {
    return this.request({ op: "subdel", topic, subscription, execute });
  }

  /** `to`: "earliest", "latest" or a ts (the first record handed out next). */
  resetSubscription(topic, subscription, to, { execute = false } = {}) {
    return this.request({ op: "subreset", topic, subscription, to, execute });
  }

  /** Begin moving `slot` to group `to`; resolves with `slotinfo` once the move began. */
  moveSlot(slot, to) {
    return this.request({ op: "slotmove", slot, to });
  }

  close() {
    this._drop(new TritonError("CLOSED", "connection closed", { retriable: false }));
  }

  _connect() {
    let ws;
    try {
      ws = new this._WebSocket(this.url, [SUBPROTOCOL]);
    } catch (e) {
      this._drop(new TritonError("UNAVAILABLE", `${this.url}: ${e.message ?? e}`));
      return;
    }
    this._ws = ws;
    ws.onopen = () => ws.send(encodeFrame({ op: "hello", client: CLIENT_NAME, token: this._token }));
    ws.onmessage = (ev) => {
      if (ws !== this._ws) return;
      let f;
      try {
        f = decodeFrame(ev.data);
      } catch {
        return;
      }
      if (f.op === "error" && f.id === undefined && f.sid === undefined) {
        this._drop(errorFromFrame(f)); // the hello was refused
      } else if (f.op === "meta" && f.id === 0 && !this._open) {
        this.hello = f;
        this._open = true;
        for (const q of this._queue.splice(0)) ws.send(q);
      } else if (f.id !== undefined && f.id !== 0) {
        this._settle(f.id, f.op === "error" ? errorFromFrame(f) : null, f);
      }
    };
    ws.onerror = () => {};
    ws.onclose = (ev) => {
      if (ws === this._ws) this._drop(new TritonError("UNAVAILABLE", `${this.url} closed: ${ev?.code ?? ""} ${ev?.reason ?? ""}`.trim()));
    };
  }

  _settle(id, error, frame) {
    const w = this._waiting.get(id);
    if (w === undefined) return;
    this._waiting.delete(id);
    this._clock.clearTimeout(w.timer);
    if (error) w.reject(error);
    else w.resolve(frame);
  }

  /** Fail everything waiting with `error` and forget the socket (the next request reconnects). */
  _drop(error) {
    const ws = this._ws;
    this._ws = null;
    this._open = false;
    this._queue = [];
    try {
      ws?.close();
    } catch {
      // already closed
    }
    for (const id of [...this._waiting.keys()]) this._settle(id, error);
  }
}

/**
 * Why `name` cannot be a topic name, or null: the rule the broker enforces (docs/protocol.md
 * §3, "Topic names"; tritonmq/wire/names.py; vectors in clients/vectors/topic_names.json).
 * 1..249 characters, not "." or "..", no "/", no control character, and no "*" or ">":
 * those are a pattern, and subscribing by pattern is not supported.
 */
export function topicProblem(name) {
  if (typeof name !== "string") return `a topic name must be a string, not ${typeof name}`;
  if (name.length === 0) return "a topic name must not be empty";
  const length = [...name].length; // code points, as the broker counts
  if (length > 249) return `a topic name has at most max_name_len=249 characters, not ${length}`;
  if (name === "." || name === "..") return `'${name}' is not a valid topic name ('.' and '..' are reserved)`;
  if (name.includes("/")) return `a topic name must not contain '/': ${JSON.stringify(name.slice(0, 60))}`;
  const control = /[\u0000-\u001f\u007f-\u009f]/.exec(name);
  if (control) {
    const hex = control[0].codePointAt(0).toString(16).toUpperCase().padStart(4, "0");
    return `a topic name must not contain control characters (U+${hex})`;
  }
  const wild = /[*>]/.exec(name);
  if (wild) {
    return `a topic name must not contain '${wild[0]}': ${JSON.stringify(name.slice(0, 60))} looks like a pattern, ` +
      "and subscribing by pattern is not supported (subscribe to each topic)";
  }
  return null;
}

function checkTopic(topic) {
  const problem = topicProblem(topic);
  if (problem !== null) throw new TritonError("CONFIG", problem);
}

function checkValue(v, what) {
  if (typeof v === "string") {
    if (/\p{Surrogate}/u.test(v)) throw new TritonError("CONFIG", `${what} holds a lone surrogate: not UTF-8 text`);
  } else if (!(v instanceof Uint8Array)) {
    throw new TritonError("CONFIG", `${what} must be a string or a Uint8Array`);
  }
}

/** Connect to a cluster through any of its brokers: `await connect("ws://host:port", {token})`. */
export async function connect(url, options = {}) {
  const client = new Client(url, options);
  return client._open();
}
