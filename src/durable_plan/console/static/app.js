// The plan console's page: plain JavaScript, no build step, nothing from elsewhere.
// State comes from /api (JSON) and, while a plan runs, from its events (Server-Sent Events);
// actions are POSTs with a JSON body (the server checks the token and the origin).
"use strict";

const PHASES = ["pending", "running", "awaiting_approval", "paused", "ok", "failed",
  "not_taken", "skipped", "reused"];
const PHASE_WORDS = { awaiting_approval: "awaiting approval", not_taken: "not taken",
  paused: "paused (breakpoint)" };
const SVG = "http://www.w3.org/2000/svg";
const $ = (id) => document.getElementById(id);

const state = {
  info: null, listPage: null, selected: null, view: null, steps: new Map(),
  source: null, detailsFor: null, refreshTimer: null,
};
window.__console = { colourChanged: {}, rendered: null };

function el(tag, attrs = {}, ...children) {
  const node = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4))
    : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "text") node.textContent = v;
    else if (k === "onclick") node.addEventListener("click", v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children) if (c !== null && c !== undefined) node.append(c);
  return node;
}

async function api(path, options = {}) {
  const response = await fetch(path, { credentials: "same-origin", ...options });
  const text = await response.text();
  let body;
  try { body = JSON.parse(text); } catch { body = { error: text }; }
  if (!response.ok) throw new Error(body.error || `${response.status}`);
  return body;
}

function post(path, body) {
  return api(path, { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body) });
}

const planPath = (id) => `/api/plans/${encodeURIComponent(id)}`;

function age(seconds) {
  if (seconds < 60) return `${Math.round(seconds)} s`;
  if (seconds < 3600) return `${Math.round(seconds / 60)} min`;
  if (seconds < 86400) return `${Math.round(seconds / 3600)} h`;
  return `${Math.round(seconds / 86400)} d`;
}

// --- the list -------------------------------------------------------------------------

async function loadList(append = false) {
  const params = new URLSearchParams();
  const q = $("search").value.trim(); const status = $("status-filter").value;
  if (q) params.set("q", q);
  if (status) params.set("status", status);
  if (append && state.listPage) params.set("page", state.listPage);
  try {
    const found = await api(`/api/plans?${params}`);
    $("list-error").hidden = true;
    const body = $("plans").tBodies[0];
    if (!append) body.replaceChildren();
    for (const r of found.rows) body.append(listRow(r));
    state.listPage = found.next_page;
    $("next-page").hidden = !found.next_page;
  } catch (err) {
    $("list-error").textContent = `the list: ${err.message}`;
    $("list-error").hidden = false;
  }
}

function listRow(r) {
  const status = r.plan_status && r.status === "running" ? r.plan_status
    : (r.plan_status && r.status === "completed" ? r.plan_status : r.status);
  const steps = r.steps_total === null ? "" : `${r.steps_done}/${r.steps_total}`;
  const tr = el("tr", { class: "row" + (r.id === state.selected ? " selected" : ""),
    "data-id": r.id, onclick: () => { location.hash = `#/w/${encodeURIComponent(r.id)}`; } },
  el("td", { class: "wid" }, r.id, el("span", { class: "kind", text: r.kind })),
  el("td", {}, el("span", { class: `badge s-${status}`, text: status.replace("_", " ") })),
  el("td", { text: steps }), el("td", { text: age(r.age_s) }),
  el("td", { text: r.tokens === null ? "" : String(r.tokens) }));
  return tr;
}

// --- one workflow -----------------------------------------------------------------------

function closeStream() {
  if (state.source) { state.source.close(); state.source = null; }
  if (state.refreshTimer) { clearInterval(state.refreshTimer); state.refreshTimer = null; }
}

