// Type declarations for tritonmq.js (the TritonMQ client for browsers and Node 20+).

export const SUBPROTOCOL: "tritonmq.v1.json";
export const CLIENT_NAME: string;

/** Broker codes (docs/protocol.md §7) and the client's own: CONFIG, CLOSED, TIMEOUT, UNAVAILABLE. */
export type ErrorCode =
  | "BAD_FRAME" | "TOO_LARGE" | "UNKNOWN_OP" | "BAD_REQUEST" | "NOT_PRIMARY" | "NOT_ENOUGH_REPLICAS"
  | "UNAVAILABLE" | "STALE_EPOCH" | "WRONG_GROUP" | "FULL" | "PURGED" | "INTERNAL" | "UNAUTHENTICATED"
  | "TOKEN_EXPIRED" | "FORBIDDEN" | "LIMIT" | "CONFIG" | "CLOSED" | "TIMEOUT" | (string & {});

export class TritonError extends Error {
  constructor(code: ErrorCode, message: string, extra?: Partial<Pick<TritonError, "retriable" | "primary" | "group" | "first" | "last">>);
  readonly code: ErrorCode;
  readonly retriable: boolean;
  /** NOT_PRIMARY: the primary's URL as the broker knew it. */
  readonly primary?: string;
  /**
   * WRONG_GROUP: the group that owns the topic (while its slot moves: the new group). The
   * frame's `era`/`after` are not kept here: a subscription follows them itself (the
   * protocol's "subscriptionMoved" action), a publish re-routes to `group`.
   */
  readonly group?: string;
  /** PURGED: the purged ts range the reader missed. */
  readonly first?: number;
  readonly last?: number;
}

/** A binary field: a string stands for its UTF-8 bytes (text), a Uint8Array for any bytes. */
export type Binary = string | Uint8Array;
export type HeaderValue = string | number | boolean | Uint8Array;
export type Headers = Record<string, HeaderValue>;

export interface Ack {
  topic: string;
  ts: number;
  /** The group that answered. */
  group: string;
  /**
   * A moved slot only (docs/protocol.md §6 `puback` `eras`): the era the record was written
   * in, when it is not `group`'s record of the current era (a retry answered from the slot's
   * previous group: `ts` is the ts of that era's group, named by the slot's history).
   */
  era?: number;
}

export interface Message {
  topic: string;
  ts: number;
  /** A string when the bytes are UTF-8 text (published as text), else a Uint8Array. */
  value: Binary;
  key: Binary | null;
  headers: Headers | null;
  uuid: Uint8Array;
}

export type ConnectionState = "connecting" | "connected" | "disconnected";

export interface StateEvent {
  state: ConnectionState;
  /** Why: the last error seen ("" when none). */
  reason: string;
  /** The broker group whose connection changed (null: the cluster read). */
  group: string | null;
}

export interface SubscribedEvent {
  /** subok.next: where delivery starts. */
  next: number;
  /** false on the first subscription, true after a reconnect. */
  resumed: boolean;
  /** true when a resume lost nothing: delivery goes on right after the last record handed over. */
  recovered: boolean;
  /** With `gaps: "skip"`: the purged ts range that was skipped on this resume, else null. */
  skipped: { first: number; last: number } | null;
}

/** A presence member (docs/protocol.md §13): `client` is new on every (re)subscription. */
export interface Member {
  client: string;
  /** The principal of its connection ("" for anonymous). */
  user: string;
  /** What the member said about itself (not verified). */
  info: string;
}

export interface Clock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export interface ConnectOptions {
  /** A JWT presented in every `hello` (docs/security.md). */
  token?: string | null;
  /** A WebSocket constructor (default: globalThis.WebSocket; Node 20 needs --experimental-websocket). */
  WebSocket?: new (url: string, protocols: string[]) => WebSocket;
  /** How long connect() keeps trying to read the cluster, ms (30000). */
  connectTimeout?: number;
  /** A publish not acknowledged, or a subscription not confirmed, within this fails, ms (30000). */
  timeout?: number;
  maxInFlight?: number;
  batchSize?: number;
  batchBytes?: number;
  /** ms to wait for more records before sending a batch (0: the next turn of the event loop). */
  linger?: number;
  retries?: number;
  handshakeTimeout?: number;
  backoffBase?: number;
  backoffMax?: number;
  /** Ask other brokers who is primary after this many ms without an answer (1000; null: never). */
  probeAfter?: number | null;
  /** For tests: the clock and the random source in [0, 1). */
  clock?: Clock;
  random?: () => number;
}

export interface PublishOptions {
  key?: Binary | null;
  headers?: Headers | null;
}

