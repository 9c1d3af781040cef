// Driven by tests/integration/test_js_client.py: the JavaScript client against a wss://
// broker that requires tokens. Prints one JSON line: what each attempt gave.
// Usage: node secure_roundtrip.mjs <wss url> <good token> <bad token>
import { connect } from "../../../clients/js/tritonmq.js";

const [url, good, bad] = process.argv.slice(2);
const out = {};
const code = (e) => e?.code ?? String(e);

try {
  await connect(url, { token: bad, connectTimeout: 5000 });
  out.bad = "connected";
} catch (e) {
  out.bad = code(e);
}

const client = await connect(url, { token: good });
const got = [];
const sub = await client.subscribe("orders.js", (m) => got.push(m.value), { from: "earliest" });
out.ack = await client.publish("orders.js", "paid");
try {
  await client.publish("secret", "x");
  out.forbidden = "published";
} catch (e) {
  out.forbidden = code(e);
}
const deadline = Date.now() + 10_000;
while (!got.length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
out.got = got;
sub.close();
await client.close();
process.stdout.write(`${JSON.stringify(out)}\n`);