async function openWorkflow(id) {
  closeStream();
  state.selected = id; state.steps = new Map();
  hideDetails();
  for (const tr of document.querySelectorAll("tr.row")) {
    tr.classList.toggle("selected", tr.dataset.id === id);
  }
  $("empty").hidden = true; $("view").hidden = false;
  $("view-title").textContent = id;
  let view;
  try { view = await api(planPath(id)); } catch (err) {
    $("view-failure").textContent = err.message; $("view-failure").hidden = false; return;
  }
  if (state.selected !== id) return;
  showView(view, true);
  if (view.kind === "plan" && view.running) {
    if (view.sealed && !state.info.decodes) {
      // Sealed events cannot be read without keys: what the history says, every 2 s.
      state.refreshTimer = setInterval(() => refresh(id), 2000);
      $("view-live").textContent = "refreshing from history every 2 s";
    } else {
      follow(id);
    }
  }
}

async function refresh(id) {
  try {
    const view = await api(planPath(id));
    if (state.selected === id) showView(view, false);
    if (!view.running) closeStream();
  } catch { /* the next turn tries again */ }
}

function showView(view, first) {
  state.view = view;
  const status = view.plan_status || view.status;
  $("view-status").className = `badge s-${status}`;
  $("view-status").textContent = status.replace("_", " ");
  $("cancel").hidden = !view.running;
  const bits = [view.kind, `task queue ${view.task_queue}`,
    `started ${new Date(view.started * 1000).toLocaleString()}`];
  if (view.closed) bits.push(`ended after ${age(view.closed - view.started)}`);
  if (view.tokens) bits.push(`${view.tokens.total ?? "?"} tokens`);
  if (view.parent) bits.push(`from ${view.parent}`);
  $("view-meta").textContent = bits.join(" · ");
  $("hidden-notes").replaceChildren(...view.hidden.map((t) => el("li", { text: `hidden: ${t}` })));
  $("view-failure").hidden = !view.failure;
  $("view-failure").textContent = view.failure || "";
  $("children").hidden = view.kind !== "conversation";
  $("agent-state").hidden = !view.agent;
  $("agent-state").textContent = view.agent ? view.agent.text : "";
  $("graph-wrap").hidden = view.kind !== "plan";
  $("legend").hidden = view.kind !== "plan";
  if (view.kind === "conversation") {
    $("child-list").replaceChildren(...view.plans.map((p) => {
      const status = p.plan_status || p.status;
      const steps = p.steps_total !== null ? ` · ${p.steps_done}/${p.steps_total} steps` : "";
      return el("li", { onclick: () => { location.hash = `#/w/${encodeURIComponent(p.id)}`; } },
        el("span", { class: `badge s-${status}`, text: status }), ` ${p.id}${steps}`);
    }));
  }
  if (view.kind !== "plan") return;
  if (first) drawGraph(view.graph);
  for (const line of view.ledger || []) {
    const step = stepOf(line.id, line.tool);
    Object.assign(step, line);
    if (line.reused_from) step.phase = "reused";
    paint(line.id);
  }
  if (first) window.__console.rendered = performance.now();
  if (state.detailsFor) showDetails(state.detailsFor, false);
}

function stepOf(id, tool) {
  let step = state.steps.get(id);
  if (!step) {
    step = { id, tool: tool || "", phase: "pending", attempts: 0, log: [], items: null };
    state.steps.set(id, step);
  }
  return step;
}

// --- the graph ---------------------------------------------------------------------------

