// agw console: a reference client of agw's own HTTP API (docs/console.md). Plain ES module, no
// build step, no dependencies: it is served as written, from the binary.
//
// State lives in the page; the bearer token and the run being watched in sessionStorage (this
// tab only), so a reload re-attaches to the run from its last seq.

const $ = (id) => document.getElementById(id);
const el = (tag, attrs = {}, ...children) => {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (value !== undefined && value !== null && value !== false) node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child !== undefined && child !== null) node.append(child.nodeType ? child : String(child));
  }
  return node;
};

const state = {
  agents: [],
  agent: null, // the selected agent's summary
  chatId: null,
  runId: null,
  lastSeq: 0,
  events: [], // the current run's (or replayed chat's) events, for the inspector
  abort: null,
  traceId: null, // the W3C trace the console started the run in (its spans, when agw exports traces)
  calls: [], // the finished run's model calls: [{tokens in, out}] from its stored messages
};

// A new W3C trace for a run the console starts: agw makes the run's spans its children.
function traceparent() {
  const hex = (bytes) => Array.from(crypto.getRandomValues(new Uint8Array(bytes)), (b) => b.toString(16).padStart(2, "0")).join("");
  state.traceId = hex(16);
  return `00-${state.traceId}-${hex(8)}-01`;
}

// ---------------------------------------------------------------------------------------------
// The API

function headers(json) {
  const h = {};
  if (json) h["Content-Type"] = "application/json";
  const token = sessionStorage.getItem("agw.token");
  if (token) h.Authorization = `Bearer ${token}`;
  return h;
}

async function api(method, path, body) {
  const resp = await fetch(path, { method, headers: headers(body !== undefined), body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await resp.text();
  let parsed = null;
  try { parsed = text ? JSON.parse(text) : null; } catch { parsed = { msg: text }; }
  if (!resp.ok) throw new Error(`${resp.status}: ${(parsed && (parsed.msg || parsed.message)) || resp.statusText}`);
  return parsed && "data" in parsed ? parsed.data : parsed;
}

// Reads an SSE body, calling `onEvent` with each event's JSON as it arrives.
async function readEvents(resp, onEvent) {
  if (!resp.ok) {
    let msg = resp.statusText;
    try { msg = (await resp.json()).msg || msg; } catch { /* not JSON */ }
    throw new Error(`${resp.status}: ${msg}`);
  }
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = frame.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, "")).join("\n");
      if (data) onEvent(JSON.parse(data));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Markdown: a small, safe subset (text is escaped first; no raw HTML ever reaches the page).

function escapeHtml(text) {
  return text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

function inline(text) {
  return escapeHtml(text)
    .replace(/`([^`]+)`/g, "<code>$1</code>")
    .replace(/\*\*([^*]+)\*\*/g, "<strong>$1</strong>")
    .replace(/(^|[^*])\*([^*\s][^*]*)\*/g, "$1<em>$2</em>")
    .replace(/!\[([^\]]*)\]\((https:\/\/[^\s)]+)\)/g, '<img alt="$1" src="$2">')
    .replace(/\[([^\]]+)\]\((https?:\/\/[^\s)]+)\)/g, '<a href="$2" rel="noopener noreferrer" target="_blank">$1</a>');
}

function markdown(source) {
  const out = [];
  const lines = source.split("\n");
  let list = null;
  let paragraph = [];
  const flush = () => {
    if (paragraph.length) out.push(`<p>${paragraph.map(inline).join("<br>")}</p>`);
    paragraph = [];
    if (list) out.push(`</${list}>`);
    list = null;
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = line.match(/^```(\S*)/);
    if (fence) {
      flush();
      const body = [];
      for (i++; i < lines.length && !lines[i].startsWith("```"); i++) body.push(lines[i]);
      out.push(`<pre><code data-lang="${escapeHtml(fence[1])}">${escapeHtml(body.join("\n"))}</code></pre>`);
      continue;
    }
    const heading = line.match(/^(#{1,4})\s+(.*)/);
    const bullet = line.match(/^\s*[-*]\s+(.*)/);
    const numbered = line.match(/^\s*\d+[.)]\s+(.*)/);
    if (heading) {
      flush();
      const level = heading[1].length + 2;
      out.push(`<h${level}>${inline(heading[2])}</h${level}>`);
    } else if (bullet || numbered) {
      const kind = bullet ? "ul" : "ol";
      if (paragraph.length) { out.push(`<p>${paragraph.map(inline).join("<br>")}</p>`); paragraph = []; }
      if (list !== kind) { if (list) out.push(`</${list}>`); out.push(`<${kind}>`); list = kind; }
      out.push(`<li>${inline((bullet || numbered)[1])}</li>`);
    } else if (!line.trim()) {
      flush();
    } else {
      if (list) { out.push(`</${list}>`); list = null; }
      paragraph.push(line);
    }
  }
  flush();
  return out.join("");
}

