// The node's web page: live status from the JSON API and a search box.
// Plain DOM, no framework; text from crawled pages is only ever set as
// text (never as HTML), and only http(s) URLs become links.
"use strict";

const SAMPLES = 120; // seconds of history in the chart
const history = []; // {t, rate}
let last = null; // the previous status sample: {t, fetched}
let updates = 0;

const $ = (id) => document.getElementById(id);

async function getJSON(path) {
  const response = await fetch(path, { cache: "no-store" });
  const body = await response.json().catch(() => null);
  if (!response.ok) {
    const why = body && body.error ? body.error.code + ": " + body.error.message : response.statusText;
    throw new Error(why);
  }
  return body;
}

function text(id, value) {
  const el = $(id);
  if (el) el.textContent = value;
}

function td(value, cls) {
  const cell = document.createElement("td");
  cell.textContent = value === undefined || value === null ? "" : String(value);
  if (cls) cell.className = cls;
  return cell;
}

function fill(tableId, rows, columns, empty) {
  const body = $(tableId).tBodies[0];
  body.replaceChildren();
  if (rows.length === 0) {
    const tr = document.createElement("tr");
    const cell = td(empty, "empty");
    cell.colSpan = columns;
    tr.append(cell);
    body.append(tr);
    return;
  }
  for (const cells of rows) {
    const tr = document.createElement("tr");
    tr.append(...cells);
    body.append(tr);
  }
}

function ago(ms) {
  if (ms <= 0) return "now";
  return ms < 1000 ? ms + " ms" : (ms / 1000).toFixed(1) + " s";
}

// --- status, each second ---------------------------------------------------

async function pollStatus() {
  try {
    const s = await getJSON("/status");
    const now = Date.now();
    let rate = s.recent_pages_per_sec;
    if (last && now > last.t && s.fetched_this_run >= last.fetched) {
      rate = (s.fetched_this_run - last.fetched) / ((now - last.t) / 1000);
    }
    last = { t: now, fetched: s.fetched_this_run };
    history.push({ t: now, rate: rate });
    while (history.length > SAMPLES) history.shift();
    showStatus(s, rate);
    draw();
  } catch (e) {
    const state = $("state");
    state.textContent = "unreachable: " + e.message;
    state.className = "badge down";
  }
}

function showStatus(s, rate) {
  text("node", "node " + s.node);
  text("rate", rate.toFixed(1));
  text("fetched", s.fetched_this_run);
  text("processed", s.processed);
  text("pending", s.pending);
  text("requests-in-flight", s.requests_in_flight);
  text("claimed", s.in_flight);
  text("errors", s.errors_this_run);
  text("trapped", s.trapped || 0);
  text("indexed", s.index ? s.index.indexed + " of " + s.index.queued : "no index");
  const state = $("state");
  if (s.paused) {
    state.textContent = "paused";
    state.className = "badge paused";
  } else if (s.idle) {
    state.textContent = "idle: nothing to fetch";
    state.className = "badge idle";
  } else {
    state.textContent = "crawling";
    state.className = "badge crawling";
  }
  fill(
    "nodes",
    s.nodes.map((n) => [td(n.node), td(n.load), td(n.hosts), td(n.index ? n.index.indexed : "–")]),
    4,
    "no live node"
  );
  updates += 1;
  document.body.dataset.updates = String(updates);
  text("updated", "updated " + new Date().toLocaleTimeString());
}

// --- the chart ------------------------------------------------------------------

function niceMax(value) {
  if (value <= 1) return 1;
  const step = Math.pow(10, Math.floor(Math.log10(value)));
  for (const m of [1, 2, 5, 10]) {
    if (value <= m * step) return m * step;
  }
  return 10 * step;
}

function draw() {
  const canvas = $("chart");
  const ratio = window.devicePixelRatio || 1;
  const w = canvas.clientWidth || canvas.width;
  const h = canvas.clientHeight || canvas.height;
  canvas.width = Math.round(w * ratio);
  canvas.height = Math.round(h * ratio);
  const g = canvas.getContext("2d");
  g.setTransform(ratio, 0, 0, ratio, 0, 0);
  g.clearRect(0, 0, w, h);
  const left = 44, right = 8, top = 10, bottom = 20;
  const pw = w - left - right, ph = h - top - bottom;
  const max = niceMax(Math.max(1, ...history.map((p) => p.rate)));
  g.font = "11px system-ui, sans-serif";
  g.fillStyle = "#6b7480";
  g.strokeStyle = "#dde1e6";
  g.lineWidth = 1;
  for (let i = 0; i <= 4; i++) {
    const y = top + ph - (ph * i) / 4;
    g.beginPath();
    g.moveTo(left, y);
    g.lineTo(left + pw, y);
    g.stroke();
    const tick = (max * i) / 4;
    g.fillText(String(Number(tick.toFixed(2))), 4, y + 4);
  }
  g.fillText("−" + SAMPLES + " s", left, h - 4);
  g.fillText("now", left + pw - 22, h - 4);
  if (history.length < 2) return;
  const x = (i) => left + pw - ((history.length - 1 - i) * pw) / (SAMPLES - 1);
  const y = (v) => top + ph - (ph * v) / max;
  g.beginPath();
  g.moveTo(x(0), y(history[0].rate));
  history.forEach((p, i) => g.lineTo(x(i), y(p.rate)));
  g.strokeStyle = "#2f6fdf";
  g.lineWidth = 2;
  g.stroke();
  g.lineTo(x(history.length - 1), top + ph);
  g.lineTo(x(0), top + ph);
  g.closePath();
  g.fillStyle = "rgba(47, 111, 223, 0.12)";
  g.fill();
}