function drawGraph(graph) {
  const svg = $("graph"); svg.replaceChildren();
  const w = graph.node_w, h = graph.node_h, pad = 20;
  svg.setAttribute("width", graph.width + pad * 2);
  svg.setAttribute("height", graph.height + pad * 2);
  const defs = el("svg:defs", {}, el("svg:marker", { id: "arrow", viewBox: "0 0 10 10",
    refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
  el("svg:path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#9aa3ad" })));
  svg.append(defs);
  const at = new Map(graph.nodes.map((n) => [n.id, n]));
  const edges = el("svg:g", { class: "edges" });
  for (const e of graph.edges) {
    const a = at.get(e.from), b = at.get(e.to);
    if (!a || !b) continue;
    const x1 = a.x + pad + w, y1 = a.y + pad + h / 2, x2 = b.x + pad, y2 = b.y + pad + h / 2;
    const mid = (x1 + x2) / 2;
    const path = el("svg:path", { class: "edge" + (e.dashed ? " dashed" : ""),
      d: `M ${x1} ${y1} C ${mid} ${y1}, ${mid} ${y2}, ${x2} ${y2}`, "marker-end": "url(#arrow)" });
    const words = [...e.binds, e.when].filter(Boolean);
    if (words.length) path.append(el("svg:title", { text: words.join("\n") }));
    edges.append(path);
    if (e.binds.length || e.when) {
      const label = e.binds.length ? e.binds[0].split(" ← ")[0] + (e.binds.length > 1 ? ` +${e.binds.length - 1}` : "")
        : "when";
      edges.append(el("svg:text", { class: "edge-label", x: mid, y: (y1 + y2) / 2 - 3,
        "text-anchor": "middle", text: label }));
    }
  }
  svg.append(edges);
  const nodes = el("svg:g", { class: "nodes" });
  for (const n of graph.nodes) {
    stepOf(n.id, n.tool);
    const g = el("svg:g", { class: `node phase-pending${n.returned ? " returned" : ""}`,
      "data-step": n.id, "data-phase": "pending", transform: `translate(${n.x + pad},${n.y + pad})` },
    el("svg:rect", { width: w, height: h, rx: 7 }),
    el("svg:text", { class: "sid", x: 9, y: 17, text: clip(n.id, 24) }),
    el("svg:text", { class: "tool", x: 9, y: 32, text: clip(n.lines[0] || n.tool, 28) }),
    el("svg:text", { class: "note", x: 9, y: 46, text: "" }),
    el("svg:title", { text: [n.id, ...n.lines].join("\n") }));
  g.dataset.title = [n.id, ...n.lines].join("\n");
    g.addEventListener("click", () => showDetails(n.id, true));
    nodes.append(g);
  }
  svg.append(nodes);
  $("legend").replaceChildren(...PHASES.map((p) => el("span", { class: `phase-${p}` },
    el("i"), PHASE_WORDS[p] || p.replace("_", " "))));
}

function clip(text, n) { return text.length > n ? text.slice(0, n - 1) + "…" : text; }

function noteOf(step) {
  if (step.phase === "running") {
    if (step.items) return `${step.items.done}/${step.items.items ?? "?"} items`;
    if (step.round) return `round ${step.round}`;
    return step.attempts > 1 ? `running · attempt ${step.attempts}` : "running";
  }
  if (step.phase === "failed") return clip(`failed: ${step.error || ""}`, 30);
  if (step.phase === "ok" && step.duration_ms) return `ok · ${Math.round(step.duration_ms)} ms`;
  if (step.phase === "reused") return `reused from plan ${step.reused_from}`;
  return PHASE_WORDS[step.phase] || step.phase.replace("_", " ");
}

function paint(id) {
  const step = state.steps.get(id);
  const g = document.querySelector(`#graph .node[data-step="${CSS.escape(id)}"]`);
  if (!step || !g) return;
  if (g.dataset.phase !== step.phase) {
    for (const p of PHASES) g.classList.remove(`phase-${p}`);
    g.classList.add(`phase-${step.phase}`);
    g.dataset.phase = step.phase;
    window.__console.colourChanged[id] = { phase: step.phase, at: Date.now() };
  }
  g.querySelector("text.note").textContent = noteOf(step);
  // The whole error on hover: the node's own line has room for its start only.
  g.querySelector("title").textContent = g.dataset.title + (step.error ? `\n${step.error}` : "");
}

// --- live events ---------------------------------------------------------------------------

function follow(id) {
  const source = new EventSource(`${planPath(id)}/events`);
  state.source = source;
  $("view-live").textContent = "live";
  source.addEventListener("plan", (m) => apply(JSON.parse(m.data)));
  source.addEventListener("end", () => { source.close(); $("view-live").textContent = ""; refresh(id); });
  source.addEventListener("fault", (m) => {
    source.close();
    $("view-live").textContent = `events unavailable (${JSON.parse(m.data).error}); refreshing every 2 s`;
    state.refreshTimer = setInterval(() => refresh(id), 2000);
  });
}