// ---------------------------------------------------------------------------------------------
// Viewports: a frontend tool's form, or an answer's ```viewport block, in a frame sandboxed
// without allow-same-origin (frame.html hosts it: no access to this page, its token or the API).

const viewportFrames = new Map(); // the frame's window → {html, init, onSubmit}

window.addEventListener("message", (event) => {
  const entry = viewportFrames.get(event.source);
  if (!entry) return;
  const data = event.data;
  if (data && data.type === "agw_viewport_ready") {
    event.source.postMessage({ type: "agw_viewport", html: entry.html, init: entry.init }, "*");
  } else if (data && data.type === "frontend_submit" && entry.onSubmit) {
    entry.onSubmit(data.params);
  }
});

// Appends the viewport `key` to `parent`, handed `init`; `onSubmit` takes what it submits.
// Resolves false when there is no such viewport (or it is not HTML).
async function viewport(parent, key, init, onSubmit) {
  let data;
  try { data = await api("GET", `/api/ap/viewport?viewportKey=${encodeURIComponent(key)}`); } catch { return false; }
  if (!data || typeof data.html !== "string") return false;
  const frame = el("iframe", { class: "viewport", sandbox: "allow-scripts allow-forms", src: "frame.html", title: `Viewport ${key}`, "data-viewport": key });
  parent.append(frame);
  viewportFrames.set(frame.contentWindow, { html: data.html, init, onSubmit });
  return true;
}

// The ```viewport blocks of a finished answer: `type=html, key=<key>` then the JSON it shows.
function answerViewports(block) {
  const pattern = /```viewport\n([^\n]*)\n([\s\S]*?)\n```/g;
  for (const match of block.text.matchAll(pattern)) {
    const key = (match[1].match(/key=([\w-]+)/) || [])[1];
    if (!key) continue;
    let payload = match[2];
    try { payload = JSON.parse(payload); } catch { /* shown as text */ }
    viewport(block.node, key, payload, null);
  }
}

// ---------------------------------------------------------------------------------------------
// Rendering one run's events

// Where a run's events go: its own lane, or a child task's panel inside it.
class Lane {
  constructor(root) {
    this.root = root;
    this.blocks = new Map(); // contentId / reasoningId → {node, text}
    this.calls = new Map(); // toolId / actionId → card parts
    this.children = new Map(); // taskId → Lane
    this.plan = null; // the checklist node
  }

  lane(event) {
    if (!event.taskId || !this.children.has(event.taskId)) return this;
    return this.children.get(event.taskId);
  }
}

let transcriptLane = null;

function statusLine(text) {
  $("status").textContent = text;
}

