/* mst report: draws the embedded summary and matrix; loads a trial's evidence from its chunk
   file on demand (docs/report.md). Hand-written, no framework, no network. */
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("mst-data").textContent);
  const S = D.summary, M = D.matrix;
  const ROW_H = 24;
  const chunks = {}, pending = {};
  const $ = (sel, root) => (root || document).querySelector(sel);

  function esc(v) {
    return String(v).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
  }
  function num(v) { return typeof v === "number" && isFinite(v); }
  function pct(v) { return num(v) ? (100 * v).toFixed(1) + "%" : "—"; }
  function fix(v, d) { return num(v) ? v.toFixed(d === undefined ? 3 : d) : "—"; }
  function pval(v) { return num(v) ? (v < 0.001 ? v.toExponential(1) : v.toFixed(3)) : "—"; }
  function money(v) { return num(v) ? "$" + v.toFixed(4) : "—"; }
  function dv(v) { return v === null || v === undefined ? "" : ' data-value="' + esc(JSON.stringify(v)) + '"'; }
  function td(text, value, cls) { return "<td" + (cls ? ' class="' + cls + '"' : "") + dv(value) + ">" + text + "</td>"; }
  function interval(est, lo, hi, fmt) {
    fmt = fmt || pct;
    return num(lo) && num(hi) ? fmt(est) + " [" + fmt(lo) + ", " + fmt(hi) + "]" : fmt(est);
  }
  function json(v) { return typeof v === "string" ? v : JSON.stringify(v, null, 2); }
  function baseline() { return S.variants.find((v) => v.baseline) || null; }

  /* A forest plot: one row per estimate with its interval, on a shared axis. */
  function forest(name, rows, lo, hi, zero) {
    const W = 720, L = 170, R = 150, H = 28 * rows.length + 34;
    const vals = rows.flatMap((r) => [r.est, r.lo, r.hi]).filter(num);
    if (lo === null) lo = Math.min(0, ...vals);
    if (hi === null) hi = Math.max(0, ...vals);
    if (!(hi > lo)) { hi = lo + 1; }
    const x = (v) => L + ((v - lo) / (hi - lo)) * (W - L - R);
    let s = '<svg class="chart" data-chart="' + esc(name) + '" width="' + W + '" height="' + H + '" viewBox="0 0 ' + W + " " + H + '">';
    for (let i = 0; i <= 4; i++) {
      const v = lo + ((hi - lo) * i) / 4, px = x(v);
      s += '<line class="grid" x1="' + px + '" x2="' + px + '" y1="6" y2="' + (H - 22) + '"/>';
      s += '<text x="' + px + '" y="' + (H - 8) + '" text-anchor="middle">' + (hi - lo <= 1.0001 && lo >= -1 ? pct(v) : fix(v, 2)) + "</text>";
    }
    if (zero !== undefined && zero >= lo && zero <= hi) s += '<line class="zero" x1="' + x(zero) + '" x2="' + x(zero) + '" y1="6" y2="' + (H - 22) + '"/>';
    rows.forEach((r, i) => {
      const y = 20 + 28 * i;
      s += '<g class="row' + (r.worse ? " worse-row" : "") + '" data-label="' + esc(r.label) + '"' + dv(r.est) + ">";
      s += '<text x="6" y="' + (y + 4) + '">' + esc(r.label) + "</text>";
      if (num(r.lo) && num(r.hi)) s += '<line class="ci" x1="' + x(r.lo) + '" x2="' + x(r.hi) + '" y1="' + y + '" y2="' + y + '"/>';
      if (num(r.est)) s += '<circle class="est" cx="' + x(r.est) + '" cy="' + y + '" r="5"/>';
      s += '<text x="' + (W - R + 8) + '" y="' + (y + 4) + '">' + esc(r.text) + "</text></g>";
    });
    return s + '<line class="axis" x1="' + L + '" x2="' + (W - R) + '" y1="' + (H - 22) + '" y2="' + (H - 22) + '"/></svg>';
  }

  function header() {
    const t = S.totals, ph = S.phases || {};
    return "<h1>" + esc(S.eval) + '</h1><div class="meta"><span>run <b>' + esc(S.run) + "</b></span>" +
      (S.regradeOf ? "<span>regrade of " + esc(S.regradeOf) + "</span>" : "") +
      "<span>collect " + esc(ph.collect) + ", grade " + esc(ph.grade) + "</span>" +
      "<span>" + pct(S.confidence || 0.95) + " intervals, equal weight per case</span></div>" +
      '<table id="totals"><tr><th>attempts</th><th>trials</th><th>cases</th><th>incomplete cases</th><th>infrastructure failures</th></tr><tr>' +
      td(t.attempts, t.attempts) + td(t.trials, t.trials) + td(t.cases, t.cases) + td(t.incompleteCases, t.incompleteCases) +
      td(t.infrastructureFailures, t.infrastructureFailures) + "</tr></table>";
  }

  function atK(map) {
    const ks = Object.keys(map || {}).sort((a, b) => a - b);
    return ks.length ? ks.map((k) => k + ": " + pct(map[k])).join(", ") : "—";
  }

  function variants() {
    let s = '<h2>Variants</h2><table id="variants"><tr><th class="l">variant</th><th class="l">client / model</th><th>pass rate</th>' +
      "<th>pass@k</th><th>pass^k</th><th>cases ✓/✗/…</th><th>trials</th><th>ungraded</th><th>infra</th><th>mean duration</th><th class=\"l\">usage</th></tr>";
    for (const v of S.variants) {
      const r = v.passRate || {}, c = v.cases || {}, tr = v.trials || {}, inf = v.infrastructure || {};
      const pk = v.passAtK || {}, hk = v.passHatK || {};
      s += '<tr data-variant="' + esc(v.id) + '"><td class="l">' + esc(v.id) + (v.baseline ? " <i>(baseline)</i>" : "") + "</td>" +
        '<td class="l">' + esc(v.client) + " / " + esc(v.model === null ? "—" : v.model) + "</td>" +
        td(interval(r.estimate, r.low, r.high), r.estimate, "passRate") +
        td(atK(pk), null, "passAtK") + td(atK(hk), null, "passHatK") +
        td(c.passed + "/" + c.failed + "/" + c.incomplete, [c.passed, c.failed, c.incomplete], "cases") +
        td(tr.total, tr.total, "trials") + td(tr.ungraded, tr.ungraded) + td(inf.total, inf.total, "infra") +
        td(num(v.meanDurationMs) ? fix(v.meanDurationMs / 1000, 2) + " s" : "—", v.meanDurationMs) +
        '<td class="l">' + esc(Object.entries(v.usage || {}).map(([k, n]) => k + " " + n).join(", ") || "—") + "</td></tr>";
    }
    s += "</table><h3>Trial pass rate by variant</h3>";
    return s + forest("passRate", S.variants.map((v) => {
      const r = v.passRate || {};
      return { label: v.id, est: r.estimate, lo: r.low, hi: r.high, text: interval(r.estimate, r.low, r.high) };
    }), 0, 1);
  }

  function metricName(ref) { return ref === "passRate" ? "pass rate" : ref; }

  function comparisons() {
    const cands = S.variants.filter((v) => v.comparison);
    if (!cands.length) return "";
    const base = baseline();
    let s = "<h2>Candidate against baseline" + (base ? " (" + esc(base.id) + ")" : "") + "</h2>";
    for (const v of cands) {
      const c = v.comparison, refs = Object.keys(c.metrics).sort((a, b) => (b === "passRate") - (a === "passRate") || (a < b ? -1 : 1));
      s += "<h3>" + esc(v.id) + ": " + c.cases + " paired cases (left out: " + c.excluded.incomplete + " incomplete, " +
        c.excluded.unpaired + " unpaired)</h3>";
      s += '<table class="comparison" data-variant="' + esc(v.id) + '"><tr><th class="l">metric</th><th>candidate</th><th>baseline</th>' +
        "<th>difference</th><th>interval</th><th>p</th><th>cases</th><th>decision</th><th>MDE</th></tr>";
      for (const ref of refs) {
        const m = c.metrics[ref], f = ref === "passRate" ? pct : fix;
        s += '<tr data-metric="' + esc(ref) + '"><td class="l">' + esc(metricName(ref)) + (m.decision === "worse" ? " ⚠ regression" : "") + "</td>" +
          td(f(m.candidate), m.candidate) + td(f(m.baseline), m.baseline) + td(f(m.difference), m.difference, "difference") +
          td(num(m.low) ? "[" + f(m.low) + ", " + f(m.high) + "]" : "—", [m.low, m.high]) + td(pval(m.p), m.p, "p") + td(m.cases, m.cases) +
          td('<span class="badge ' + esc(m.decision) + '">' + esc(m.decision) + "</span>" + (m.reason ? ' <span class="muted">' + esc(m.reason) + "</span>" : ""), m.decision, "decision") +
          td(f(m.mde), m.mde) + "</tr>";
      }
      s += "</table>";
    }
    /* Differences of one metric share an axis; grader metrics have their own scales (their charts are below). */
    s += "<h3>Pass-rate difference (candidate − baseline)</h3>";
    return s + forest("diff-passRate", cands.map((v) => {
      const m = v.comparison.metrics.passRate || {};
      return { label: v.id, est: m.difference, lo: m.low, hi: m.high, worse: m.decision === "worse",
        text: pct(m.difference) + " p=" + pval(m.p) };
    }), null, null, 0);
  }

  function pairwise() {
    const rows = S.variants.filter((v) => v.pairwise);
    if (!rows.length) return "";
    let s = '<h2>Pairwise against the baseline</h2><table id="pairwise"><tr><th class="l">variant</th><th>wins</th><th>ties</th><th>losses</th>' +
      "<th>not compared</th><th>left out (incomplete)</th><th>win rate</th><th>p (sign test)</th><th>flip rate</th></tr>";
    for (const v of rows) {
      const p = v.pairwise, w = p.winRate || {}, fl = p.flips || {};
      s += '<tr data-variant="' + esc(v.id) + '"><td class="l">' + esc(v.id) + "</td>" + td(p.wins, p.wins, "wins") + td(p.ties, p.ties, "ties") +
        td(p.losses, p.losses, "losses") + td(p.notCompared === undefined ? "—" : p.notCompared, p.notCompared) +
        td(p.excludedIncomplete === undefined ? "—" : p.excludedIncomplete, p.excludedIncomplete) +
        td(interval(w.estimate, w.low, w.high), w.estimate, "winRate") + td(pval(p.p), p.p) +
        td(pct(fl.rate) + (num(fl.pairs) ? " (" + fl.flips + "/" + fl.pairs + " pairs)" : ""), fl.rate, "flips") + "</tr>";
    }
    return s + "</table>" + forest("winRate", rows.map((v) => {
      const w = v.pairwise.winRate || {};
      return { label: v.id, est: w.estimate, lo: w.low, hi: w.high, text: interval(w.estimate, w.low, w.high) };
    }), 0, 1, 0.5);
  }

  function graders() {
    const ids = [...new Set(S.variants.flatMap((v) => Object.keys(v.graders || {})))].sort();
    if (!ids.length) return "";
    let s = '<h2>Grader metrics</h2><table id="graders"><tr><th class="l">grader</th>' +
      S.variants.map((v) => "<th>" + esc(v.id) + "</th>").join("") + "</tr>";
    for (const id of ids) {
      s += '<tr data-grader="' + esc(id) + '"><td class="l">' + esc(id) + "</td>";
      for (const v of S.variants) {
        const g = (v.graders || {})[id];
        s += g ? td(interval(g.mean, g.low, g.high, fix) + ' <span class="muted">n=' + g.n + "</span>", g.mean) : td("—");
      }
      s += "</tr>";
    }
    s += "</table>";
    for (const id of ids) {
      s += "<h3>" + esc(id) + "</h3>" + forest("grader-" + id, S.variants.filter((v) => (v.graders || {})[id]).map((v) => {
        const g = v.graders[id];
        return { label: v.id, est: g.mean, lo: g.low, hi: g.high, text: interval(g.mean, g.low, g.high, fix) };
      }), null, null);
    }
    return s;
  }

  function judges() {
    const withJudges = S.variants.filter((v) => v.judges && Object.keys(v.judges).length);
    const u = S.judgeUsage;
    if (!withJudges.length && !u) return "";
    let s = "<h2>Judges</h2>";
    if (u) {
      s += '<table id="judge-usage"><tr><th>input tokens</th><th>output tokens</th><th>cost</th></tr><tr>' +
        td(u.inputTokens, u.inputTokens) + td(u.outputTokens, u.outputTokens) + td(money(u.costUsd), u.costUsd) + "</tr></table>";
    }
    if (!withJudges.length) return s;
    s += '<table id="judges"><tr><th class="l">variant</th><th class="l">judge</th><th>passed / graded</th><th>pass rate</th>' +
      "<th>input tokens</th><th>output tokens</th><th>cost</th></tr>";
    for (const v of withJudges) {
      for (const [id, j] of Object.entries(v.judges)) {
        const iv = j.interval || [];
        s += '<tr data-variant="' + esc(v.id) + '" data-judge="' + esc(id) + '"><td class="l">' + esc(v.id) + '</td><td class="l">' + esc(id) + "</td>" +
          td(j.passed + " / " + j.graded, [j.passed, j.graded]) + td(interval(j.passRate, iv[0], iv[1]), j.passRate, "passRate") +
          td(j.inputTokens === undefined ? "—" : j.inputTokens, j.inputTokens) + td(j.outputTokens === undefined ? "—" : j.outputTokens, j.outputTokens) +
          td(money(j.costUsd), j.costUsd) + "</tr>";
      }
    }
    return s + "</table>";
  }

  function infrastructure() {
    let s = '<h2>Infrastructure failures and what needs a fix</h2><table id="infra"><tr><th class="l">variant</th><th>total</th><th>retryable</th><th class="l">by what</th></tr>';
    for (const v of S.variants) {
      const inf = v.infrastructure || {};
      s += '<tr data-variant="' + esc(v.id) + '"><td class="l">' + esc(v.id) + "</td>" + td(inf.total, inf.total) + td(inf.retryable, inf.retryable) +
        '<td class="l">' + (Object.entries(inf.byWhat || {}).map(([w, n]) => esc(w) + ": " + n).join(", ") || "—") + "</td></tr>";
    }
    s += "</table>";
    const fixes = S.variants.flatMap((v) => (v.needsFix || []).map((f) => [v.id, f]));
    if (!fixes.length) return s + '<p class="muted" id="needs-fix">Nothing needs a fix.</p>';
    const shown = fixes.slice(0, 500);
    s += '<table id="needs-fix"><tr><th class="l">variant</th><th class="l">case</th><th>trial</th><th class="l">what</th><th class="l">why</th></tr>';
    for (const [vid, f] of shown) {
      s += '<tr><td class="l">' + esc(vid) + '</td><td class="l"><a href="#" data-open="' + esc(vid) + '" data-case="' + esc(f.case) + '">' + esc(f.case) + "</a></td>" +
        td(f.trial, f.trial) + '<td class="l">' + esc(f.what) + '</td><td class="l">' + esc(f.why) + "</td></tr>";
    }
    s += "</table>";
    if (fixes.length > shown.length) s += '<p class="cut">… ' + (fixes.length - shown.length) + " more in summary.json (needsFix)</p>";
    return s;
  }

  /* The case × variant matrix: only the rows in view are in the DOM. */
  const grid = { order: [], sortKey: "case", desc: false, cols: [] };
  const base = baseline();
  const cands = S.variants.filter((v) => !v.baseline).map((v) => v.id);

  function delta(vid, i) {
    if (!base) return null;
    const a = M.rate[vid][i], b = M.rate[base.id][i];
    const sa = M.status[vid][i], sb = M.status[base.id][i];
    return num(a) && num(b) && sa !== "i" && sb !== "i" ? a - b : null;
  }
  function differs(i) {
    if (!base) return false;
    const sb = M.status[base.id][i], rb = M.rate[base.id][i];
    return cands.some((v) => M.status[v][i] !== sb || M.rate[v][i] !== rb);
  }

  function matrixSection() {
    grid.cols = [{ key: "case", label: "case", w: "minmax(180px, 2fr)" }, { key: "trials", label: "trials", w: "60px" }]
      .concat(M.variants.map((v) => ({ key: "v:" + v, label: v + (base && v === base.id ? " (baseline)" : ""), w: "minmax(90px, 1fr)" })))
      .concat(base ? cands.map((v) => ({ key: "d:" + v, label: "Δ " + v, w: "minmax(80px, 1fr)" })) : []);
    const tmpl = grid.cols.map((c) => c.w).join(" ");
    return '<h2>Cases</h2><div class="controls"><input type="search" id="filter" placeholder="filter case ids">' +
      '<label>show <select id="show"><option value="all">all cases</option>' +
      (base ? '<option value="differs">differ from the baseline</option>' : "") +
      '<option value="failed">any failed</option><option value="incomplete">any incomplete</option><option value="passed">all passed</option></select></label>' +
      '<span id="grid-count" class="muted"></span><span class="muted">click a cell for its trials:</span><span class="badge st-p">passed</span><span class="badge st-f">failed</span>' +
      '<span class="badge st-i">incomplete</span></div>' +
      '<div id="grid-head" style="grid-template-columns:' + tmpl + '">' +
      grid.cols.map((c) => '<div data-sort="' + esc(c.key) + '">' + esc(c.label) + "</div>").join("") + "</div>" +
      '<div id="grid" data-template="' + esc(tmpl) + '"><div id="grid-space"></div></div>';
  }

  function sortValue(key, i) {
    if (key === "case") return M.cases[i];
    if (key === "trials") return M.trials[i];
    if (key.startsWith("v:")) {
      const v = key.slice(2), st = M.status[v][i];
      return st === "i" || st === "-" ? -1 : (M.rate[v][i] === null ? -1 : M.rate[v][i]);
    }
    const d = delta(key.slice(2), i);
    return d === null ? -Infinity : d;
  }

  function refilter() {
    const q = $("#filter").value.trim().toLowerCase(), show = $("#show").value;
    const vs = M.variants, out = [];
    for (let i = 0; i < M.cases.length; i++) {
      if (q && M.cases[i].toLowerCase().indexOf(q) < 0) continue;
      if (show === "differs" && !differs(i)) continue;
      if (show === "failed" && !vs.some((v) => M.status[v][i] === "f")) continue;
      if (show === "incomplete" && !vs.some((v) => M.status[v][i] === "i")) continue;
      if (show === "passed" && !vs.every((v) => M.status[v][i] === "p")) continue;
      out.push(i);
    }
    const key = grid.sortKey, sign = grid.desc ? -1 : 1;
    if (key !== "case" || grid.desc) {
      const vals = new Map(out.map((i) => [i, sortValue(key, i)]));
      out.sort((a, b) => { const x = vals.get(a), y = vals.get(b); return (x < y ? -1 : x > y ? 1 : 0) * sign || a - b; });
    }
    grid.order = out;
    $("#grid-count").textContent = out.length + " of " + M.cases.length + " cases";
    $("#grid-space").style.height = out.length * ROW_H + "px";
    document.querySelectorAll("#grid-head > div").forEach((el) => {
      el.classList.toggle("sorted", el.dataset.sort === key);
      el.classList.toggle("desc", el.dataset.sort === key && grid.desc);
    });
    $("#grid").scrollTop = 0;  // a new order starts at its top
    draw(true);
  }

  function rowHtml(i, pos) {
    let s = '<div class="grow" data-case="' + esc(M.cases[i]) + '" style="top:' + pos * ROW_H + "px;grid-template-columns:" + $("#grid").dataset.template + '">' +
      '<div title="' + esc(M.cases[i]) + '">' + esc(M.cases[i]) + "</div><div>" + M.trials[i] + "</div>";
    for (const v of M.variants) {
      const st = M.status[v][i];
      s += '<div class="cell st-' + st + '" data-variant="' + esc(v) + '" data-index="' + i + '" data-status="' + st + '">' +
        (st === "-" ? "—" : M.passed[v][i] + "/" + M.graded[v][i]) + "</div>";
    }
    if (base) {
      for (const v of cands) {
        const d = delta(v, i);
        s += '<div class="' + (d < 0 ? "delta-neg" : d > 0 ? "delta-pos" : "") + '">' + (d === null ? "—" : (d > 0 ? "+" : "") + pct(d)) + "</div>";
      }
    }
    return s + "</div>";
  }

  let drawn = "";
  function draw(force) {
    const g = $("#grid"), first = Math.max(0, Math.floor(g.scrollTop / ROW_H) - 10);
    const last = Math.min(grid.order.length, first + Math.ceil(g.clientHeight / ROW_H) + 20);
    const sig = first + ":" + last;
    if (!force && sig === drawn) return;
    drawn = sig;
    let s = "";
    for (let p = first; p < last; p++) s += rowHtml(grid.order[p], p);
    g.querySelectorAll(".grow").forEach((el) => el.remove());
    g.insertAdjacentHTML("beforeend", s);
  }

  /* A trial's evidence: its chunk file, loaded once with a script tag (works from file://). */
  window.mstChunk = function (cases) {
    Object.assign(chunks, cases);
  };
  function loadCase(index) {
    const id = M.cases[index];
    if (chunks[id]) return Promise.resolve(chunks[id]);
    const file = D.chunks.path + "/c" + Math.floor(index / D.chunks.casesPerChunk) + ".js";
    if (!pending[file]) {
      pending[file] = new Promise((resolve, reject) => {
        const tag = document.createElement("script");
        tag.src = file;
        tag.onload = () => resolve();
        tag.onerror = () => { delete pending[file]; reject(new Error("cannot load " + file)); };
        document.head.appendChild(tag);
      });
    }
    return pending[file].then(() => chunks[id] || { trials: {}, pairs: {} });
  }

  function openTrial(vid, index) {
    const panel = $("#trial");
    panel.classList.add("open");
    panel.innerHTML = '<button class="close" title="close">✕</button><h2>' + esc(M.cases[index]) + " · " + esc(vid) + '</h2><p class="loading">loading…</p>';
    loadCase(index).then((c) => {
      const keys = Object.keys(c.trials).filter((k) => k.slice(0, k.lastIndexOf("/")) === vid)
        .sort((a, b) => +a.slice(a.lastIndexOf("/") + 1) - +b.slice(b.lastIndexOf("/") + 1));
      let s = '<button class="close" title="close">✕</button><h2>' + esc(M.cases[index]) + " · " + esc(vid) + "</h2>";
      if (!keys.length) s += "<p>No attempt of this case was collected for this variant.</p>";
      s += '<div class="tabs">' + keys.map((k, n) => '<button data-trial="' + esc(k) + '"' + (n ? "" : ' class="on"') + ">trial " + esc(k.slice(k.lastIndexOf("/") + 1)) + "</button>").join("") + "</div>";
      s += '<div id="trial-body"></div>';
      if (c.pairs[vid]) s += pairsHtml(c.pairs[vid]);
      panel.innerHTML = s;
      panel.querySelectorAll(".tabs button").forEach((b) => b.addEventListener("click", () => {
        panel.querySelectorAll(".tabs button").forEach((x) => x.classList.toggle("on", x === b));
        $("#trial-body").innerHTML = trialHtml(c.trials[b.dataset.trial]);
      }));
      if (keys.length) $("#trial-body").innerHTML = trialHtml(c.trials[keys[0]]);
    }, (err) => { panel.innerHTML = '<button class="close">✕</button><p class="fail">' + esc(err.message) + "</p>"; });
  }

  /* The pairwise judge on this case: each trial judged in both orders (a flip is ab ≠ ba). */
  function pairsHtml(p) {
    let s = '<h3>Pairwise against ' + esc(p.baseline) + ": " + esc(p.preference || "—") + " (" + p.wins + " wins, " + p.ties + " ties, " + p.losses + " losses)</h3>" +
      '<table class="pairs"><tr><th>trial</th><th class="l">candidate shown first</th><th class="l">baseline shown first</th><th class="l">preference</th><th class="l">reasons</th></tr>';
    for (const r of p.pairs || []) {
      s += "<tr><td>" + esc(r.trial) + '</td><td class="l">' + esc(r.ab) + '</td><td class="l">' + esc(r.ba) + (r.ab !== r.ba ? " ⇄ flip" : "") +
        '</td><td class="l">' + esc(r.preference) + '</td><td class="l">' + esc(Object.entries(r.reasons || {}).map(([k, v]) => k + ": " + v).join("; ")) + "</td></tr>";
    }
    s += "</table>";
    for (const err of p.errors || []) s += '<p class="fail">' + esc(json(err)) + "</p>";
    return s;
  }

  function trialHtml(t) {
    const a = t.attempt, g = t.grade, e = a.ending || {};
    let s = '<h3>Ending</h3><table class="ending"><tr><th class="l">kind</th><th class="l">outcome / what</th><th>retryable</th><th>try</th><th>duration</th><th class="l">usage</th></tr><tr>' +
      '<td class="l">' + esc(e.kind || "—") + '</td><td class="l">' + esc(e.outcome || e.what || "—") + "</td><td>" + esc(e.retryable === undefined ? "—" : e.retryable) + "</td>" +
      "<td>" + esc(a.try || 1) + "</td><td>" + (num(a.durationMs) ? fix(a.durationMs / 1000, 2) + " s" : "—") + '</td><td class="l">' +
      esc(Object.entries(a.usage || {}).map(([k, n]) => k + " " + n).join(", ") || "—") + "</td></tr></table>";
    if (e.why) s += '<p class="muted">' + esc(e.why) + "</p>";
    if (a.answer !== null && a.answer !== undefined) s += "<h3>Answer</h3><pre>" + esc(a.answer) + "</pre>";
    s += "<h3>Verdicts</h3>";
    if (!g) s += '<p class="muted">Not graded.</p>';
    else {
      /* a model judge's usage (model, tokens, latency, cost, votes), when its verdicts record it */
      const used = (g.verdicts || []).some((v) => v.model || num(v.inputTokens) || num(v.costUsd));
      s += '<table class="verdicts"><tr><th class="l">judge</th><th class="l">kind</th><th>passed</th><th>score</th><th class="l">reason</th>' +
        (used ? '<th class="l">model</th><th>tokens in / out</th><th>latency</th><th>cost</th><th>votes</th>' : "") + "</tr>";
      for (const v of g.verdicts || []) {
        s += '<tr><td class="l">' + esc(v.judge) + '</td><td class="l">' + esc(v.kind) + '</td><td class="' + (v.passed ? "pass" : "fail") + '">' +
          (v.passed ? "passed" : "failed") + "</td><td>" + (num(v.score) ? fix(v.score) : "—") + '</td><td class="l">' + esc(v.reason || "") + "</td>" +
          (used ? '<td class="l">' + esc(v.model || "—") + "</td><td>" + esc(num(v.inputTokens) ? v.inputTokens : "—") + " / " + esc(num(v.outputTokens) ? v.outputTokens : "—") +
            "</td><td>" + (num(v.latencyMs) ? v.latencyMs + " ms" : "—") + "</td><td>" + money(v.costUsd) + "</td><td>" + (Array.isArray(v.votes) ? v.votes.length : "—") + "</td>" : "") + "</tr>";
      }
      s += "</table>";
      for (const err of g.errors || []) s += '<p class="fail">grading error: ' + esc(json(err)) + "</p>";
      if (g.graders && g.graders.length) {
        s += '<table class="grader-values"><tr><th class="l">grader</th><th>value</th><th class="l">status</th></tr>' +
          g.graders.map((x) => '<tr><td class="l">' + esc(x.id) + "</td><td>" + esc(x.value === null || x.value === undefined ? "—" : x.value) + '</td><td class="l">' + esc(x.status || "") + "</td></tr>").join("") + "</table>";
      }
    }
    s += "<h3>Transcript</h3>" + (t.transcript ? transcriptHtml(t.transcript) : '<p class="muted">No transcript.</p>');
    if (a.transcript) s += '<p class="muted">file: <a href="' + esc(a.transcript) + '">' + esc(a.transcript) + "</a></p>";
    const art = t.artifacts || { files: [], more: 0 };
    s += "<h3>Artifacts</h3>" + (art.files.length ? "<ul class=\"artifacts\">" + art.files.map(([p, n]) => '<li><a href="' + esc(p) + '">' + esc(p) + "</a> " +
      (num(n) ? '<span class="muted">' + n + " bytes</span>" : "") + "</li>").join("") + "</ul>" : '<p class="muted">None.</p>');
    if (art.more) s += '<p class="cut">… ' + art.more + " more files under " + esc(a.artifacts) + "</p>";
    return s;
  }

  function content(c) {
    if (typeof c === "string") return c;
    if (Array.isArray(c)) return c.map((p) => (p && typeof p.text === "string" ? p.text : json(p))).join("\n");
    return c === undefined || c === null ? "" : json(c);
  }

  function transcriptHtml(events) {
    const done = {};
    for (const ev of events) if (ev.type === "tool.execution_complete" && ev.data) done[ev.data.toolCallId] = ev;
    let s = '<div class="transcript">', prevTs = null;
    for (const ev of events) {
      const d = ev.data || {}, ts = (ev.provenance || {}).timestampMs;
      const since = num(ts) && num(prevTs) ? ts - prevTs : null;
      if (num(ts)) prevTs = ts;
      switch (ev.type) {
        case "session.format": break;
        case "user.message": s += '<div class="ev user"><div class="who">user</div><pre>' + esc(content(d.content)) + "</pre></div>"; break;
        case "assistant.message":
          s += '<div class="ev assistant"><div class="who">assistant</div>' + (content(d.content) ? "<pre>" + esc(content(d.content)) + "</pre>" : "") +
            ((d.toolCalls || []).length ? '<div class="muted">calls ' + esc(d.toolCalls.map((c) => c.name || c.toolName || c.id).join(", ")) + "</div>" : "") + "</div>";
          break;
        case "model.request":
          s += '<div class="ev model">model request' + (num(d.requestIndex) ? " #" + d.requestIndex : "") + (d.model ? " · " + esc(d.model) : "") +
            " · in " + esc(d.inputTokens === undefined ? "—" : d.inputTokens) + " / out " + esc(d.outputTokens === undefined ? "—" : d.outputTokens) + " tokens" +
            (num(d.durationMs) ? " · " + d.durationMs + " ms" : num(since) ? " · " + since + " ms since the previous event" : "") + "</div>";
          break;
        case "tool.execution_start": {
          const r = done[d.toolCallId], rd = r ? r.data : null;
          s += '<div class="ev tool"><div class="who">tool call · ' + esc(d.toolName) + (d.mcpServerName ? " (" + esc(d.mcpServerName) + ")" : "") +
            (rd && num(rd.durationMs) ? " · " + rd.durationMs + " ms" : "") + "</div><div class=\"muted\">input</div><pre>" + esc(json(d.input)) + "</pre>" +
            (rd ? '<div class="muted">' + (rd.success === false ? '<span class="fail">error</span>' : "output") + "</div><pre>" + esc(json(rd.success === false && rd.error !== undefined ? rd.error : rd.output)) + "</pre>"
              : '<div class="fail">no result recorded</div>') + "</div>";
          break;
        }
        case "tool.execution_complete": break;
        case "session.result":
          s += '<div class="ev result"><div class="who">result · ' + esc(d.outcome || "") + (num(d.turns) ? " · " + d.turns + " turns" : "") +
            (num(d.durationMs) ? " · " + d.durationMs + " ms" : "") + "</div>" + (d.usage ? "<pre>" + esc(json(d.usage)) + "</pre>" : "") + "</div>";
          break;
        case "report.cut": s += '<div class="ev cut">' + esc(d.text) + "</div>"; break;
        default: s += '<div class="ev"><div class="who">' + esc(ev.type) + "</div><pre>" + esc(json(d)) + "</pre></div>";
      }
    }
    return s + "</div>";
  }

  function start() {
    const app = $("#app");
    app.innerHTML = header() + variants() + comparisons() + pairwise() + graders() + judges() + infrastructure() + matrixSection();
    document.body.insertAdjacentHTML("beforeend", '<div id="trial"></div>');
    $("#filter").addEventListener("input", refilter);
    $("#show").addEventListener("change", refilter);
    $("#grid").addEventListener("scroll", () => draw(false), { passive: true });
    window.addEventListener("resize", () => draw(true));
    $("#grid-head").addEventListener("click", (ev) => {
      const key = ev.target.dataset && ev.target.dataset.sort;
      if (!key) return;
      grid.desc = grid.sortKey === key ? !grid.desc : key.startsWith("d:");
      grid.sortKey = key;
      refilter();
    });
    $("#grid").addEventListener("click", (ev) => {
      const cell = ev.target.closest(".cell");
      if (cell) openTrial(cell.dataset.variant, +cell.dataset.index);
    });
    app.addEventListener("click", (ev) => {
      const link = ev.target.closest("[data-open]");
      if (!link) return;
      ev.preventDefault();
      const i = M.cases.indexOf(link.dataset.case);
      if (i >= 0) openTrial(link.dataset.open, i);
    });
    $("#trial").addEventListener("click", (ev) => { if (ev.target.closest(".close")) $("#trial").classList.remove("open"); });
    document.addEventListener("keydown", (ev) => { if (ev.key === "Escape") $("#trial").classList.remove("open"); });
    refilter();
    document.body.dataset.ready = "1";
    document.body.dataset.readyMs = String(Math.round(performance.now()));  // since navigation started
  }
  start();
})();