function apply(ev) {
  if (ev.kind === "plan_finished") { if (ev.usage) state.planUsage = ev.usage; return; }
  if (!ev.step) return;
  const parent = ev.step.split("/")[0]; // a step path's first segment is its step
  const step = stepOf(state.steps.has(ev.step) ? ev.step : parent, ev.tool);
  switch (ev.kind) {
    case "step_started": step.phase = "running"; step.attempts = ev.attempts || step.attempts || 1; break;
    case "awaiting_approval": step.phase = "awaiting_approval";
      step.args_digest = (ev.detail || {}).args_digest;
      refresh(state.selected); // its progress line has the arguments the person decides on
      break;
    case "paused": step.phase = "paused"; step.paused_path = ev.path || ev.step;
      step.log.push({ kind: "pause", text: `paused at ${step.paused_path}` }); break;
    case "resumed": step.phase = "running"; delete step.paused_path;
      step.log.push({ kind: "pause", text: `${ev.status || "resumed"} at ${ev.path || ev.step}` }); break;
    case "approval_decided": step.phase = "running"; delete step.args_digest;
      step.log.push({ kind: "decision", text: `${ev.status || "decided"}` }); break;
    case "item_finished": {
      const items = step.items || (step.items = { items: null, done: 0, failed: 0 });
      items.items = (ev.detail || {}).of ?? items.items; items.done += 1;
      if (ev.status === "failed") items.failed += 1;
      break;
    }
    case "agent_round": step.round = ev.round;
      if (step.log.length < 200) step.log.push({ kind: "round", text: `round ${ev.round}`, usage: ev.usage }); break;
    case "agent_tool_call":
      if (step.log.length < 200) step.log.push({ kind: "tool", text: `${ev.tool} · ${ev.status || ""}${ev.error ? " · " + ev.error : ""}` });
      break;
    case "step_finished":
      Object.assign(step, { phase: ev.status || "ok", duration_ms: ev.duration_ms,
        attempts: ev.attempts || step.attempts, error: ev.error || null, usage: ev.usage });
      step.items = null; step.round = null; delete step.args_digest;
      break;
    default: return;
  }
  paint(step.id);
  if (state.detailsFor === step.id) showDetails(step.id, false);
}

// --- a step's details ------------------------------------------------------------------------

async function showDetails(id, fetchCalls) {
  const step = state.steps.get(id); if (!step) return;
  const moved = state.detailsFor !== id;
  state.detailsFor = id;
  for (const g of document.querySelectorAll("#graph .node")) g.classList.toggle("selected", g.dataset.step === id);
  $("details").hidden = false;
  document.body.classList.add("with-details");
  $("details-title").textContent = id;
  if (moved) $("action-said").textContent = "";
  const facts = [["tool", step.tool], ["status", PHASE_WORDS[step.phase] || step.phase],
    ["level", step.level], ["attempts", step.attempts], ["duration", step.duration_ms ? `${Math.round(step.duration_ms)} ms` : null],
    ["tokens", step.usage ? `${step.usage.total} (in ${step.usage.input}, out ${step.usage.output})` : null],
    ["items", step.items ? `${step.items.done} of ${step.items.items ?? "?"} (${step.items.failed} failed)` : null],
    ["error", step.error]];
  $("details-facts").replaceChildren(...facts.filter(([, v]) => v !== null && v !== undefined && v !== "")
    .flatMap(([k, v]) => [el("dt", { text: k }), el("dd", { class: `f-${k}`, text: String(v) })]));
  const awaiting = step.phase === "awaiting_approval";
  $("approval").hidden = !awaiting;
  if (awaiting) {
    $("approval-digest").textContent = step.args_digest || "";
    $("approval-args").textContent = step.args !== undefined ? JSON.stringify(step.args, null, 1) : "(see the call below)";
  }
  $("breakpoint").hidden = step.phase !== "paused";
  $("breakpoint-path").textContent = step.paused_path || id;
  $("agent-log").hidden = !step.log.length;
  $("agent-log").querySelector("ol").replaceChildren(...step.log.map((e) => el("li", { text: e.text })));
  if (step.tool === "agent") {
    const child = `${state.selected}/agent/${id}`;
    $("calls").replaceChildren(el("p", {}, el("a", { href: `#/w/${encodeURIComponent(child)}`, text: "open the agent step's workflow" })));
  }
  if (!fetchCalls && !moved) return;
  try {
    const found = await api(`${planPath(state.selected)}/steps/${encodeURIComponent(id)}`);
    if (state.detailsFor !== id) return;
    const calls = found.calls.map((c) => el("div", { class: "call" },
      el("h5", { text: `${c.id} · attempt ${c.attempt}${c.duration_ms ? ` · ${c.duration_ms} ms` : ""}` }),
      valueBlock("arguments", c.args), c.result ? valueBlock("result", c.result) : null,
      c.error ? el("p", { class: "error", text: c.error }) : null));
    if (found.total > found.calls.length) calls.push(el("p", { class: "cut", text: `${found.total - found.calls.length} more calls not shown` }));
    if (step.tool !== "agent") $("calls").replaceChildren(...calls);
  } catch (err) {
    $("calls").replaceChildren(el("p", { class: "error", text: err.message }));
  }
}

