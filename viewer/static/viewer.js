// The viewer's only script: live counts on a run page, labels and evidence jumps on a shard page.
// It writes text only (textContent), never markup, so nothing it receives can run as code.
"use strict";

function pollRun(section) {
  const run = section.dataset.run;
  let finished = false;
  const tick = async () => {
    try {
      const res = await fetch(`/api/runs/${encodeURIComponent(run)}`, { cache: "no-store" });
      if (res.ok) {
        const doc = await res.json();
        for (const [name, n] of Object.entries(doc.live.groups)) {
          const el = section.querySelector(`[data-group="${name}"]`);
          if (el) el.textContent = String(n);
        }
        const set = (key, text) => { const el = section.querySelector(`[data-live="${key}"]`); if (el) el.textContent = text; };
        set("total", String(doc.live.total));
        set("source", doc.live.source_words);
        set("spend", spendText(doc.live));
        set("eta", doc.live.eta_s === null ? "-" : `${Math.round(doc.live.eta_s)} s`);
        showLimits(doc.live.limits || {});
        const verdict = document.getElementById("verdict-value");
        if (verdict) {
          const word = doc.verdict || (doc.running ? "running" : doc.stalled ? "STALLED" : doc.ended || (doc.lost_by ? "not going on" : "not done"));
          verdict.textContent = word;
          verdict.className = `verdict ${doc.verdict || (doc.running ? "RUNNING" : doc.stalled ? "WARN" : "ENDED")}`;
        }
        section.dataset.updated = String(Date.now());
        // A reduced or ended run without a broker no longer changes.
        finished = Boolean(doc.verdict || doc.ended) && !doc.running && doc.live.source !== "broker";
      }
    } catch (e) { /* the next tick tries again */ }
    if (!finished) setTimeout(tick, 1000);
  };
  setTimeout(tick, 1000);
}

// An unpriced model's cost is unknown, never $0 (as status says).
function spendText(live) {
  if (live.spend_usd === null) return live.spend_unknown ? "unknown" : "-";
  return `$${live.spend_usd.toFixed(4)}${live.spend_unknown ? " + unknown" : ""}`;
}

// A model name as text nodes with a <wbr> after each / - _ . (as the pages' `name` filter).
function nameWithBreaks(el, name) {
  const parts = name.split(/(?<=[/_.-])/);
  parts.forEach((part, i) => {
    el.appendChild(document.createTextNode(part));
    if (i < parts.length - 1) el.appendChild(document.createElement("wbr"));
  });
}

function showLimits(limits) {
  const body = document.getElementById("limits");
  if (!body) return;
  const rows = Object.entries(limits).map(([model, l]) => {
    const tr = document.createElement("tr");
    const cells = [model, String(l.in_flight), String(l.rate_limited), `${l.cooldown_s} s`, `${Math.round(l.pace * 100)}%`];
    cells.forEach((text, i) => {
      const td = document.createElement("td");
      if (i === 0) {
        td.className = "name";
        nameWithBreaks(td, text);
      } else td.textContent = text;
      tr.appendChild(td);
    });
    return tr;
  });
  body.replaceChildren(...rows);
  document.getElementById("limits-box").hidden = rows.length === 0;
}

function agreementText(items) {
  return items.filter((a) => a.scope === "all").map((a) => {
    const raw = a.raw === null ? "-" : `${(a.raw * 100).toFixed(1)}%`;
    const kappa = a.kappa === null ? `kappa undefined (${a.kappa_note})` : `kappa ${a.kappa.toFixed(2)}`;
    const verdicts = a.n === 1 ? "verdict" : "verdicts";
    const agree = a.agreed === 1 ? "agrees" : "agree";
    return `${a.judge}: agreement ${raw} (${a.agreed} of ${a.n} labelled ${verdicts} ${agree}), ${kappa}`;
  }).join("; ");
}

function setupLabels(section) {
  const run = section.dataset.run;
  const shard = section.dataset.shard;
  const out = document.getElementById("agreement-live");
  section.addEventListener("click", async (event) => {
    const button = event.target.closest("button.label");
    if (!button) return;
    const box = button.closest(".label-controls");
    const note = box.querySelector("input.note").value;
    const state = box.querySelector(".label-state");
    const body = { shard_id: shard, assertion: Number(button.dataset.n), judge: button.dataset.judge,
      agree: button.dataset.agree === "1", note };
    const res = await fetch(`/api/runs/${encodeURIComponent(run)}/labels`, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    const doc = await res.json();
    if (!res.ok) { state.textContent = ` not saved: ${doc.error}`; return; }
    box.querySelectorAll("button.label").forEach((b) => b.classList.toggle("chosen", b === button));
    state.textContent = body.agree ? " saved: agree" : " saved: disagree";
    if (out) out.textContent = agreementText(doc.agreement.items);
  });
}

function setupJumps() {
  document.addEventListener("click", (event) => {
    const link = event.target.closest("a.jump");
    if (!link) return;
    event.preventDefault();
    const n = link.dataset.n;
    const marks = [...document.querySelectorAll("mark.ev")].filter((m) => m.dataset.a.split(" ").includes(n));
    document.querySelectorAll("mark.ev.focus").forEach((m) => m.classList.remove("focus"));
    if (!marks.length) { link.textContent = "quote not found in the trajectory"; return; }
    marks.forEach((m) => m.classList.add("focus"));
    const details = marks[0].closest("details");
    if (details) details.open = true;
    marks[0].scrollIntoView({ block: "center" });
  });
}

document.addEventListener("DOMContentLoaded", () => {
  const live = document.getElementById("live");
  if (live) pollRun(live);
  const assertions = document.getElementById("assertions");
  if (assertions) setupLabels(assertions);
  setupJumps();
});
