// kmirror dashboard: polls api/overview with the REST token and draws it.
// The token comes from the login form or the URL fragment (#token=...,
// never sent to the server in the URL) and is kept in sessionStorage.
// A poll carries the flows' totals and one page of partitions, as the
// partition controls ask for it, so its cost does not grow with the
// partitions; window.kmirrorPerf says what the last render cost.
"use strict";

const tokenKey = "kmirror-token";
const pollMs = 1500;
let timer = null;
let polling = 0; // a poll under way: a newer one supersedes its result
// What the partition table asks for.
const query = { flow: "", state: "", q: "", sort: "state", page: 0, size: 50 };
window.kmirrorPerf = { polls: 0, firstRenderMs: null, lastRenderMs: null };

function token() { return sessionStorage.getItem(tokenKey) || ""; }

function takeFragmentToken() {
  const m = /(?:^#|&)token=([^&]*)/.exec(location.hash);
  if (m) {
    sessionStorage.setItem(tokenKey, decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
}

function headers() {
  const t = token();
  return t ? { Authorization: "Bearer " + t } : {};
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

function td(text, cls) { return el("td", cls, text); }

// setText changes an element's text only when it differs: an unchanged
// poll then costs the page no style or layout work.
function setText(e, text) {
  text = String(text);
  if (e.textContent !== text) e.textContent = text;
}
function setClass(e, cls) { if (e.className !== cls) e.className = cls; }

const nf = new Intl.NumberFormat("en-US", { maximumFractionDigits: 1 });
function num(v) { return v === null || v === undefined ? "–" : nf.format(v); }
function ms(v) { return v === null || v === undefined ? "–" : nf.format(Math.round(v)) + " ms"; }
function bytes(v) {
  if (!v) return "0 B";
  const u = ["B", "KiB", "MiB", "GiB"];
  let i = 0;
  while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
  return nf.format(v) + " " + u[i];
}
function ago(t) {
  if (!t) return "–";
  const s = Math.max(0, Math.round((Date.now() - new Date(t).getTime()) / 1000));
  if (s < 60) return s + " s ago";
  if (s < 3600) return Math.floor(s / 60) + " min ago";
  return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min ago";
}
function clock(t) { return new Date(t).toLocaleTimeString(); }

function setConn(text, cls) {
  const c = document.getElementById("conn");
  c.textContent = text;
  c.className = "conn " + (cls || "");
}

function showLogin(msg) {
  document.getElementById("main").hidden = true;
  document.getElementById("login").hidden = false;
  document.getElementById("login-error").textContent = msg || "";
  document.getElementById("token").focus();
  setConn("token needed", "bad");
}

function queryString() {
  const p = new URLSearchParams();
  for (const k in query) if (query[k] !== "" && !(k === "page" && query[k] === 0)) p.set(k, query[k]);
  return p.toString();
}

async function poll() {
  clearTimeout(timer);
  const mine = ++polling;
  try {
    const r = await fetch("api/overview?" + queryString(), { headers: headers(), cache: "no-store" });
    if (r.status === 401) {
      const had = token() !== "";
      sessionStorage.removeItem(tokenKey);
      showLogin(had ? "wrong token" : "");
      return;
    }
    if (!r.ok) throw new Error("HTTP " + r.status);
    const ov = await r.json();
    if (mine !== polling) return; // a newer poll is under way
    const t0 = performance.now();
    document.getElementById("login").hidden = true;
    document.getElementById("main").hidden = false;
    render(ov);
    setConn("live", "ok");
    document.getElementById("updated").textContent = "updated " + clock(ov.now);
    const perf = window.kmirrorPerf;
    perf.lastRenderMs = performance.now() - t0;
    perf.polls++;
    if (perf.firstRenderMs === null) perf.firstRenderMs = performance.now();
  } catch (e) {
    setConn("kmirror unreachable: " + e.message, "bad");
  }
  if (mine === polling) timer = setTimeout(poll, pollMs);
}

// flowRows keeps one row per flow so a button stays put between polls.
const flowRows = new Map();

function renderFlows(flows) {
  const body = document.querySelector("#flows tbody");
  const seen = new Set();
  for (const f of flows) {
    seen.add(f.name);
    let row = flowRows.get(f.name);
    if (!row) {
      row = el("tr");
      row.dataset.flow = f.name;
      const cells = ["name", "state", "since", "lag num", "rate num", "bytes num", "repl num", "checkpoint num", "parts", "action"];
      for (const c of cells) row.appendChild(td("", c));
      const b = el("button");
      b.dataset.flow = f.name;
      b.addEventListener("click", () => act(f.name, b.dataset.action));
      row.querySelector(".action").appendChild(b);
      flowRows.set(f.name, row);
    }
    body.appendChild(row);
    const set = (cls, text) => setText(row.querySelector("." + cls.split(" ")[0]), text);
    set("name", f.name + (f.kind === "heartbeats" ? " (heartbeats only)" : "") + (f.exactly_once ? " (exactly-once)" : ""));
    const st = row.querySelector(".state");
    setText(st, f.state + (f.error ? ": " + f.error : ""));
    setClass(st, "state " + f.state);
    set("since", ago(f.since));
    const repl = f.kind === "replication";
    set("lag", repl ? num(f.lag) : "");
    set("rate", repl ? num(f.records_per_second) : "");
    set("bytes", repl ? bytes(f.bytes_per_second) + "/s" : "");
    set("repl", repl ? ms(f.replication_latency_ms) : "");
    set("checkpoint", repl ? ms(f.checkpoint_latency_ms) : "");
    set("parts", repl ? partCounts(f) : "");
    const b = row.querySelector("button");
    const action = f.state === "paused" ? "resume" : "pause";
    b.dataset.action = action;
    b.className = action;
    b.textContent = action === "pause" ? "Pause" : "Resume";
    b.hidden = !repl || (f.state !== "running" && f.state !== "paused");
  }
  for (const [name, row] of flowRows) {
    if (!seen.has(name)) { row.remove(); flowRows.delete(name); }
  }
}

// partCounts says how many partitions a flow has and how many of them are
// not running, by state.
function partCounts(f) {
  const bad = Object.keys(f.states || {}).filter(s => s !== "running").sort((a, b) => f.states[b] - f.states[a]);
  return num(f.partition_count) + (bad.length ? " (" + bad.map(s => num(f.states[s]) + " " + s).join(", ") + ")" : "");
}

async function act(name, what) {
  const msg = document.getElementById("action-error");
  msg.textContent = "";
  try {
    const r = await fetch("../flows/" + encodeURIComponent(name) + "/" + what, { method: "POST", headers: headers() });
    if (!r.ok) {
      const body = await r.json().catch(() => ({}));
      msg.textContent = what + " " + name + ": " + (body.error || "HTTP " + r.status);
    }
  } catch (e) {
    msg.textContent = what + " " + name + ": " + e.message;
  }
  poll();
}

const svgNS = "http://www.w3.org/2000/svg";
function svg(tag, attrs) {
  const e = document.createElementNS(svgNS, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  return e;
}

// path draws values (nulls break the line) over x(i), y(v).
function path(values, x, y) {
  let d = "", pen = false;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v === null || v === undefined) { pen = false; continue; }
    d += (pen ? "L" : "M") + x(i).toFixed(1) + " " + y(v).toFixed(1);
    pen = true;
  }
  return d;
}

// Time ticks: the first step that puts at most most ticks on the span.
const tickSteps = [5e3, 10e3, 15e3, 30e3, 60e3, 120e3, 300e3, 600e3, 900e3, 1800e3, 3600e3, 7200e3];
function timeTicks(t0, t1, most) {
  const step = tickSteps.find(s => (t1 - t0) / s <= most) || tickSteps[tickSteps.length - 1];
  const out = [];
  for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) out.push(t);
  return { step, ticks: out };
}
function tickLabel(t, step) {
  return new Date(t).toLocaleTimeString([], step < 60e3 ? { hour: "2-digit", minute: "2-digit", second: "2-digit" } : { hour: "2-digit", minute: "2-digit" });
}

// Chart is one series over time: time axis in local time, the value axis
// from 0 to the highest value, and the time and value under the pointer.
class Chart {
  constructor(title, fmt) {
    this.fmt = fmt;
    this.times = [];
    this.values = [];
    this.box = el("div", "chart");
    const h3 = el("h3", null, title);
    this.now = el("span", "now");
    h3.appendChild(this.now);
    this.box.appendChild(h3);
    this.svg = svg("svg", { class: "plot" });
    this.box.appendChild(this.svg);
    this.tip = el("div", "tip");
    this.tip.hidden = true;
    this.box.appendChild(this.tip);
    this.svg.addEventListener("mousemove", ev => this.hover(ev));
    this.svg.addEventListener("mouseleave", () => { this.tip.hidden = true; if (this.cursor) this.cursor.setAttribute("visibility", "hidden"); });
  }

  update(times, values) {
    const key = (times.length ? times[times.length - 1] : 0) + "|" + times.length + "|" + values.join(",") + "|" + this.svg.clientWidth;
    if (key === this.key) return; // a poll between samples
    this.key = key;
    this.times = times;
    this.values = values;
    const last = values.length ? values[values.length - 1] : null;
    this.now.textContent = this.fmt(last);
    const top = Math.max(0, ...values.filter(v => v !== null && v !== undefined));
    // The value labels' room: about 6 px a character.
    const W = Math.max(200, this.svg.clientWidth || 300), H = 110, L = 10 + 6 * this.fmt(top).length, B = 16, T = 6, R = 6;
    this.geom = { W, H, L, B, T, R };
    this.svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    const s = this.svg;
    s.replaceChildren();
    const t0 = times[0], t1 = times[times.length - 1];
    const x = t => L + (t1 > t0 ? (t - t0) / (t1 - t0) : 1) * (W - L - R);
    const y = v => H - B - (top > 0 ? v / top : 0) * (H - B - T);
    this.x = x;
    this.y = y;
    for (const v of top > 0 ? [0, top / 2, top] : [0]) {
      s.appendChild(svg("line", { x1: L, y1: y(v), x2: W - R, y2: y(v), class: v === 0 ? "axis" : "grid" }));
      const lab = svg("text", { x: L - 4, y: y(v) + 3, "text-anchor": "end" });
      lab.textContent = this.fmt(v);
      s.appendChild(lab);
    }
    if (!times.length) {
      const none = svg("text", { x: L + 4, y: H / 2 });
      none.textContent = "no samples yet";
      s.appendChild(none);
      return;
    }
    // As many ticks as their labels have room for, 5 at most.
    const room = 6 * tickLabel(t0, 1000).length + 14;
    const { step, ticks } = timeTicks(t0, t1, Math.max(1, Math.min(5, Math.floor((W - L - R) / room))));
    for (const t of ticks) {
      s.appendChild(svg("line", { x1: x(t), y1: H - B, x2: x(t), y2: H - B + 3, class: "axis" }));
      const text = tickLabel(t, step), half = 3 * text.length;
      // A label that would spill over an edge is anchored at it.
      const anchor = x(t) + half > W ? "end" : x(t) - half < 0 ? "start" : "middle";
      const lab = svg("text", { x: anchor === "end" ? W : anchor === "start" ? 0 : x(t), y: H - 3, "text-anchor": anchor, class: "tick" });
      lab.textContent = text;
      s.appendChild(lab);
    }
    const d = path(values, i => x(times[i]), y);
    if (d) s.appendChild(svg("path", { d: d, class: "line" }));
    this.cursor = svg("g", { visibility: "hidden" });
    this.cursorLine = svg("line", { y1: T, y2: H - B, class: "cursor" });
    this.cursorDot = svg("circle", { r: 3, class: "dot" });
    this.cursor.append(this.cursorLine, this.cursorDot);
    s.appendChild(this.cursor);
  }

  // hover shows the sample nearest the pointer.
  hover(ev) {
    const n = this.times.length;
    if (!n || !this.geom) return;
    const r = this.svg.getBoundingClientRect();
    const px = (ev.clientX - r.left) * this.geom.W / r.width;
    let best = 0;
    for (let i = 1; i < n; i++) if (Math.abs(this.x(this.times[i]) - px) < Math.abs(this.x(this.times[best]) - px)) best = i;
    const t = this.times[best], v = this.values[best];
    const cx = this.x(t);
    this.cursorLine.setAttribute("x1", cx);
    this.cursorLine.setAttribute("x2", cx);
    const has = v !== null && v !== undefined;
    this.cursorDot.setAttribute("visibility", has ? "visible" : "hidden");
    if (has) { this.cursorDot.setAttribute("cx", cx); this.cursorDot.setAttribute("cy", this.y(v)); }
    this.cursor.setAttribute("visibility", "visible");
    this.tip.textContent = new Date(t).toLocaleTimeString() + " · " + (has ? this.fmt(v) : "no value");
    this.tip.hidden = false;
    const left = cx * r.width / this.geom.W;
    this.tip.style.left = Math.min(Math.max(0, left - 60), r.width - 120) + "px";
  }
}

// charts keeps one Chart per flow and series between polls, so the one
// under the pointer keeps showing its value.
const charts = new Map();
const chartKinds = [["lag", "lag (records)", num], ["records_per_second", "records/s", num],
  ["replication_latency_ms", "replication latency", ms], ["checkpoint_latency_ms", "checkpoint latency", ms]];

function renderCharts(ov) {
  const box = document.getElementById("charts");
  const times = ov.history.times;
  const want = [];
  for (const f of ov.flows) {
    if (f.kind !== "replication") continue;
    for (const [key, title, fmt] of chartKinds) {
      const values = ov.history.series["flow|" + f.name + "|" + key];
      if (!values && key === "checkpoint_latency_ms") continue;
      want.push({ flow: f.name, key, title, fmt, values: values || [] });
    }
  }
  const layout = want.map(w => w.flow + "|" + w.key).join("\n");
  if (box.dataset.layout !== layout) {
    box.replaceChildren();
    charts.clear();
    let grid = null, flow = null;
    for (const w of want) {
      if (w.flow !== flow) {
        flow = w.flow;
        box.appendChild(el("h3", "flow-name", flow));
        grid = el("div", "grid");
        box.appendChild(grid);
      }
      const c = new Chart(w.title, w.fmt);
      charts.set(w.flow + "|" + w.key, c);
      grid.appendChild(c.box);
    }
    if (!want.length) box.appendChild(el("p", "empty", "no replication flow yet"));
    box.dataset.layout = layout;
  }
  for (const w of want) charts.get(w.flow + "|" + w.key).update(times, w.values);
}

function spark(values) {
  const w = 120, h = 20;
  const s = svg("svg", { viewBox: "0 0 " + w + " " + h, class: "spark", preserveAspectRatio: "none" });
  if (!values || !values.length) return s;
  const top = Math.max(0, ...values.filter(v => v !== null));
  const n = Math.max(1, values.length - 1);
  const d = path(values, i => i / n * w, v => h - 1 - (top > 0 ? v / top : 0) * (h - 2));
  if (d) s.appendChild(svg("path", { d: d, class: "line" }));
  const t = svg("title", {});
  t.textContent = "lag now " + num(values[values.length - 1]) + ", highest " + num(top);
  s.appendChild(t);
  return s;
}

function fill(id, rows, cols, empty) {
  const body = document.querySelector("#" + id + " tbody");
  body.replaceChildren();
  if (!rows.length) {
    const r = el("tr");
    const c = td(empty, "empty");
    c.colSpan = cols;
    r.appendChild(c);
    body.appendChild(r);
  }
  for (const r of rows) body.appendChild(r);
}

// partRows keeps the rows of the page shown, by partition, so a poll that
// changes nothing changes nothing on the page.
let partRows = new Map();

function renderPartitions(page) {
  const body = document.querySelector("#partitions tbody");
  const next = new Map(), rows = [];
  for (const p of page.partitions) {
    const key = p.flow + "\n" + p.topic + "\n" + p.partition;
    let r = partRows.get(key);
    if (!r) {
      r = el("tr");
      r.dataset.flow = p.flow;
      r.dataset.topic = p.topic;
      r.dataset.partition = p.partition;
      r.append(td(p.flow, "wrap"), td(p.topic + (p.remote !== p.topic ? " → " + p.remote : ""), "wrap"), td(p.partition, "num"));
      for (const c of ["state", "lag num", "num", "spark", "num", "num", "num", "num", "error"]) r.appendChild(td("", c));
    }
    next.set(key, r);
    rows.push(r);
    const c = r.children;
    setText(c[3], p.state);
    setClass(c[3], "state " + p.state);
    setText(c[4], num(p.lag));
    setText(c[5], num(p.lag_seconds));
    const hist = (p.lag_history || []).join(",");
    if (r.dataset.hist !== hist) {
      r.dataset.hist = hist;
      c[6].replaceChildren(spark(p.lag_history));
    }
    setText(c[7], num(p.records_per_second));
    setText(c[8], ms(p.replication_latency_ms));
    setText(c[9], p.done < 0 ? "–" : num(p.done));
    setText(c[10], p.source_end < 0 ? "–" : num(p.source_end));
    setText(c[11], p.error || "");
  }
  partRows = next;
  const same = rows.length === body.children.length && rows.every((r, i) => body.children[i] === r);
  if (!same) fill("partitions", rows, 12, page.total === 0 && !query.q && !query.state && !query.flow ? "no partitions assigned yet" : "no partition matches");
  query.page = page.page;
  const first = page.total ? page.page * page.size + 1 : 0;
  setText(document.getElementById("p-info"), num(first) + "–" + num(Math.min(page.total, (page.page + 1) * page.size)) +
    " of " + num(page.total) + " · page " + (page.page + 1) + " of " + page.pages);
  document.getElementById("p-prev").disabled = page.page <= 0; // a property: no layout
  document.getElementById("p-next").disabled = page.page >= page.pages - 1;
}

// options sets a select's choices after its fixed first ones, keeping the
// one chosen.
function options(sel, fixed, values, label) {
  const have = [...sel.options].slice(fixed).map(o => o.value).join("\n");
  if (have === values.join("\n")) return;
  const chosen = sel.value;
  while (sel.options.length > fixed) sel.remove(fixed);
  for (const v of values) {
    const o = el("option", null, label ? label(v) : v);
    o.value = v;
    sel.appendChild(o);
  }
  sel.value = chosen;
}

function renderControls(flows) {
  options(document.getElementById("f-flow"), 1, flows.filter(f => f.kind === "replication").map(f => f.name));
  const states = new Set(["running", "lagging", "stalled", "paused", "waiting"]);
  for (const f of flows) for (const s in f.states || {}) states.add(s);
  options(document.getElementById("f-state"), 2, [...states].sort());
}

function ageText(sec) {
  if (sec === null || sec === undefined) return "–";
  const s = Math.max(0, Math.round(sec));
  if (s < 60) return s + " s ago";
  if (s < 3600) return Math.floor(s / 60) + " min ago";
  return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min ago";
}

function renderGroups(groups, total, ready) {
  document.getElementById("groups-note").textContent = !total ? "" :
    num(ready) + " of " + num(total) + " groups ready" + (total > groups.length ? "; the " + groups.length + " listed first are the ones not ready" : "");
  fill("groups", groups.map(g => {
    const r = el("tr");
    r.dataset.group = g.group;
    r.dataset.ready = g.ready;
    const ready = td("", "readiness");
    ready.appendChild(el("span", "badge " + (g.ready ? "ok" : "bad"), g.ready ? "ready" : "not ready"));
    for (const b of g.blockers) ready.appendChild(el("small", "blocker", b));
    for (const n of g.notes) ready.appendChild(el("small", "note", n));
    const topics = g.topics.join(", ") + (g.topic_count > g.topics.length ? " and " + (g.topic_count - g.topics.length) + " more" : "");
    let target = "not synced (sync.group.offsets.enabled off)";
    if (g.sync) {
      target = !g.synced_at ? "not synced yet" : g.sync_behind < 0 ? "active (" + g.target_state + "), left alone"
        : g.sync_behind > 0 ? g.sync_behind + " partitions behind" : "at the checkpoints (" + (g.target_state || "new") + ")";
    }
    const checked = g.checked_at ? ageText(g.check_age_seconds) + (g.committed !== null ? " · " + (g.committed - g.untranslated) + "/" + g.committed + " translated" : "") : "–";
    r.append(td(g.flow, "wrap"), td(g.group, "wrap"), ready, td(topics, "wrap"), td(num(g.partitions), "num"),
      td(checked), td(num(g.replication_lag) + (g.lagging_partitions ? " on " + g.lagging_partitions : ""), "num"), td(target, "wrap"), td(ms(g.checkpoint_latency_ms), "num"));
    return r;
  }), 9, "no consumer group checkpointed yet");
}

// renderTopology draws the clusters on a circle and an arrow per pair:
// the flows this kmirror runs by their state, the other replications the
// heartbeats show in grey, configured flows the heartbeats miss dashed.
function edgeTitle(e, topo) {
  return e.source + " → " + e.target + (e.flow ? ": flow " + e.flow + " " + e.state + (e.kind === "replication" ? ", lag " + num(e.lag) : "") : ": not run by this kmirror") +
    (e.heartbeats ? "; in the heartbeats" + (e.heartbeat_age_seconds !== null ? ", newest " + ageText(e.heartbeat_age_seconds) : "") : topo.scanned_at ? "; not in the heartbeats" : "");
}

let topoKey = "", topoTitles = [];

function renderTopology(topo) {
  const box = document.getElementById("topology");
  setText(document.getElementById("topology-note"), !topo.clusters.length ? "no flow yet" :
    topo.scanned_at ? "heartbeats read " + ago(topo.scanned_at) + "; grey: replications seen in the heartbeats that this kmirror does not run; dashed: configured, not in the heartbeats" +
      (topo.hidden_edges ? "; " + num(topo.hidden_edges) + " more replications in the heartbeats, " + num(topo.hidden_clusters) + " more clusters (kmirror topology lists them)" : "")
      : "the flows of this kmirror (no heartbeat scan)");
  // Redrawn when what it draws changes; the ages in the titles otherwise.
  const key = JSON.stringify([topo.clusters, topo.edges.map(e => [e.source, e.target, e.flow, e.kind, e.state, e.lag, e.heartbeats, e.configured, e.heartbeat_age_seconds === null]), !!topo.scanned_at]);
  if (key === topoKey) {
    topo.edges.forEach((e, i) => setText(topoTitles[i], edgeTitle(e, topo)));
    return;
  }
  topoKey = key;
  topoTitles = [];
  // The circle grows with the clusters, so that they keep apart.
  const n = topo.clusters.length, nodeR = 18;
  const R = Math.max(70, (n * 2.6 * nodeR) / (2 * Math.PI));
  const W = 2 * R + 160, H = 2 * R + 70, cx = W / 2, cy = H / 2;
  const s = svg("svg", { viewBox: "0 0 " + W + " " + H, class: "topo" });
  const defs = svg("defs", {});
  for (const k of ["ok", "warn", "bad", "pause", "muted"]) {
    const m = svg("marker", { id: "arrow-" + k, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
    m.appendChild(svg("path", { d: "M0 0L10 5L0 10z", class: "head " + k }));
    defs.appendChild(m);
  }
  s.appendChild(defs);
  const pos = {};
  topo.clusters.forEach((c, i) => {
    const a = -Math.PI / 2 + (2 * Math.PI * i) / Math.max(1, n);
    pos[c.alias] = n === 1 ? [cx, cy] : [cx + R * Math.cos(a), cy + R * Math.sin(a)];
  });
  for (const e of topo.edges) {
    const [x1, y1] = pos[e.source], [x2, y2] = pos[e.target];
    const dx = x2 - x1, dy = y2 - y1, len = Math.hypot(dx, dy) || 1;
    const ux = dx / len, uy = dy / len;
    // Bend to the left of the direction, so A->B and B->A part.
    const mx = (x1 + x2) / 2 - uy * 26, my = (y1 + y2) / 2 + ux * 26;
    const sx = x1 + ux * nodeR - uy * 6, sy = y1 + uy * nodeR + ux * 6;
    const ex = x2 - ux * (nodeR + 2) - uy * 6, ey = y2 - uy * (nodeR + 2) + ux * 6;
    let k = "muted";
    if (e.flow) k = e.state === "running" ? (e.lag > 0 ? "warn" : "ok") : e.state === "paused" ? "pause" : e.state === "starting" ? "warn" : "bad";
    const g = svg("g", { class: "edge " + k + (e.flow ? "" : " foreign") + (topo.scanned_at && e.configured && !e.heartbeats ? " unseen" : "") });
    g.dataset.source = e.source;
    g.dataset.target = e.target;
    g.appendChild(svg("path", { d: "M" + sx + " " + sy + "Q" + mx + " " + my + " " + ex + " " + ey, "marker-end": "url(#arrow-" + k + ")" }));
    const label = svg("text", { x: mx, y: my, "text-anchor": "middle" });
    label.textContent = e.flow ? (e.kind === "heartbeats" ? "heartbeats" : e.state + (e.lag > 0 ? " · lag " + num(e.lag) : "")) : "seen";
    g.appendChild(label);
    const t = svg("title", {});
    t.textContent = edgeTitle(e, topo);
    topoTitles.push(t);
    g.appendChild(t);
    s.appendChild(g);
  }
  for (const c of topo.clusters) {
    const [x, y] = pos[c.alias];
    const g = svg("g", { class: "cluster" + (c.error ? " bad" : "") });
    g.dataset.alias = c.alias;
    g.appendChild(svg("circle", { cx: x, cy: y, r: nodeR }));
    // The name outside the circle, away from its centre; long ones cut.
    const below = y >= cy - 1;
    const t = svg("text", { x: x, y: below ? y + nodeR + 12 : y - nodeR - 5, "text-anchor": x < cx - 5 ? "end" : x > cx + 5 ? "start" : "middle" });
    t.textContent = c.alias.length > 18 ? c.alias.slice(0, 17) + "…" : c.alias;
    g.appendChild(t);
    const title = svg("title", {});
    title.textContent = c.alias + (c.error ? ": " + c.error : "");
    g.appendChild(title);
    s.appendChild(g);
  }
  box.replaceChildren(s);
}

function renderGaps(gaps, total) {
  fill("gaps", gaps.map(g => {
    const r = el("tr");
    r.append(td(g.flow), td(g.topic), td(g.partition, "num"), td(num(g.records_lost), "num"), td(ago(g.last_seen)));
    return r;
  }), 5, "no upstream gap met");
  document.getElementById("gaps-note").textContent = total > gaps.length ? "the newest " + gaps.length + " of " + num(total) : "";
}

function renderErrors(errs) {
  fill("errors", errs.map(e => {
    const r = el("tr");
    const m = td(e.message, "msg");
    if (e.attrs) m.appendChild(el("small", null, e.attrs));
    r.append(td(clock(e.time)), td(e.level, "state " + e.level), m);
    return r;
  }), 3, "none since start");
}

function render(ov) {
  renderFlows(ov.flows);
  renderTopology(ov.topology);
  renderGroups(ov.groups, ov.groups_total, ov.groups_ready);
  renderCharts(ov);
  renderControls(ov.flows);
  renderPartitions(ov.partitions);
  renderGaps(ov.gaps, ov.gaps_total);
  renderErrors(ov.errors);
}

// controls wires the partition filters: a change asks for the first page
// at once; typing waits for a pause.
function controls() {
  const ids = { "f-flow": "flow", "f-state": "state", "f-sort": "sort", "f-size": "size" };
  for (const id in ids) {
    document.getElementById(id).addEventListener("change", ev => { query[ids[id]] = ev.target.value; query.page = 0; poll(); });
  }
  let typing = null;
  document.getElementById("f-q").addEventListener("input", ev => {
    clearTimeout(typing);
    typing = setTimeout(() => { query.q = ev.target.value.trim(); query.page = 0; poll(); }, 250);
  });
  document.getElementById("part-controls").addEventListener("submit", ev => ev.preventDefault());
  document.getElementById("p-prev").addEventListener("click", () => { query.page = Math.max(0, query.page - 1); poll(); });
  document.getElementById("p-next").addEventListener("click", () => { query.page++; poll(); });
}

document.addEventListener("DOMContentLoaded", () => {
  takeFragmentToken();
  controls();
  document.getElementById("login").addEventListener("submit", (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(tokenKey, document.getElementById("token").value);
    document.getElementById("token").value = "";
    poll();
  });
  // A link with another token, opened in this tab, takes effect at once.
  window.addEventListener("hashchange", () => { takeFragmentToken(); poll(); });
  poll();
});