export interface SubscribeOptions {
  /** A name makes the subscription durable (its offset survives the client and failovers). */
  subscription?: string;
  from?: "latest" | "earliest" | number;
  window?: number;
  mode?: "broadcast" | "shared";
  /**
   * "fail" (default): a resume that finds records purged ends the subscription with a PURGED
   * TritonError carrying first/last. "skip": go on after them, reported in "subscribed".
   */
  gaps?: "fail" | "skip";
  /** Be a member of the topic's presence: listed by presence(), others get join/leave. */
  presence?: boolean;
  /** With presence: what this member says about itself (e.g. a chat name), ≤ 256 UTF-8 bytes. */
  info?: string;
}

export class Subscription {
  readonly sid: number;
  readonly topic: string;
  readonly subscription: string | null;
  readonly mode: "broadcast" | "shared";
  readonly closed: boolean;
  /** The error that ended the subscription, if one did. */
  readonly error: TritonError | null;
  readonly hasPresence: boolean;
  /** With presence: the topic's members now, by client id (replaced after every subok). */
  readonly members: Map<string, Member>;
  on(event: "subscribed", fn: (e: SubscribedEvent) => void): this;
  /** The message callback threw or rejected (the record is still acknowledged). */
  on(event: "error", fn: (e: unknown) => void): this;
  /** The subscription ended: `null` after close(), else the error. */
  on(event: "closed", fn: (e: TritonError | null) => void): this;
  /** With presence: the whole member list, after every (re)subscription. */
  on(event: "members", fn: (members: Member[]) => void): this;
  on(event: "join" | "leave", fn: (member: Member) => void): this;
  off(event: string, fn: (...args: any[]) => void): this;
  /** The topic's members now (a fresh request; works without presence too). */
  presence(): Promise<Member[]>;
  close(): void;
}

export class Client {
  constructor(url: string, options?: ConnectOptions);
  readonly url: string;
  readonly state: ConnectionState;
  on(event: "state", fn: (e: StateEvent) => void): this;
  /** A broker frame that could not be decoded (it is dropped). */
  on(event: "error", fn: (e: TritonError) => void): this;
  off(event: string, fn: (...args: any[]) => void): this;
  refresh(): Promise<unknown>;
  groupOf(topic: string): string;
  publish(topic: string, value: Binary, options?: PublishOptions): Promise<Ack>;
  publishBatch(topic: string, values: Binary[], options?: PublishOptions): Promise<Ack[]>;
  subscribe(
    topic: string,
    onMessage: (msg: Message) => void | Promise<void>,
    options?: SubscribeOptions,
  ): Promise<Subscription>;
  /** Who is subscribed to `topic` with presence now. */
  presence(topic: string): Promise<Member[]>;
  setToken(token: string | null): void;
  close(): Promise<void>;
}

export function connect(url: string, options?: ConnectOptions): Promise<Client>;

export interface BrokerConnectionOptions {
  token?: string | null;
  WebSocket?: unknown;
  /** ms before an unanswered request fails with TIMEOUT (10000). */
  timeout?: number;
  clock?: unknown;
}

/** Operators' requests to one broker (docs/protocol.md §5), answered by id: no routing, no
 * retries. A broker's refusal rejects with a TritonError of its code (FORBIDDEN: not an admin). */
export class BrokerConnection {
  constructor(url: string, options?: BrokerConnectionOptions);
  readonly url: string;
  /** The broker's answer to hello (its id, group, role), once connected. */
  readonly hello: Record<string, any> | null;
  request(frame: Record<string, unknown>): Promise<Record<string, any>>;
  meta(): Promise<Record<string, any>>;
  stats(topic?: string | null): Promise<Record<string, any>>;
  deleteSubscription(topic: string, subscription: string, options?: { execute?: boolean }): Promise<Record<string, any>>;
  resetSubscription(
    topic: string,
    subscription: string,
    to: "earliest" | "latest" | number,
    options?: { execute?: boolean },
  ): Promise<Record<string, any>>;
  /** Begin moving `slot` to group `to`: resolves with `slotinfo` once the move began. */
  moveSlot(slot: number, to: string): Promise<Record<string, any>>;
  close(): void;
}

// --- the pieces, for tests and other shells ---

export function encodeFrame(frame: Record<string, unknown>): string;
export function decodeFrame(text: string, direction?: "broker" | "client"): Record<string, any>;
export function toBytes(v: Binary): Uint8Array;
export function crc32(text: string): number;
/** Why `name` cannot be a topic name (docs/protocol.md §3, "Topic names"), or null. */
export function topicProblem(name: unknown): string | null;
export function errorFromFrame(frame: Record<string, unknown>): TritonError;

export class ClusterView {
  constructor(groups?: Record<string, { primary_url?: string | null; members?: Record<string, string> }>, slots?: { owners: string[] } | null);
  groupOf(topic: string): string;
  candidates(group: string): string[];
  urls(): string[];
}

