// The spinfc playground: builds a /v1/score request from the form, sends it with /v1/plan, and draws the answers.
// Plain JavaScript, no dependencies; served from the package (spinfc/server/playground).
"use strict";

const EXAMPLE = [
  {id: "refund", template: "\n\nIs the customer asking for a refund?\nAnswer:<?>", options: [" yes", " no"]},
  {id: "product", template: "\n\nQ: Which product is the message about?\nA: \"<*>\"", beam_width: 3},
];
const $ = (id) => document.getElementById(id);
const el = (tag, attrs = {}, ...children) => {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  for (const c of children) node.append(c);
  return node;
};
const fmt = (x) => (x === null || x === undefined ? "-" : Number(x).toFixed(3));
const pct = (x) => `${Math.max(0, Math.min(1, Number(x))) * 100}%`;

function headers() {
  const h = {"Content-Type": "application/json"};
  const token = $("token").value.trim();
  if (token) h.Authorization = `Bearer ${token}`;
  return h;
}

async function api(path, body) {
  const response = await fetch(path, body === undefined ? {headers: headers()}
    : {method: "POST", headers: headers(), body: JSON.stringify(body)});
  const data = await response.json().catch(() => ({error: {message: `HTTP ${response.status}`}}));
  if (!response.ok) throw new Error(data.error ? `${data.error.code || response.status}: ${data.error.message}`
    + (data.error.param ? ` (at ${data.error.param})` : "") : `HTTP ${response.status}`);
  return data;
}

function request() {
  const text = $("queries").value.trim();
  let queries = [];
  if (text) {
    try { queries = JSON.parse(text); } catch (e) { throw new Error(`your questions are not valid JSON: ${e.message}`); }
  }
  const body = {messages: [{role: "user", content: $("content").value}]};
  if (queries.length) body.scoring = {queries};
  const packs = [...document.querySelectorAll("#packs input")].filter((box) => selected.has(box.value))
    .map((box) => ({id: box.value}));
  if (packs.length) body.packs = packs;
  return body;
}

function bar(name, value, floor, kind, detail) {
  const track = el("div", {class: "track"}, el("div", {class: `bar ${kind}`, style: `width:${pct(value)}`}));
  if (floor !== null && floor !== undefined) {
    track.append(el("div", {class: "floor", style: `left:${pct(floor)}`, title: `floor_p ${fmt(floor)}`}));
  }
  const row = el("div", {class: "row", "data-kind": kind, "data-name": name, "data-value": String(value)},
    el("span", {class: "name", title: name}, name), track, el("span", {class: "num"}, detail));
  if (floor !== null && floor !== undefined) row.setAttribute("data-floor", String(floor));
  return row;
}

function drawResult(result, into) {
  for (const combo of result.combinations) {
    const values = Object.entries(combo.values || {}).map(([k, v]) => `${k}=${v}`).join(", ");
    const card = el("div", {class: "card", "data-query": result.id},
      el("h3", {}, result.id + (values ? ` [${values}]` : "")));
    for (const o of combo.options || []) {
      card.append(bar(JSON.stringify(o.text), o.p, o.floor_p, "option", `${fmt(o.p)} (floor ${fmt(o.floor_p)})`));
    }
    if (combo.residual !== undefined && combo.residual !== null) {
      card.append(el("div", {class: "muted residual", "data-residual": String(combo.residual)},
        `residual ${fmt(combo.residual)} (probability on none of the options)`));
    }
    for (const a of combo.answers || []) {
      card.append(bar(JSON.stringify(a.text), a.p, a.floor_p, "answer", `${fmt(a.p)} (floor ${fmt(a.floor_p)})`));
    }
    if (combo.text !== undefined && combo.text !== null) card.append(el("pre", {class: "generated"}, combo.text));
    into.append(card);
  }
}

function drawPack(pack, into) {
  const card = el("div", {class: "card pack", "data-pack": pack.id},
    el("h3", {}, `${pack.id} ${pack.version}`));
  if (pack.decision !== null && pack.decision !== undefined) {
    card.append(el("div", {class: "decision", "data-decision": pack.decision}, `decision: ${pack.decision}`),
      el("div", {class: "muted"}, pack.reason));
  }
  if (pack.presentation === "ignored") {
    card.append(el("div", {class: "muted", "data-presentation": "ignored"}, "the pack's presentation was not applied: "
      + "the request has questions of its own, so the content was read as sent (untick your questions' JSON to "
      + "score the pack as it was written)"));
  }
  for (const [category, score] of Object.entries(pack.categories)) {
    card.append(bar(category, score, null, "category", fmt(score)));
  }
  const answers = el("details", {}, el("summary", {}, `its ${pack.results.length} questions`));
  for (const result of pack.results) drawResult(result, answers);
  card.append(answers);
  into.append(card);
}

