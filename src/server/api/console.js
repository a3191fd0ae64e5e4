// The operator console: reads GET /v1/console/stream (server-sent events, a reading a
// second) with the key as a bearer token, and draws each reading. No library, no network
// but this server.
"use strict";

const history = { rate: [], p50: [], p99: [] };
const KEEP = 120;
let lastRuns = null;
let lastAt = null;
let controller = null;

const $ = (id) => document.getElementById(id);
const text = (id, v) => { $(id).textContent = v; };

function bytes(n) {
  if (n >= 1 << 30) return (n / (1 << 30)).toFixed(2) + " GiB";
  if (n >= 1 << 20) return (n / (1 << 20)).toFixed(1) + " MiB";
  return Math.round(n / 1024) + " KiB";
}

function row(cells) {
  const tr = document.createElement("tr");
  for (const c of cells) {
    const td = document.createElement("td");
    if (c instanceof Node) td.appendChild(c); else td.textContent = c;
    tr.appendChild(td);
  }
  return tr;
}

function bar(share) {
  const b = document.createElement("span");
  b.className = "bar" + (share > 0.85 ? " hot" : "");
  const fill = document.createElement("span");
  fill.style.width = Math.min(100, Math.round(share * 100)) + "%";
  b.appendChild(fill);
  return b;
}

// A polyline per series over the last KEEP readings, scaled to the largest value.
function chart(svg, series) {
  const max = Math.max(1e-9, ...series.flatMap((s) => s.values));
  svg.replaceChildren();
  for (const s of series) {
    const span = Math.max(1, s.values.length - 1);
    const pts = s.values.map((v, i) =>
      `${(i / span) * 600},${118 - (v / max) * 110}`).join(" ");
    const line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
    line.setAttribute("points", pts);
    line.setAttribute("fill", "none");
    line.setAttribute("stroke", s.color);
    line.setAttribute("stroke-width", "2");
    svg.appendChild(line);
  }
}

function push(list, v) {
  list.push(v);
  if (list.length > KEEP) list.shift();
}

function draw(s) {
  const at = Date.parse(s.at);
  const runs = s.counters.runs;
  let rate = 0;
  if (lastRuns !== null && at > lastAt) rate = (runs - lastRuns) / ((at - lastAt) / 1000);
  lastRuns = runs;
  lastAt = at;
  push(history.rate, Math.max(0, rate));
  const lat = s.counters.latency_at_most_seconds;
  push(history.p50, (lat.p50 || 0) * 1000);
  push(history.p99, (lat.p99 || 0) * 1000);

  text("ready", s.ready ? "ready" : "loading");
  text("runs-total", runs);
  text("rate", rate.toFixed(1));
  text("running", s.running);
  text("queued", s.queue_depth);
  text("workers", s.workers_configured ? `${s.workers}/${s.workers_configured}` : "in process");
  text("live", s.live_sessions);
  text("hibernated", s.hibernated_sessions);
  const share = s.memory_budget_bytes ? s.memory_charged_bytes / s.memory_budget_bytes : 0;
  $("memory-bar").className = "bar" + (share > 0.85 ? " hot" : "");
  $("memory-bar").firstElementChild.style.width = Math.round(share * 100) + "%";
  text("memory", `${bytes(s.memory_charged_bytes)} of ${bytes(s.memory_budget_bytes)}`);
  chart($("rate-chart"), [{ values: history.rate, color: "#3b82f6" }]);
  chart($("latency-chart"), [
    { values: history.p50, color: "#10b981" },
    { values: history.p99, color: "#e5484d" },
  ]);
  $("latency").replaceChildren(...Object.entries(lat).map(([q, v]) => {
    const d = document.createElement("div");
    d.innerHTML = "<div class='big'></div><div class='muted'></div>";
    d.firstChild.textContent = v === null ? "–" : `≤ ${v * 1000} ms`;
    d.lastChild.textContent = q;
    return d;
  }));

  const tenants = $("tenants").tBodies[0];
  tenants.replaceChildren();
  for (const t of s.tenants) {
    for (const q of t.quotas) {
      const share = q.limit ? q.used / q.limit : 0;
      tenants.appendChild(row([t.tenant, q.quota, q.used, q.limit === null ? "none" : q.limit,
        q.limit === null ? "" : bar(share)]));
    }
  }
  const refusals = $("refusals").tBodies[0];
  refusals.replaceChildren();
  const entries = [...Object.entries(s.counters.refusals).map(([k, v]) => [`refused: ${k}`, v]),
    ...Object.entries(s.counters.responses).map(([k, v]) => [`HTTP ${k}`, v])];
  for (const [k, v] of entries) refusals.appendChild(row([k, v]));
  if (!entries.length) refusals.appendChild(row(["none yet", ""]));
  text("audit", s.audit.slice().reverse().join("\n"));
}

async function listen() {
  if (controller) controller.abort();
  controller = new AbortController();
  const key = $("key").value.trim();
  const headers = key ? { Authorization: "Bearer " + key } : {};
  try {
    const r = await fetch("/v1/console/stream", { headers, signal: controller.signal });
    if (!r.ok) {
      const body = await r.json().catch(() => ({}));
      throw new Error(`${r.status}: ${body.error ? body.error.message : r.statusText}`);
    }
    text("status", "live");
    $("status").className = "";
    const reader = r.body.getReader();
    const decoder = new TextDecoder();
    let buffered = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffered += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffered.indexOf("\n\n")) >= 0) {
        const block = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        const data = block.split("\n").filter((l) => l.startsWith("data:"))
          .map((l) => l.slice(5).trimStart()).join("\n");
        if (data) draw(JSON.parse(data));
      }
    }
    throw new Error("the stream ended");
  } catch (e) {
    if (e.name === "AbortError") return;
    text("status", String(e.message || e));
    $("status").className = "bad";
    setTimeout(listen, 3000);
  }
}

const fromAddress = new URLSearchParams(location.hash.slice(1)).get("key");
if (fromAddress) $("key").value = fromAddress;
$("key").addEventListener("change", listen);
listen();
