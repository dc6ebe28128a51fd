// kmirror dashboard: polls api/snapshot with the REST token and draws it.
// The token comes from the login form or the URL fragment (#token=...,
// never sent to the server in the URL) and is kept in sessionStorage.
"use strict";

const tokenKey = "kmirror-token";
const pollMs = 1500;
let timer = null;

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

async function poll() {
  clearTimeout(timer);
  try {
    const r = await fetch("api/snapshot", { headers: headers(), cache: "no-store" });
    if (r.status === 401) {
      const had = token() !== "";
      sessionStorage.removeItem(tokenKey);
      showLogin(had ? "wrong token" : "");
      return;
    }
    if (!r.ok) throw new Error("HTTP " + r.status);
    const snap = await r.json();
    document.getElementById("login").hidden = true;
    document.getElementById("main").hidden = false;
    render(snap);
    setConn("live", "ok");
    document.getElementById("updated").textContent = "updated " + clock(snap.now);
  } catch (e) {
    setConn("kmirror unreachable: " + e.message, "bad");
  }
  timer = setTimeout(poll, pollMs);
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
      const cells = ["name", "state", "since", "lag num", "rate num", "bytes num", "repl num", "checkpoint num", "action"];
      for (const c of cells) row.appendChild(td("", c));
      const b = el("button");
      b.dataset.flow = f.name;
      b.addEventListener("click", () => act(f.name, b.dataset.action));
      row.querySelector(".action").appendChild(b);
      flowRows.set(f.name, row);
    }
    body.appendChild(row);
    const set = (cls, text) => { row.querySelector("." + cls.split(" ")[0]).textContent = text; };
    set("name", f.name + (f.kind === "heartbeats" ? " (heartbeats only)" : "") + (f.exactly_once ? " (exactly-once)" : ""));
    const st = row.querySelector(".state");
    st.textContent = f.state + (f.error ? ": " + f.error : "");
    st.className = "state " + f.state;
    set("since", ago(f.since));
    const repl = f.kind === "replication";
    set("lag", repl ? num(f.lag) : "");
    set("rate", repl ? num(f.records_per_second) : "");
    set("bytes", repl ? bytes(f.bytes_per_second) + "/s" : "");
    set("repl", repl ? ms(f.replication_latency_ms) : "");
    set("checkpoint", repl ? ms(f.checkpoint_latency_ms) : "");
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

// path draws values (nulls break the line) in a w×h box, 0 at the bottom.
function path(times, values, w, h, t0, t1, top) {
  let d = "", pen = false;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v === null) { pen = false; continue; }
    const x = t1 > t0 ? ((times[i] - t0) / (t1 - t0)) * w : w;
    const y = h - (top > 0 ? (v / top) * h : 0);
    d += (pen ? "L" : "M") + x.toFixed(1) + " " + y.toFixed(1);
    pen = true;
  }
  return d;
}

function chart(title, times, values, fmt) {
  const box = el("div", "chart");
  const h3 = el("h3", null, title);
  const last = values.length ? values[values.length - 1] : null;
  h3.appendChild(el("span", "now", fmt(last)));
  box.appendChild(h3);
  const w = 300, h = 80, pad = 12;
  const s = svg("svg", { viewBox: "0 0 " + w + " " + (h + pad), preserveAspectRatio: "none" });
  const top = Math.max(0, ...values.filter(v => v !== null));
  const t0 = times[0], t1 = times[times.length - 1];
  s.appendChild(svg("line", { x1: 0, y1: h, x2: w, y2: h, class: "axis" }));
  const d = path(times, values, w, h, t0, t1, top);
  if (d) s.appendChild(svg("path", { d: d, class: "line" }));
  const lo = svg("text", { x: 0, y: h + pad - 1 });
  lo.textContent = times.length ? clock(t0) : "no samples yet";
  s.appendChild(lo);
  const hi = svg("text", { x: w, y: 9, "text-anchor": "end" });
  hi.textContent = "max " + fmt(top);
  s.appendChild(hi);
  box.appendChild(s);
  return box;
}

function renderCharts(snap) {
  const box = document.getElementById("charts");
  box.replaceChildren();
  const times = snap.history.times;
  const kinds = [["lag", "lag (records)", num], ["records_per_second", "records/s", num],
    ["replication_latency_ms", "replication latency", ms], ["checkpoint_latency_ms", "checkpoint latency", ms]];
  for (const f of snap.flows) {
    if (f.kind !== "replication") continue;
    box.appendChild(el("h3", "flow-name", f.name));
    const grid = el("div", "grid");
    for (const [key, title, fmt] of kinds) {
      const values = snap.history.series["flow|" + f.name + "|" + key];
      if (!values && key === "checkpoint_latency_ms") continue;
      grid.appendChild(chart(title, times, values || [], fmt));
    }
    box.appendChild(grid);
  }
  if (!box.children.length) box.appendChild(el("p", "empty", "no replication flow yet"));
}

function spark(values) {
  const w = 120, h = 20;
  const s = svg("svg", { viewBox: "0 0 " + w + " " + h, class: "spark", preserveAspectRatio: "none" });
  if (!values || !values.length) return s;
  const top = Math.max(0, ...values.filter(v => v !== null));
  const idx = values.map((_, i) => i);
  const d = path(idx, values, w, h - 1, 0, Math.max(1, values.length - 1), top);
  if (d) s.appendChild(svg("path", { d: d, class: "line" }));
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

function renderPartitions(flows) {
  const rows = [];
  for (const f of flows) {
    for (const p of f.partitions || []) {
      const r = el("tr");
      r.dataset.flow = f.name;
      r.dataset.topic = p.topic;
      r.dataset.partition = p.partition;
      r.append(td(f.name, "wrap"), td(p.topic + (p.remote !== p.topic ? " → " + p.remote : ""), "wrap"), td(p.partition, "num"),
        td(p.state, "state " + p.state), td(num(p.lag), "lag num"), td(num(p.lag_seconds), "num"));
      const sp = td("");
      sp.appendChild(spark(p.lag_history));
      r.append(sp, td(num(p.records_per_second), "num"), td(ms(p.replication_latency_ms), "num"),
        td(p.done < 0 ? "–" : num(p.done), "num"), td(p.source_end < 0 ? "–" : num(p.source_end), "num"), td(p.error || "", "error"));
      rows.push(r);
    }
  }
  fill("partitions", rows, 12, "no partitions assigned yet");
}

function renderGroups(cps) {
  fill("groups", cps.map(c => {
    const r = el("tr");
    r.append(td(c.flow, "wrap"), td(c.group, "wrap"), td(c.topic, "wrap"), td(c.partition, "num"), td(num(c.upstream_offset), "num"),
      td(num(c.downstream_offset), "num"), td(ago(c.at)), td(ms(c.latency_ms), "num"));
    return r;
  }), 8, "no checkpoint written yet");
}

function renderGaps(gaps) {
  fill("gaps", gaps.map(g => {
    const r = el("tr");
    r.append(td(g.flow), td(g.topic), td(g.partition, "num"), td(num(g.records_lost), "num"), td(ago(g.last_seen)));
    return r;
  }), 5, "no upstream gap met");
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

function render(snap) {
  renderFlows(snap.flows);
  renderCharts(snap);
  renderPartitions(snap.flows);
  renderGroups(snap.checkpoints);
  renderGaps(snap.gaps);
  renderErrors(snap.errors);
}

document.addEventListener("DOMContentLoaded", () => {
  takeFragmentToken();
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