function drawPlan(plan, response) {
  const rows = [["passes", plan.passes], ["questions", plan.questions], ["tokens read", plan.tokens],
    ["one sequence per question", plan.one_sequence_per_question_tokens],
    ["dedupe saving", plan.saving === null ? "-" : `${plan.saving.toFixed(2)}x fewer tokens`],
    ["input tokens (this call)", response.usage.input_tokens], ["system_fingerprint", response.system_fingerprint]];
  const table = el("table", {class: "plan"});
  for (const [k, v] of rows) table.append(el("tr", {"data-plan": k}, el("td", {}, k), el("td", {}, String(v))));
  $("plan").replaceChildren(el("div", {class: "card"}, el("h3", {}, "Plan"), table));
}

async function score() {
  $("status").textContent = "scoring...";
  $("status").className = "muted";
  try {
    const body = request();
    showSnippet(body);
    const [response, plan] = await Promise.all([api("/v1/score", body), api("/v1/plan", body)]);
    drawPlan(plan, response);
    const results = el("div");
    for (const result of response.results || []) drawResult(result, results);
    $("results").replaceChildren(results);
    const packs = el("div");
    for (const pack of response.packs || []) drawPack(pack, packs);
    $("pack-results").replaceChildren(packs);
    $("status").textContent = `scored: ${response.usage.questions} questions`;
    document.body.setAttribute("data-scored", "yes");
  } catch (error) {
    $("status").textContent = error.message;
    $("status").className = "error";
  }
}

function curl(body) {
  const auth = $("token").value.trim() ? " \\\n  -H 'Authorization: Bearer $SPINFC_TOKEN'" : "";
  const json = JSON.stringify(body, null, 1).replace(/'/g, "'\\''");
  return `curl -s ${location.origin}/v1/score -H 'Content-Type: application/json'${auth} \\\n  -d '${json}'`;
}

function python(body) {
  const auth = $("token").value.trim() ? ', headers={"Authorization": "Bearer " + os.environ["SPINFC_TOKEN"]}' : "";
  const json = JSON.stringify(JSON.stringify(body));
  return `import json, os\nimport httpx\n\nbody = json.loads(${json})\n`
    + `response = httpx.post("${location.origin}/v1/score", json=body${auth}, timeout=60)\nprint(response.json())\n`;
}

function showSnippet(body, kind) {
  const text = kind === "python" ? python(body) : curl(body);
  $("snippet").textContent = text;
  return text;
}

async function copy(kind) {
  try {
    const text = showSnippet(request(), kind);
    $("snippet-box").open = true;
    await navigator.clipboard.writeText(text);
    $("status").textContent = `copied the request as ${kind}`;
  } catch (error) {
    $("status").textContent = `shown below (the clipboard refused: ${error.message})`;
  }
}

let loads = 0;  // only the latest load draws the list (a token typed while an earlier load is in flight)
const selected = new Set();  // the packs ticked, kept across reloads of the list

async function loadPacks() {
  const mine = ++loads;
  try {
    const [packs, models] = await Promise.all([api("/v1/packs"), api("/v1/models")]);
    if (mine !== loads) return;
    $("model").textContent = models.data.map((m) => m.id).join(", ");
    const box = $("packs");
    box.replaceChildren(el("legend", {}, "Packs"));
    for (const pack of packs.data) {
      const input = el("input", {type: "checkbox", value: pack.id});
      input.checked = selected.has(pack.id);
      box.append(el("label", {title: pack.description}, input, ` ${pack.id}`));
    }
    box.setAttribute("data-loaded", "yes");
  } catch (error) {
    if (mine !== loads) return;
    $("packs").replaceChildren(el("legend", {}, "Packs"), el("span", {class: "error"}, error.message));
  }
}

$("queries").value = JSON.stringify(EXAMPLE, null, 1);
$("token").value = sessionStorage.getItem("spinfc-token") || "";
$("token").addEventListener("change", () => { sessionStorage.setItem("spinfc-token", $("token").value); loadPacks(); });
$("packs").addEventListener("change", (event) => {
  if (event.target.type === "checkbox") event.target.checked ? selected.add(event.target.value) : selected.delete(event.target.value);
});
$("score").addEventListener("click", score);
$("copy-curl").addEventListener("click", () => copy("curl"));
$("copy-python").addEventListener("click", () => copy("python"));
loadPacks();