function render(event) {
  state.events.push(event);
  if (typeof event.seq === "number") state.lastSeq = Math.max(state.lastSeq, event.seq);
  timelineRow(event);
  const top = transcriptLane;
  // A child task's own start names it; everything after with its taskId goes into its panel.
  if (event.type === "task.start" && event.subAgentKey) {
    const panel = el("section", { class: "child", "aria-label": `Sub-agent ${event.subAgentKey}` },
      el("div", { class: "who" }, `▸ ${event.taskName || event.taskId} — ${event.subAgentKey}`));
    top.root.append(panel);
    top.children.set(event.taskId, new Lane(panel));
    return;
  }
  const lane = top.lane(event);
  switch (event.type) {
    case "request.query": {
      // The message's images and files are its references that carry content (docs/models.md).
      const files = (event.references || []).filter((r) => r && r.url && /^(data:|https:)/.test(r.url));
      const names = files.map((f) => `📎 ${f.name || f.mimeType || "file"}`).join("  ");
      lane.root.append(el("div", { class: "turn user" }, el("span", { class: "who" }, "You"), event.message,
        names ? el("span", { class: "files" }, names) : null));
      state.chatId = event.chatId;
      break;
    }
    case "request.steer":
      lane.root.append(el("div", { class: "turn user" }, el("span", { class: "who" }, "You (steer)"), event.message));
      break;
    case "run.start":
      state.runId = event.runId;
      state.chatId = event.chatId;
      remember();
      setRunning(true);
      facts();
      break;
    case "reasoning.start":
    case "reasoning.snapshot": {
      const body = el("div");
      const node = el("details", { class: "reasoning" }, el("summary", {}, "Reasoning"), body);
      lane.root.append(node);
      const block = { node: body, text: event.text || "" };
      body.textContent = block.text;
      lane.blocks.set(event.reasoningId, block);
      break;
    }
    case "reasoning.delta": {
      const block = lane.blocks.get(event.reasoningId);
      if (block) { block.text += event.delta; block.node.textContent = block.text; }
      break;
    }
    case "content.start":
    case "content.snapshot": {
      const node = el("div", { class: "content", "data-content-id": event.contentId });
      lane.root.append(node);
      const block = { node, text: event.text || "" };
      node.innerHTML = markdown(block.text);
      lane.blocks.set(event.contentId, block);
      if (event.type === "content.snapshot") answerViewports(block);
      break;
    }
    case "content.end": {
      const block = lane.blocks.get(event.contentId);
      if (block) answerViewports(block);
      break;
    }
    case "content.delta": {
      const block = lane.blocks.get(event.contentId);
      if (block) { block.text += event.delta; block.node.innerHTML = markdown(block.text); }
      break;
    }
    case "content.citation": {
      const block = lane.blocks.get(event.contentId);
      if (block) block.node.append(el("sup", { title: event.messageId || "" }, `[${event.index}]`));
      break;
    }
    case "content.revoke": {
      const block = lane.blocks.get(event.contentId);
      if (block) block.node.classList.add("revoked");
      lane.root.append(el("p", { class: "notice" }, `Withdrawn (${event.guard}): ${event.reason}`));
      break;
    }
    case "tool.start":
    case "action.start":
      toolCard(lane, event);
      break;
    case "tool.args":
    case "action.args": {
      const card = lane.calls.get(event.toolId || event.actionId);
      if (card) { card.args += event.delta; card.argsNode.textContent = card.args; }
      break;
    }
    case "tool.end":
    case "action.end": {
      const card = lane.calls.get(event.toolId || event.actionId);
      if (!card) break;
      try { card.argsNode.textContent = JSON.stringify(JSON.parse(card.args || "{}"), null, 2); } catch { /* as streamed */ }
      if (card.frontend) frontendAnswer(card, event.toolId);
      break;
    }
    case "tool.progress": {
      const card = lane.calls.get(event.toolId);
      if (card) card.progress.textContent += event.delta;
      break;
    }
    case "tool.result":
    case "action.result": {
      const card = lane.calls.get(event.toolId || event.actionId);
      if (!card) break;
      const result = typeof event.result === "string" ? event.result : JSON.stringify(event.result);
      let shown = result;
      try { shown = JSON.stringify(JSON.parse(result), null, 2); } catch { /* plain text */ }
      card.result.textContent = shown;
      card.node.classList.remove("waiting");
      card.form?.remove();
      card.node.querySelector("iframe.viewport")?.remove();
      if (event.timestamp && card.started) card.meta.textContent = `${event.timestamp - card.started} ms`;
      break;
    }
    case "awaiting.ask":
      awaitingCard(lane, event);
      break;
    case "awaiting.answer":
    case "awaiting.expired": {
      const card = document.querySelector(`[data-awaiting="${CSS.escape(event.awaitingId)}"]`);
      if (card) { card.classList.remove("waiting"); card.querySelector(".choices")?.remove(); card.append(el("div", { class: "meta" }, event.type === "awaiting.expired" ? "expired" : "answered")); }
      break;
    }
    case "plan.update":
      planList(lane, event.plan);
      break;
    case "task.start":
    case "task.complete":
    case "task.fail":
    case "task.cancel": {
      const status = { "task.start": "running", "task.complete": "completed", "task.fail": "failed", "task.cancel": "cancelled" }[event.type];
      const item = lane.plan?.querySelector(`[data-task="${CSS.escape(event.taskId)}"]`)
        || top.plan?.querySelector(`[data-task="${CSS.escape(event.taskId)}"]`);
      if (item) item.dataset.status = status;
      const child = top.children.get(event.taskId);
      if (child && event.type !== "task.start") child.root.append(el("div", { class: "who" }, `◂ ${status}`));
      break;
    }
    case "model.fallback":
      lane.root.append(el("p", { class: "notice" }, `Model ${event.from.model} failed (${event.reason}); ${event.to.model} answers.`));
      break;
    case "guard.warning":
      lane.root.append(el("p", { class: "notice" }, `Warning (${event.guard}): ${event.message}`));
      break;
    case "guard.block":
      lane.root.append(el("p", { class: "notice error" }, `Blocked (${event.guard}): ${event.reason}`));
      break;
    case "agent.handoff":
      lane.root.append(el("p", { class: "notice" }, `Handed over from ${event.fromAgentKey} to ${event.toAgentKey}.`));
      break;
    case "context.compact":
      lane.root.append(el("p", { class: "notice" }, "The conversation was compacted to fit the context window."));
      break;
    case "run.complete":
      runEnded(top, `Completed (${event.finishReason})`, event);
      break;
    case "run.error":
      runEnded(top, `Error ${event.error.code}: ${event.error.message}`, event, true);
      break;
    case "run.cancel":
      runEnded(top, "Cancelled", event);
      break;
    default:
      break;
  }
  $("transcript").lastElementChild?.scrollIntoView({ block: "end" });
}

