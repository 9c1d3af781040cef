// What the web console shows, computed from what brokers answer: pure functions, no DOM, no
// socket, no import (the page, clients/console/index.html, does those; node --test checks
// these in clients/js/test/console.test.mjs).
//
// Where each number comes from, as `tritonmq top` (tritonmq/opsview.py) takes them: one
// broker's `meta` for what ZooKeeper holds (every group's epoch, primary, ISR and members;
// the slot map with the history of every slot that moved or is moving), and each group
// primary's `stats` for what only it knows now (retained records and bytes, publish rates,
// durable subscriptions with their lag). A group whose primary did not answer still shows
// what `meta` says, with its live figures empty ("-").

export const EVENTS_KEPT = 20;

/** One row per group: `meta`'s view of it joined with its primary's `stats` (or null). */
export function groupRows(groups, stats) {
  return Object.keys(groups ?? {}).sort().map((g) => {
    const info = groups[g];
    const st = stats[g] ?? null;
    const members = Object.keys(info.members ?? {}).sort();
    const isr = [...(info.isr ?? [])].sort();
    const subs = st?.subscriptions ?? [];
    return {
      group: g,
      epoch: info.epoch ?? null,
      primary: info.primary ?? null,
      primaryUrl: info.primary_url ?? null,
      isr,
      members,
      underReplicated: isr.length < members.length,
      records: st ? st.records : null,
      bytes: st ? st.bytes : null,
      maxBytes: st ? st.max_bytes : null,
      rate: st ? st.rate : null,
      maxLag: st ? Math.max(0, ...subs.map((s) => s.lag)) : null,
    };
  });
}

/** One row per slot: its owner and era, and the move in progress (`to`, `state`). */
export function slotRows(slots) {
  if (!slots) return [];
  const moved = slots.moved ?? {};
  return slots.owners.map((owner, n) => {
    const h = moved[String(n)];
    return {
      slot: n,
      owner: h?.group ?? owner,
      era: h?.era ?? 0,
      state: h?.state ?? "normal",
      to: h?.move?.to ?? null,
      eras: (h?.history ?? []).length,
    };
  });
}

/** One row per topic a primary reports, with its group and slot (`crc32`: the client's,
 * docs/protocol.md §4); busiest (bytes) first. */
export function topicRows(slots, stats, crc32) {
  const rows = [];
  for (const [g, st] of Object.entries(stats)) {
    for (const t of st.topics ?? []) {
      rows.push({ ...t, group: g, slot: slots ? crc32(t.topic) % slots.slots : null });
    }
  }
  return rows.sort((a, b) => b.bytes - a.bytes || a.topic.localeCompare(b.topic));
}

/** Every durable subscription the primaries hold, with the group that answers for it. */
export function subscriptionRows(stats) {
  const rows = [];
  for (const [g, st] of Object.entries(stats)) {
    for (const s of st.subscriptions ?? []) rows.push({ ...s, group: g });
  }
  return rows.sort((a, b) => a.topic.localeCompare(b.topic) || a.subscription.localeCompare(b.subscription));
}

/**
 * What changed between two reads of the cluster, as lines: failovers (a group's primary
 * changed; a new epoch with the same primary is a re-election) and slot moves (a slot's
 * owner or move state changed). Only what this page saw while it was open: a change and
 * its undoing between two reads is not seen, and the epoch says how many elections a
 * group has had in all.
 */
export class Watch {
  constructor() {
    this.groups = new Map(); // group -> [epoch, primary]
    this.slots = new Map(); // slot -> "owner state to"
    this.events = []; // {at, kind, text}, newest last
    this.failovers = new Map(); // group -> count seen
  }

  saw(meta, at) {
    for (const [g, info] of Object.entries(meta.groups ?? {}).sort()) {
      const now = [info.epoch, info.primary ?? null];
      const before = this.groups.get(g);
      this.groups.set(g, now);
      if (before === undefined || (before[0] === now[0] && before[1] === now[1])) continue;
      if (before[1] !== now[1]) {
        this.failovers.set(g, (this.failovers.get(g) ?? 0) + 1);
        this._add(at, "failover", `${g}: primary ${before[1] ?? "none"} → ${now[1] ?? "none"} (epoch ${before[0]} → ${now[0]})`);
      } else {
        this._add(at, "failover", `${g}: ${now[1]} re-elected (epoch ${before[0]} → ${now[0]})`);
      }
    }
    for (const r of slotRows(meta.slots)) {
      const now = `${r.owner} ${r.state} ${r.to ?? ""}`;
      const before = this.slots.get(r.slot);
      this.slots.set(r.slot, now);
      if (before === undefined || before === now) continue;
      const what = r.state === "normal" ? `now owned by ${r.owner} (era ${r.era})` : `${r.state} ${r.owner} → ${r.to}`;
      this._add(at, "slot", `slot ${r.slot}: ${what}`);
    }
  }

  _add(at, kind, text) {
    this.events.push({ at, kind, text });
    this.events.splice(0, Math.max(0, this.events.length - EVENTS_KEPT));
  }
}

/** What a JWT says about its holder, for display only (the broker verifies it; this does not). */
export function tokenClaims(token) {
  try {
    const part = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    const claims = JSON.parse(atob(part + "=".repeat((4 - (part.length % 4)) % 4)));
    return { sub: String(claims.sub ?? "?"), admin: claims.admin === true };
  } catch {
    return null;
  }
}

// --- formatting (as tritonmq/opsview.py) ---------------------------------------------

export function fmtBytes(n) {
  if (n === null || n === undefined) return "-";
  let size = n;
  for (const unit of ["B", "KiB", "MiB", "GiB"]) {
    if (size < 1024 || unit === "GiB") return unit === "B" ? `${n} B` : `${size.toFixed(1)} ${unit}`;
    size /= 1024;
  }
  return `${n} B`;
}

export function fmtRate(r) {
  if (r === null || r === undefined) return "-";
  return r >= 100 ? `${Math.round(r).toLocaleString("en")}/s` : `${r.toFixed(1)}/s`;
}

/** How long something has waited, from ms: "0", "850ms", "12.3s", "4m05s", "2h03m". */
export function fmtMs(ms) {
  if (ms === null || ms === undefined) return "-";
  if (ms <= 0) return "0";
  if (ms < 1000) return `${Math.round(ms)}ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(Math.floor(s % 60)).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}

export function fmt(v) {
  return v === null || v === undefined ? "-" : String(v);
}