export const State: Readonly<{
  DISCONNECTED: "disconnected";
  RESOLVING: "resolving";
  CONNECTING: "connecting";
  CONNECTED: "connected";
  CLOSED: "closed";
}>;

export const DEFAULTS: Readonly<Required<Omit<ConnectOptions, "token" | "WebSocket" | "connectTimeout" | "clock" | "random">> & { refusalPauseMin: number; refusalPauseMax: number; group: string }>;

/** A record to publish, as `pub` carries it: [uuid, key, value, headers]. */
export type OutgoingRecord = [uuid: Binary, key: Binary | null, value: Binary, headers: Headers | null];
/** A delivered record, as `deliver` carries it (decoded): [ts, uuid, key, value, headers]. */
export type DeliveredRecord = [ts: number, uuid: Binary, key: Binary | null, value: Binary, headers: Headers | null];
/** A frame: a plain object with `op` (the fields of docs/protocol.md). */
export type Frame = Record<string, any>;

/**
 * The events `ClientProtocol.handle` takes (any other `type` is a TypeError). A moved slot's
 * positions are (era, ts) (docs/replication.md M3): an absent `era` is era 0.
 */
export type ProtocolEvent =
  | { type: "publish"; ticket: number; topic: string; records: OutgoingRecord[] }
  | { type: "request"; ticket: number; frame: Frame }
  | { type: "setToken"; token: string | null }
  | {
      type: "subscribe";
      sid: number;
      topic: string;
      name?: string | null;
      start?: "latest" | "earliest" | number;
      window?: number | null;
      mode?: "broadcast" | "shared";
      /** shared: the member id (drawn by the protocol when absent) */
      member?: string;
      gaps?: "fail" | "skip";
      presence?: boolean;
      info?: string | null;
      /** The era `start` is a ts of (after a move: the era the subscription goes on in). */
      era?: number;
      /** true with a numeric `start`: resume there (a subscription moved to this group, C7). */
      resume?: boolean;
    }
  | { type: "unsubscribe"; sid: number }
  /** The application is done with a record; an ack of an era the subscription left is dropped. */
  | { type: "ack"; sid: number; ts: number; era?: number }
  | { type: "resolved"; urls: string[] }
  | { type: "resolveFailed"; error: string }
  | { type: "opened"; conn: number }
  | { type: "failed"; conn: number; error: string }
  | { type: "closed"; conn: number; reason?: string }
  | { type: "frame"; conn: number; frame: Frame }
  | { type: "epochSeen"; epoch: number | null; primaryUrl: string | null }
  | { type: "tick" }
  | { type: "close" };

/** The actions `ClientProtocol.handle` returns, for the shell to perform in order. */
export type ProtocolAction =
  | { type: "send"; frame: Frame }
  | { type: "connect"; conn: number; url: string }
  | { type: "disconnect"; conn: number }
  | { type: "resolve" }
  | { type: "probe"; exclude: string | null }
  /** `eras`: per record, when a `puback` said them (a moved slot; -1: not said), else absent. */
  | { type: "publishDone"; ticket: number; ts: number[]; group: string; eras?: number[] }
  | { type: "publishFailed"; ticket: number; error: TritonError }
  | { type: "answered"; ticket: number; frame: Frame }
  | { type: "requestFailed"; ticket: number; error: TritonError }
  /** `era`: the era the records were written in (0 for a slot that never moved). */
  | { type: "deliver"; sid: number; records: DeliveredRecord[]; era: number }
  | {
      type: "subscribed";
      sid: number;
      next: number;
      resumed: boolean;
      recovered: boolean;
      skipped: { first: number; last: number } | null;
    }
  /**
   * C7: a `WRONG_GROUP` moved the subscription to `group`: an unnamed one goes on from
   * (`era`, `after` + 1); `era`/`after` are null for a named one (its offset is its position)
   * or one with no position yet (it subscribes as it first did).
   */
  | { type: "subscriptionMoved"; sid: number; group: string; era: number | null; after: number | null }
  | { type: "subscriptionFailed"; sid: number; error: TritonError }
  | { type: "presence"; sid: number; event: "join" | "leave"; member: Member }
  | { type: "wakeAt"; at: number };

/** The pure client state machine (docs/protocol.md §11): events in with `now` (ms), actions out. */
export class ClientProtocol {
  constructor(settings?: Partial<typeof DEFAULTS>, rand?: () => number, token?: string | null);
  readonly state: (typeof State)[keyof typeof State];
  readonly group: string;
  readonly epoch: number;
  readonly url: string | null;
  readonly conn: number;
  readonly lastError: string;
  readonly unacknowledged: number[];
  readonly inFlight: number;
  handle(event: ProtocolEvent, now: number): ProtocolAction[];
  backoffDelay(failures: number): number;
}