// --- hosts, traps and errors, every few seconds ------------------------------

async function pollTables() {
  try {
    const hosts = await getJSON("/hosts?limit=25");
    text("hosts-total", hosts.total + " known, " + hosts.busy + " busy");
    fill(
      "hosts",
      hosts.items.map((h) => {
        const live = h.live || {};
        return [
          td(h.host),
          td(live.node || "–"),
          td(live.queued || 0),
          td(live.in_flight || 0),
          td(h.pages),
          td(live.robots ? live.robots.replace("_", " ") : h.robots_status || "–"),
          td(live.node ? (live.paused ? "paused" : ago(live.next_fetch_ms)) : "–"),
        ];
      }),
      7,
      "no host yet"
    );
    const traps = await getJSON("/traps?limit=20");
    text("traps-total", traps.total ? "(" + traps.total + ")" : "");
    fill(
      "traps",
      traps.items.map((t) => [td(t.family, "url"), td(t.rule), td(t.pages), td(t.refused)]),
      4,
      "no family closed"
    );
    const failed = await getJSON("/failed?limit=10");
    fill(
      "errors-table",
      failed.map((p) => [td(p.http_returncode || "–"), td(p.url, "url"), td(p.error || "")]),
      3,
      "no error"
    );
  } catch (e) {
    // The status poll says the node is unreachable.
  }
}

// --- search -----------------------------------------------------------------------

// A snippet with the query's words marked: `highlights` are byte ranges of
// the snippet's UTF-8.
function marked(snippet, highlights) {
  const out = document.createElement("p");
  out.className = "snippet";
  const bytes = new TextEncoder().encode(snippet);
  const decode = (a, b) => new TextDecoder().decode(bytes.subarray(a, b));
  let at = 0;
  for (const r of (highlights || []).slice().sort((a, b) => a.start - b.start)) {
    if (r.start < at || r.end > bytes.length) continue;
    out.append(decode(at, r.start));
    const mark = document.createElement("mark");
    mark.textContent = decode(r.start, r.end);
    out.append(mark);
    at = r.end;
  }
  out.append(decode(at, bytes.length));
  return out;
}

function link(url, label) {
  if (!/^https?:\/\//i.test(url)) return document.createTextNode(label);
  const a = document.createElement("a");
  a.href = url;
  a.textContent = label;
  a.rel = "noopener noreferrer";
  return a;
}

async function search(event) {
  event.preventDefault();
  const q = $("q").value.trim();
  if (!q) return;
  const list = $("results");
  const note = $("search-note");
  try {
    const answer = await getJSON("/search?limit=10&q=" + encodeURIComponent(q));
    list.replaceChildren();
    const lines = [];
    if (answer.did_you_mean) lines.push("Showing results for “" + answer.did_you_mean + "”.");
    if (answer.results.length === 0) lines.push("No results.");
    if (answer.nodes && answer.nodes.missing.length) {
      lines.push("Not heard from: " + answer.nodes.missing.join(", ") + ".");
    }
    if (answer.nodes) lines.push("Answered by " + answer.nodes.answered.join(", ") + ".");
    note.textContent = lines.join(" ");
    for (const hit of answer.results) {
      const li = document.createElement("li");
      const title = document.createElement("div");
      title.className = "title";
      title.append(link(hit.url, hit.title || hit.url));
      const url = document.createElement("div");
      url.className = "link";
      url.textContent = hit.url;
      li.append(title, url, marked(hit.snippet, hit.highlights));
      list.append(li);
    }
  } catch (e) {
    list.replaceChildren();
    note.textContent = "Search failed: " + e.message;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("search-form").addEventListener("submit", search);
  window.addEventListener("resize", draw);
  pollStatus();
  pollTables();
  setInterval(pollStatus, 1000);
  setInterval(pollTables, 3000);
});
