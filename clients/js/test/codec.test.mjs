// The codec against every golden vector of clients/vectors/frames.json (docs/protocol.md §12):
// decoding a vector's JSON gives its `decoded` frame, and encoding that frame gives the same
// JSON object back.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { crc32, decodeFrame, encodeFrame, toBytes, TritonError } from "../tritonmq.js";

const VECTORS = JSON.parse(readFileSync(new URL("../../vectors/frames.json", import.meta.url), "utf8"));
const RECORD_BIN = { pub: [[0, 1, 2], 3], deliver: [[1, 2, 3], 4], fetched: [[1, 2, 3], 4] };

const hexBytes = (hex) => Uint8Array.from(hex.match(/../g) ?? [], (h) => parseInt(h, 16));
const isHex = (v) => typeof v === "object" && v !== null && Object.keys(v).length === 1 && typeof v.hex === "string";

/** The vector's `decoded` with every {"hex"} as bytes: the frame's meaning. */
function meaning(decoded) {
  const walk = (v) => (isHex(v) ? hexBytes(v.hex) : Array.isArray(v) ? v.map(walk) : typeof v === "object" && v !== null ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x)])) : v);
  return walk(decoded);
}

/** A decoded frame with the binary fields of its records as bytes (a string stands for its UTF-8). */
function asBytes(frame) {
  const spec = RECORD_BIN[frame.op];
  if (!spec || !Array.isArray(frame.records)) return frame;
  const [binary] = spec;
  return { ...frame, records: frame.records.map((r) => r.map((x, i) => (binary.includes(i) && x !== null ? toBytes(x) : x))) };
}

test("the vectors cover every op in both directions", () => {
  const ops = new Set(VECTORS.map((v) => `${v.direction}:${v.decoded.op}`));
  for (const op of ["hello", "pub", "ack", "nack", "sub", "unsub", "meta", "fetch", "commit", "subdel", "subreset"]) assert.ok(ops.has(`client:${op}`), op);
  for (const op of ["puback", "deliver", "subok", "fetched", "committed", "meta", "subinfo", "error"]) assert.ok(ops.has(`broker:${op}`), op);
});

for (const v of VECTORS) {
  test(`decode ${v.direction} vector: ${v.name}`, () => {
    assert.deepStrictEqual(asBytes(decodeFrame(v.json, v.direction)), meaning(v.decoded));
  });
  test(`encode ${v.direction} vector: ${v.name}`, () => {
    assert.deepStrictEqual(JSON.parse(encodeFrame(meaning(v.decoded))), JSON.parse(v.json));
  });
}

test("text stays text: a value sent as a string is received as that string", () => {
  const f = decodeFrame('{"op":"deliver","sid":1,"topic":"t","records":[[3,"u","k","café ☕",null],[4,"u",null,{"b64":"wyg="},null]]}');
  assert.equal(f.records[0][3], "café ☕");
  assert.deepStrictEqual(f.records[1][3], new Uint8Array([0xc3, 0x28]));
});

test("valid UTF-8 bytes go out as text, other bytes as base64, header bytes always as base64", () => {
  const out = JSON.parse(encodeFrame({ op: "pub", id: 1, topic: "t", records: [[new Uint8Array([104, 105]), null, new Uint8Array([0xff]), { h: new Uint8Array([104]) }]] }));
  assert.deepStrictEqual(out.records[0], ["hi", null, { b64: "/w==" }, { h: { b64: "aA==" } }]);
});

test("malformed broker frames are BAD_FRAME errors", () => {
  const bad = [
    "not json",
    "[1]",
    '{"no":"op"}',
    '{"op":"puback","id":1,"ts":[9007199254740992],"group":"g"}',
    '{"op":"puback","id":1.5,"ts":[1],"group":"g"}',
    '{"op":"subok","sid":"1","next":2}',
    '{"op":"deliver","sid":1,"topic":"t","records":[[1,"u",null,{"b64":"***"},null]]}',
    '{"op":"deliver","sid":1,"topic":"t","records":[[1,"u",null,"v"]]}',
  ];
  for (const text of bad) {
    assert.throws(() => decodeFrame(text), (e) => e instanceof TritonError && e.code === "BAD_FRAME", text);
  }
});

test("unknown ops and keys are kept for the caller to ignore", () => {
  assert.deepStrictEqual(decodeFrame('{"op":"presence","x":1}'), { op: "presence", x: 1 });
  assert.equal(decodeFrame('{"op":"subok","sid":1,"next":2,"new":true}').next, 2);
});

test("crc32 is the unsigned zlib CRC of the UTF-8 bytes (docs/protocol.md §4)", () => {
  assert.equal(crc32("orders"), 3845127662);
  assert.equal(crc32("orders") % 64, 46);
  assert.equal(crc32(""), 0);
});
