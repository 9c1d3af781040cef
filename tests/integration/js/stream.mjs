// What the stream scripts (failover_stream.mjs, move_stream.mjs) share: one producer
// publishing numbered records in batches, and the wait for the subscribers to catch up.

export const say = (obj) => process.stdout.write(`${JSON.stringify(obj)}\n`);

/** Publish `total` records "m-000000", ... `batch` at a time (pausing `pause` ms between
 * batches), saying {"acked": n} after each; `kept(ack, value)` is what `acked` keeps. */
export async function produce(producer, topic, total, batch, pause, kept) {
  const acked = [];
  const failed = [];
  for (let i = 0; i < total; i += batch) {
    const values = Array.from({ length: Math.min(batch, total - i) }, (_, j) => `m-${String(i + j).padStart(6, "0")}`);
    const results = await Promise.allSettled(values.map((v) => producer.publish(topic, v)));
    results.forEach((r, j) => (r.status === "fulfilled" ? acked.push(kept(r.value, values[j])) : failed.push([values[j], r.reason.code, r.reason.message])));
    say({ acked: acked.length });
    if (pause) await new Promise((r) => setTimeout(r, pause));
  }
  return { acked, failed };
}

/** Wait (up to 60 s) while `behind()`, then half a second more: a duplicate would come now. */
export async function settle(behind) {
  const deadline = Date.now() + 60_000;
  while (behind() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  await new Promise((r) => setTimeout(r, 500));
}