function toolCard(lane, event) {
  const id = event.toolId || event.actionId;
  const name = event.toolName || event.actionName || "tool";
  const kind = event.type.startsWith("action") ? "action" : event.toolType || "function";
  const argsNode = el("pre", { "aria-label": "Arguments" });
  const result = el("pre", { "aria-label": "Result" });
  const progress = el("pre", { "aria-label": "Progress" });
  const meta = el("span", { class: "meta" }, kind);
  const node = el("article", { class: "card", "aria-label": `Tool call ${name}` },
    el("header", {}, el("span", {}, `🔧 ${name}`), meta), argsNode, progress, result);
  lane.root.append(node);
  const frontend = Boolean(event.toolKey);
  if (frontend) node.classList.add("waiting");
  lane.calls.set(id, { node, args: "", argsNode, result, progress, meta, frontend, toolKey: event.toolKey, started: event.timestamp, form: null });
}

// A frontend tool waits for the person: its viewport, handed the call's arguments, when it has
// one; a form of JSON values otherwise (and always, folded away, for a keyboard or a test).
async function frontendAnswer(card, toolId) {
  const runId = state.runId;
  let params = {};
  try { params = JSON.parse(card.args || "{}"); } catch { /* the viewport gets {} */ }
  const submit = async (answer) => {
    try {
      await api("POST", "/api/ap/submit", { runId, toolId, params: answer ?? {} });
    } catch (err) { statusLine(err.message); }
  };
  const shown = card.toolKey && await viewport(card.node, card.toolKey, { type: "tool_init", data: { params } }, submit);
  frontendForm(card, toolId, shown);
}

function frontendForm(card, toolId, folded) {
  const runId = state.runId;
  const area = el("textarea", { rows: 3, "aria-label": "Answer as JSON" });
  area.value = "{}";
  const form = el("form", { "aria-label": "Answer the tool" },
    el("label", {}, "Answer (JSON)", area),
    el("button", { type: "submit", class: "primary" }, "Submit"));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    let params;
    try { params = JSON.parse(area.value); } catch (err) { statusLine(`Not JSON: ${err.message}`); return; }
    try {
      await api("POST", "/api/ap/submit", { runId, toolId, params });
      card.form.remove();
    } catch (err) { statusLine(err.message); }
  });
  card.form = folded ? el("details", {}, el("summary", {}, "Answer as JSON"), form) : form;
  card.node.append(card.form);
}