function valueBlock(title, v) {
  if (v.hidden) return el("div", {}, el("strong", { text: title }), el("p", { class: "muted", text: `hidden: ${v.hidden}` }));
  return el("div", {}, el("strong", { text: title }), el("pre", { text: v.text }),
    v.cut ? el("p", { class: "cut", text: `cut: ${v.chars} characters in all` }) : null);
}

async function decide(approved) {
  const id = state.detailsFor; const step = state.steps.get(id);
  $("action-said").textContent = "…";
  try {
    const said = await post(`${planPath(state.selected)}/steps/${encodeURIComponent(id)}/decide`,
      { approved, reason: $("approval-reason").value, digest: step.args_digest || "" });
    $("action-said").textContent = `${approved ? "approved" : "rejected"}: ${said.said}`;
  } catch (err) { $("action-said").textContent = `refused: ${err.message}`; }
}

async function breakpointAction(action) {
  const id = state.detailsFor;
  try {
    const step = state.steps.get(id) || {};
    const said = await post(`${planPath(state.selected)}/steps/${encodeURIComponent(id)}/breakpoint`,
      { action, path: step.paused_path || id });
    $("action-said").textContent = said.said;
  } catch (err) { $("action-said").textContent = `refused: ${err.message}`; }
}

async function cancelPlan() {
  if (!confirm(`Cancel ${state.selected}? Its running steps are cancelled.`)) return;
  try {
    await post(`${planPath(state.selected)}/cancel`, {});
    $("view-live").textContent = "cancel requested";
  } catch (err) { $("view-failure").textContent = `cancel refused: ${err.message}`; $("view-failure").hidden = false; }
}

function hideDetails() {
  $("details").hidden = true; state.detailsFor = null;
  document.body.classList.remove("with-details");
}

// --- wiring ------------------------------------------------------------------------------------

function route() {
  const m = location.hash.match(/^#\/w\/(.+)$/);
  if (m) openWorkflow(decodeURIComponent(m[1]));
  else { closeStream(); state.selected = null; $("view").hidden = true; $("empty").hidden = false; hideDetails(); }
}

async function start() {
  state.info = await api("/api/info");
  $("server").textContent = `${state.info.address} · namespace ${state.info.namespace} · ` +
    (state.info.decodes ? "decoding sealed values with keys" : "no keys: sealed values stay hidden");
  $("filters").addEventListener("submit", (e) => { e.preventDefault(); loadList(); });
  $("search").addEventListener("input", () => loadList());
  $("status-filter").addEventListener("change", () => loadList());
  $("next-page").addEventListener("click", () => loadList(true));
  $("details-close").addEventListener("click", hideDetails);
  $("approve").addEventListener("click", () => decide(true));
  $("reject").addEventListener("click", () => decide(false));
  $("cancel").addEventListener("click", cancelPlan);
  for (const b of $("breakpoint").querySelectorAll("button")) b.addEventListener("click", () => breakpointAction(b.dataset.action));
  window.addEventListener("hashchange", route);
  await loadList();
  setInterval(() => { if (!document.hidden) loadList(); }, 5000);
  route();
}

start();