function awaitingCard(lane, event) {
  const runId = event.runId || state.runId;
  const node = el("article", { class: "card waiting", "data-awaiting": event.awaitingId, "aria-label": "Waiting for you" });
  const choices = el("div", { class: "choices" });
  const submit = async (params) => {
    try {
      await api("POST", "/api/ap/submit", { runId, awaitingId: event.awaitingId, params });
    } catch (err) { statusLine(err.message); }
  };
  if (event.mode === "approval") {
    const approval = (event.approvals || [])[0] || {};
    node.append(el("header", {}, el("span", {}, `Approve ${approval.toolName || event.toolName || "the call"}?`), el("span", { class: "meta" }, approval.rule || "")));
    node.append(el("pre", {}, JSON.stringify(approval.arguments ?? event.arguments ?? {}, null, 2)));
    for (const option of approval.options || [{ label: "Allow once", decision: "once" }, { label: "Reject", decision: "reject" }]) {
      choices.append(el("button", { type: "button", onclick: () => submit({ decision: option.decision }) }, option.label));
    }
  } else if (event.mode === "status") {
    node.append(el("header", {}, el("span", {}, `${event.toolName}: ${event.status?.message || "waiting"}`)));
    for (const option of event.options || []) {
      choices.append(el("button", { type: "button", title: option.description || "", onclick: () => submit(option.action) }, option.label));
    }
  } else {
    node.append(el("header", {}, el("span", {}, `${event.toolName || "A tool"} waits for you`)));
    const area = el("textarea", { rows: 3, "aria-label": "Answer as JSON" });
    area.value = "{}";
    choices.append(area, el("button", { type: "button", onclick: () => { try { submit(JSON.parse(area.value)); } catch (err) { statusLine(err.message); } } }, "Submit"));
  }
  node.append(choices);
  lane.root.append(node);
}

function planList(lane, plan) {
  if (!lane.plan) {
    lane.plan = el("section", { class: "card plan", "aria-label": "Plan" }, el("header", {}, "Plan"), el("ol"));
    lane.root.append(lane.plan);
  }
  const list = lane.plan.querySelector("ol");
  list.replaceChildren(...plan.map((task) => el("li", { "data-task": task.taskId, "data-status": task.status || "init" }, task.description)));
}

function runEnded(lane, text, event, error = false) {
  const usage = event.usage ? ` — ${event.usage.inputTokens ?? 0} in / ${event.usage.outputTokens ?? 0} out tokens` : "";
  const cost = event.cost ? `, ${event.cost.amount} ${event.cost.currency}` : "";
  lane.root.append(el("div", { class: `done${error ? " notice error" : ""}`, "data-run-end": event.type }, `${text}${usage}${cost}`));
  if (event.output !== undefined) lane.root.append(el("pre", { "aria-label": "Structured output" }, JSON.stringify(event.output, null, 2)));
  setRunning(false);
  sessionStorage.removeItem("agw.run");
  facts(event);
  loadChats();
  callUsage(event);
}

// Each model call's usage, as the chat's stored messages keep it (the stream carries the run's
// totals only): one row per call of the run in the inspector.
async function callUsage(end) {
  if (!state.chatId || !state.runId) return;
  const runId = state.runId;
  try {
    const detail = await api("GET", `/api/ap/chat?chatId=${encodeURIComponent(state.chatId)}&includeRawMessages=true`);
    const usages = (detail.rawMessages || []).filter((m) => m.runId === runId && m._usage).map((m) => m._usage);
    state.calls = usages.map((u) => ({
      input: u.prompt_tokens ?? u.input_tokens ?? 0,
      output: u.completion_tokens ?? u.output_tokens ?? 0,
    }));
    facts(end);
  } catch { /* chat memory off: totals only */ }
}

// ---------------------------------------------------------------------------------------------
// The inspector

function timelineRow(event) {
  const time = event.timestamp ? new Date(event.timestamp).toISOString().slice(11, 23) : "";
  const id = event.toolId || event.contentId || event.reasoningId || event.taskId || event.awaitingId || "";
  $("timeline").append(el("li", {}, `${event.seq ?? ""} ${time} ${event.type} ${id}`));
}

function facts(end) {
  const rows = [["run", state.runId || "—"], ["chat", state.chatId || "—"], ["events", String(state.events.length)]];
  if (end?.usage) {
    rows.push(["tokens", `${end.usage.inputTokens ?? 0} in / ${end.usage.outputTokens ?? 0} out`]);
    for (const model of end.usage.byModel || []) rows.push([`${model.provider}/${model.model}`, `${model.calls} call(s)`]);
  }
  if (end?.cost) rows.push(["cost", `${end.cost.amount} ${end.cost.currency}`]);
  state.calls.forEach((call, i) => rows.push([`call ${i + 1}`, `${call.input} in / ${call.output} out`]));
  if (state.traceId) rows.push(["trace", state.traceId]);
  if (end?.error) rows.push(["error", `${end.error.code}: ${end.error.message}`]);
  $("run-facts").replaceChildren(...rows.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
  $("copy-run").disabled = state.events.length === 0;
}

// ---------------------------------------------------------------------------------------------
// Agents, chats, runs

function setRunning(running) {
  $("interrupt").disabled = !running;
  $("steer").disabled = !running;
  $("compact").disabled = running || !state.chatId;
  statusLine(running ? "Running…" : "");
}

function remember() {
  if (state.runId) sessionStorage.setItem("agw.run", JSON.stringify({ runId: state.runId, chatId: state.chatId, agentKey: state.agent?.key }));
}

function resetTranscript() {
  state.calls = [];
  state.traceId = null;
  $("transcript").replaceChildren();
  $("timeline").replaceChildren();
  transcriptLane = new Lane($("transcript"));
  state.events = [];
  state.lastSeq = 0;
  facts();
}

async function loadAgents() {
  try {
    state.agents = await api("GET", "/api/ap/agents");
  } catch (err) {
    statusLine(`Agents: ${err.message}`);
    return;
  }
  $("agents").replaceChildren(...state.agents.map((agent) => el("li", {},
    el("button", { type: "button", "data-agent": agent.key, onclick: () => selectAgent(agent) },
      agent.name || agent.key, el("small", {}, `${agent.meta?.mode || ""} · ${agent.key}`)))));
  if (!state.agent && state.agents.length) selectAgent(state.agents[0], false);
}

function selectAgent(agent, fresh = true) {
  state.agent = agent;
  for (const button of document.querySelectorAll("[data-agent]")) button.setAttribute("aria-current", String(button.dataset.agent === agent.key));
  const meta = agent.meta || {};
  const parts = [
    el("strong", {}, agent.name || agent.key), ` — ${agent.description || ""}`,
    el("div", {}, `Mode ${meta.mode || "?"} · model ${meta.model || "?"}`),
    meta.tools?.length ? el("div", {}, `Tools: ${meta.tools.join(", ")}`) : null,
    meta.skills?.length ? el("div", {}, `Skills: ${meta.skills.join(", ")}`) : null,
  ];
  $("agent-card").replaceChildren(...parts.filter((part) => part !== null));
  if (fresh) newChat();
}

function newChat() {
  // The run being watched goes on in agw (it can be re-opened from Chats); this page stops reading it.
  if (state.abort) state.abort.abort();
  sessionStorage.removeItem("agw.run");
  state.chatId = null;
  state.runId = null;
  resetTranscript();
  $("compact").disabled = true;
  $("message").focus();
}

async function loadChats() {
  let chats;
  try { chats = await api("GET", "/api/ap/chats"); } catch (err) { $("chats").replaceChildren(el("li", {}, err.message)); return; }
  $("chats").replaceChildren(...chats.map((chat) => el("li", {},
    el("button", { type: "button", "data-chat": chat.chatId, onclick: () => openChat(chat) },
      chat.chatName || chat.chatId, el("small", {}, `${chat.firstAgentName || chat.firstAgentKey || ""} · ${new Date(chat.updatedAt).toLocaleString()}`)))));
}

async function openChat(chat) {
  if (state.abort) state.abort.abort();
  resetTranscript();
  const agent = state.agents.find((a) => a.key === chat.firstAgentKey);
  if (agent) selectAgent(agent, false);
  try {
    const detail = await api("GET", `/api/ap/chat?chatId=${encodeURIComponent(chat.chatId)}`);
    for (const event of detail.events) render(event);
    state.chatId = detail.chatId;
    setRunning(false);
  } catch (err) { statusLine(err.message); }
}

async function stream(request) {
  if (state.abort) state.abort.abort();
  const abort = new AbortController();
  state.abort = abort;
  try {
    const resp = await request(abort.signal);
    await readEvents(resp, render);
  } catch (err) {
    setRunning(false);
    // After setRunning, which clears the status line: the reason stays readable.
    if (err.name !== "AbortError") statusLine(err.message);
  }
}

// The chosen files as references with `data:` URLs: agw checks them and sends them to the model.
async function attachments() {
  const input = $("files");
  const read = (file) => new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve({ id: crypto.randomUUID(), type: "file", name: file.name, mimeType: file.type || "text/plain", sizeBytes: file.size, url: reader.result });
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
  const files = await Promise.all(Array.from(input.files || []).map(read));
  input.value = "";
  return files;
}

async function send(message) {
  const body = { agentKey: state.agent?.key, message };
  if (state.chatId) body.chatId = state.chatId;
  const files = await attachments();
  if (files.length) body.references = files;
  setRunning(true);
  const sent = { ...headers(true), traceparent: traceparent() };
  await stream((signal) => fetch("/api/ap/query", { method: "POST", headers: sent, body: JSON.stringify(body), signal }));
}

async function attach(saved) {
  // The page lost what it showed: the chat's earlier runs from its history, then the running
  // run's events again from its first (the run holds them).
  resetTranscript();
  if (saved.chatId) {
    try {
      const detail = await api("GET", `/api/ap/chat?chatId=${encodeURIComponent(saved.chatId)}`);
      const events = detail.events || [];
      // The running run's part of the history (what it flushed so far) comes from the run.
      const start = events.findIndex((e) => e.type === "run.start" && e.runId === saved.runId);
      const cut = start < 0 ? events.length : events.slice(0, start).map((e) => e.type).lastIndexOf("request.query");
      for (const event of events.slice(0, cut < 0 ? start : cut)) render(event);
    } catch { /* a new chat has no history yet */ }
  }
  state.chatId = saved.chatId;
  state.runId = saved.runId;
  setRunning(true);
  $("transcript").dataset.attached = saved.runId;
  statusLine("Re-attached to the running run");
  const url = `/api/ap/attach?runId=${encodeURIComponent(saved.runId)}&lastSeq=0`;
  await stream((signal) => fetch(url, { headers: headers(false), signal }));
}

// ---------------------------------------------------------------------------------------------
// Wiring

function wire() {
  $("login").addEventListener("submit", (e) => {
    e.preventDefault();
    const token = $("token").value.trim();
    if (token) sessionStorage.setItem("agw.token", token); else sessionStorage.removeItem("agw.token");
    $("token").value = "";
    statusLine(token ? "Token kept for this tab" : "No token");
    loadAgents();
    loadChats();
  });
  $("logout").addEventListener("click", () => { sessionStorage.removeItem("agw.token"); statusLine("Token forgotten"); });
  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    const message = $("message").value.trim();
    if (!message || !state.agent) return;
    $("message").value = "";
    send(message);
  });
  $("message").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) $("composer").requestSubmit();
  });
  $("steer").addEventListener("click", async () => {
    const message = $("message").value.trim();
    if (!message || !state.runId) return;
    try {
      const queued = await api("POST", "/api/ap/steer", { runId: state.runId, message });
      $("message").value = "";
      // Taken at the run's next model turn (shown then as "You (steer)"); a run that ends first never takes it.
      statusLine(queued.detail || "Steer queued");
    } catch (err) { statusLine(err.message); }
  });
  $("interrupt").addEventListener("click", async () => {
    if (!state.runId) return;
    try { await api("POST", "/api/ap/interrupt", { runId: state.runId }); } catch (err) { statusLine(err.message); }
  });
  $("new-chat").addEventListener("click", newChat);
  $("compact").addEventListener("click", async () => {
    if (!state.chatId) return;
    try {
      const done = await api("POST", "/api/ap/compact", { chatId: state.chatId, agentKey: state.agent?.key });
      statusLine(done.compacted ? `Compacted: ${done.tokensBefore} → ${done.tokensAfter} tokens` : done.detail || "Nothing to compact");
    } catch (err) { statusLine(err.message); }
  });
  $("refresh-chats").addEventListener("click", loadChats);
  $("copy-run").addEventListener("click", async () => {
    const text = JSON.stringify(state.events, null, 2);
    try { await navigator.clipboard.writeText(text); statusLine("Copied"); } catch {
      const link = el("a", { href: URL.createObjectURL(new Blob([text], { type: "application/json" })), download: `run-${state.runId}.json` }, "download");
      link.click();
    }
  });
}

async function start() {
  transcriptLane = new Lane($("transcript"));
  wire();
  await loadAgents();
  loadChats();
  const saved = JSON.parse(sessionStorage.getItem("agw.run") || "null");
  if (saved?.runId) {
    const agent = state.agents.find((a) => a.key === saved.agentKey);
    if (agent) selectAgent(agent, false);
    attach(saved);
  }
}

start();
