#include "serve/pages.h"

#include "io/web.h"
#include "probe/records.h"
#include "train/records.h"

namespace normlab::serve {

using io::html_escape;

namespace {

constexpr const char* kStyle = R"(
body { font-family: sans-serif; margin: 1em 2em; color: #222; }
nav { margin-bottom: 1em; } nav a { margin-right: 1.5em; } nav .root { color: #777; }
table { border-collapse: collapse; margin: .5em 0 1.5em; } td, th { border: 1px solid #ccc; padding: 3px 8px; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.status { padding: 1px 6px; border-radius: 4px; }
.running { background: #e2f0fb; } .finished { background: #d4edda; } .stalled, .stopped { background: #fff3cd; }
.diverged, .failed, .unreadable { background: #f8d7da; } .queued { background: #eee; }
.reproduced { background: #d4edda; } .not-reproduced { background: #f8d7da; } .inconclusive { background: #fff3cd; }
figure { display: inline-block; margin: .5em 1em .5em 0; vertical-align: top; }
figure button { display: block; margin-top: 2px; font-size: .8em; }
canvas { border: 1px solid #eee; }
.muted { color: #777; } #slider { width: 500px; vertical-align: middle; }
td.path { overflow-wrap: anywhere; min-width: 10em; } td.message { max-width: 30em; } .status { white-space: nowrap; }
tr.group td { background: #f4f4f4; font-weight: bold; }
tr.arm button { font-size: .8em; padding: 0 4px; } tr.in-arm td.path { padding-left: 2em; }
)";

// Error counting comes first so that it sees errors in everything after it, Chart.js included.
constexpr const char* kSelfCheckHead = R"(<script>
window.__errors = 0;
addEventListener('error', () => window.__errors++);
addEventListener('unhandledrejection', () => window.__errors++);
const consoleError = console.error;
console.error = (...args) => { window.__errors++; consoleError(...args); };
</script>
<script src="/chart.js"></script>)";

// What every page shares: charts with a PNG button, the .jsonl tailer, the self-check.
constexpr const char* kCommonJs = R"(<script>
const COLOURS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f', '#17becf', '#bcbd22'];
// Paint white under each chart: a saved PNG is otherwise transparent, unreadable on a dark slide.
Chart.register({id: 'whiteBackground', beforeDraw(c) {
  const x = c.ctx; x.save(); x.globalCompositeOperation = 'destination-over';
  x.fillStyle = '#fff'; x.fillRect(0, 0, c.width, c.height); x.restore();
}});
const charts = [];
// Chart.js 3.9 (Debian's) sets a flat series on an axis of ±1 around its value: a constant learning rate of 1e-3
// was drawn as a line at 0 on −1…1.5. A flat linear axis spans 0 to twice the value instead.
function flatAxis(scale) {
  if (scale.type !== 'linear') return;
  const ys = scale.chart.data.datasets.flatMap(d => d.data.map(p => p !== null && typeof p === 'object' ? p.y : p))
                                      .filter(Number.isFinite);
  if (!ys.length || ys[0] === 0 || !ys.every(v => v === ys[0])) return;
  scale.min = Math.min(0, 2 * ys[0]);
  scale.max = Math.max(0, 2 * ys[0]);
}
function addChart(parent, id, title, xTitle, yTitle, opts = {}) {
  const fig = document.createElement('figure');
  const canvas = document.createElement('canvas');
  canvas.id = id; canvas.width = opts.width || 640; canvas.height = 300;
  const save = document.createElement('button');
  save.textContent = 'Save PNG';
  fig.append(canvas, save);
  parent.append(fig);
  const category = opts.labels !== undefined;  // per-layer profiles: one tick per layer or tensor name
  const chart = new Chart(canvas, {
    type: category ? 'line' : 'scatter',
    data: {labels: opts.labels, datasets: []},
    options: {animation: false, responsive: false, spanGaps: true,
              plugins: {title: {display: true, text: title}},
              scales: {x: {type: category ? 'category' : 'linear', title: {display: true, text: xTitle},
                           ticks: category ? {autoSkip: true, maxRotation: 60} : {}},
                       y: {type: opts.logY ? 'logarithmic' : 'linear', title: {display: true, text: yTitle},
                           afterDataLimits: flatAxis}}}});
  save.onclick = () => {
    const a = document.createElement('a');
    a.href = chart.toBase64Image('image/png');
    a.download = id + '.png';
    a.click();
  };
  charts.push(chart);
  return chart;
}
function dataset(label, i, extra = {}) {
  return Object.assign({label, data: [], borderColor: COLOURS[i % 10], backgroundColor: COLOURS[i % 10],
                        showLine: true, pointRadius: 1.5, borderWidth: 1.5}, extra);
}
// Appends (x, y), first dropping points at x or later: a resumed run logs those steps again.
function pushPoint(ds, x, y) {
  while (ds.data.length && ds.data[ds.data.length - 1].x >= x) ds.data.pop();
  if (Number.isFinite(y)) ds.data.push({x, y});
}
// Follows a .jsonl file under the served folder: each call fetches the complete lines written since
// the last one and hands them to onRecords(records, reset); reset means the file was cut back
// (a resumed run) and the caller starts over.
function tailer(path, onRecords) {
  let offset = 0;
  return async () => {
    for (;;) {
      const r = await fetch('/api/tail?path=' + encodeURIComponent(path) + '&offset=' + offset);
      if (!r.ok) throw new Error('/api/tail ' + path + ': ' + r.status + ' ' + await r.text());
      const t = await r.json();
      offset = t.next;
      onRecords(t.records, t.reset);
      if (!t.more) return;
    }
  };
}
function fmtNum(v, digits = 4) { return v === null || v === undefined ? '' : Number(v).toPrecision(digits); }
function statusBadge(status) {
  const s = document.createElement('span');
  s.className = 'status ' + status; s.textContent = status;
  return s;
}
function cell(row, content, cls) {
  const td = row.insertCell();
  if (content instanceof Node) td.append(content); else td.textContent = content;
  if (cls) td.className = cls;
  return td;
}
function link(href, content) {
  const a = document.createElement('a');
  a.href = href; a.append(content);
  return a;
}
// A folder path that may wrap after each '/': a deep one would otherwise push a table's other columns off screen.
function pathText(path) {
  const f = document.createDocumentFragment();
  path.split('/').forEach((part, i) => {
    if (i) f.append('/', document.createElement('wbr'));
    f.append(part);
  });
  return f;
}
function filesUrl(path) { return '/files/' + path.split('/').map(encodeURIComponent).join('/'); }
// Records the page's state on the body element for a headless browser; `extra` adds page-specific attributes.
function selfCheck(extra = {}) {
  let drawn = 0;
  for (const c of charts) {
    const points = c.data.datasets.some(d => d.data.some(p => p !== null));
    const px = c.canvas.getContext('2d').getImageData(0, 0, c.canvas.width, c.canvas.height).data;
    let painted = false;
    for (let k = 0; k < px.length; k += 4) if (px[k] < 200) { painted = true; break; }  // darker than the background
    drawn += points && painted;
  }
  const b = document.body;
  b.setAttribute('data-charts', charts.length);
  b.setAttribute('data-charts-drawn', drawn);
  b.setAttribute('data-png', charts.length && charts[0].toBase64Image('image/png').startsWith('data:image/png;base64,') ? 1 : 0);
  b.setAttribute('data-y-ranges', charts.map(c => c.canvas.id + ':' + c.scales.y.min + ':' + c.scales.y.max).join(' '));
  b.setAttribute('data-overflow', document.documentElement.scrollWidth > document.documentElement.clientWidth ? 1 : 0);
  for (const [k, v] of Object.entries(extra)) b.setAttribute('data-' + k, v);
  b.setAttribute('data-errors', window.__errors);
}
// Runs step() now and every `ms` while it returns true; a failure is shown and counted, and polling goes on.
function poll(step, ms) {
  const run = async () => {
    let again = true;
    try { again = await step(); } catch (e) { console.error(e); document.getElementById('error').textContent = String(e); }
    if (again) setTimeout(run, ms);
  };
  run();
}
</script>)";

// The field names of the records the pages read, from the schema the C++ writers use (train/records.h,
// probe/records.h): F for metrics.jsonl and the index's run entries, P for probes.jsonl.
std::string schema_script() {
  return "<script>\nconst F = " + train::record_fields().dump() + ";\nconst P = " + probe::probe_fields().dump() +
         ";\n</script>\n";
}

std::string page(const std::string& title, const std::string& body, const std::string& script) {
  return R"(<!DOCTYPE html><html><head><meta charset="utf-8"><title>)" + html_escape(title) +
         " — normlab</title>\n<style>" + kStyle + "</style>\n" + kSelfCheckHead + "\n" + schema_script() + kCommonJs +
         R"(
</head><body>
<nav><a href="/">Index</a><a href="/compare">Compare</a><span class="root" id="root"></span></nav>
<p id="error" style="color: #b00"></p>
)" + body +
         "\n<script>\n" + script + "\n</script></body></html>\n";
}

}  // namespace

std::string plain_page(const std::string& title, const std::string& body_html) {
  return R"(<!DOCTYPE html><html><head><meta charset="utf-8"><title>)" + html_escape(title) +
         " — normlab</title>\n<style>" + kStyle +
         "</style></head><body>\n<nav><a href=\"/\">Index</a><a href=\"/compare\">Compare</a></nav>\n" + body_html +
         "\n</body></html>\n";
}

namespace {

constexpr const char* kIndexBody = R"(
<h1>Runs and studies</h1>
<h2>Studies</h2>
<table id="studies"><thead><tr><th>study</th><th>status</th><th>runs done</th><th>running</th><th>verdict</th><th>report</th></tr></thead><tbody></tbody></table>
<h2>Runs</h2>
<p><button id="compare">Compare selected</button> <span class="muted">tick two or more runs; a study's runs are grouped
by arm (the runs that differ only in their seed), with the mean final loss of those that ended: ▸ shows them</span></p>
<table id="runs"><thead><tr><th></th><th>run</th><th>study</th><th>status</th><th>placement</th><th>depth</th><th>steps</th>
<th>last loss</th><th>val loss</th><th>tokens/s</th><th>probes</th><th>files</th></tr></thead><tbody></tbody></table>)";

// The studies table, and the run rows: a run of its own, or one of an arm's (hidden while its arm is closed).
constexpr const char* kIndexRowsJs = R"(
const picked = new Set();
const opened = new Set();  // the arms shown open, as study + '\n' + arm: kept from one refresh to the next
document.getElementById('compare').onclick = () => {
  location.href = '/compare?' + [...picked].map(p => 'runs=' + encodeURIComponent(p)).join('&');
};
function studyRows(tbody, studies) {
  tbody.replaceChildren();
  if (!studies.length) cell(tbody.insertRow(), 'none yet: normlab study NAME writes one into runs/study-NAME', 'muted').colSpan = 6;
  for (const s of studies) {
    const row = tbody.insertRow();
    cell(row, s.status === 'unreadable' ? s.path : link(filesUrl(s.path) + '/', s.path ? pathText(s.path) : '(this folder)'), 'path');
    cell(row, statusBadge(s.status)).title = s.message;
    cell(row, s.done + ' / ' + s.runs, 'num');
    cell(row, s.running, 'num');
    cell(row, s.verdict, s.verdict.replace(' ', '-'));
    cell(row, s.report ? link(filesUrl(s.report), 'report.html') : '');
  }
}
function runRow(tbody, run) {
  const row = tbody.insertRow();
  const box = document.createElement('input');
  box.type = 'checkbox'; box.checked = picked.has(run.path);
  box.onchange = () => box.checked ? picked.add(run.path) : picked.delete(run.path);
  cell(row, box);
  cell(row, run.viewable ? link('/run?path=' + encodeURIComponent(run.path), pathText(run.path)) : run.path, 'path');
  cell(row, run.study === null ? '' : run.study ? pathText(run.study) : '(this folder)', 'path');
  // Why a run cannot be read is shown in full: it names the file and field to fix.
  const status = cell(row, statusBadge(run.status), 'message');
  if (run.status === 'unreadable') status.append(' ' + run.message); else status.title = run.message;
  cell(row, run.placement);
  cell(row, run.n_layers, 'num');
  cell(row, run[F.step] + ' / ' + run[F.steps] + (run.kind === 'analysis' ? ' analyses' : ''), 'num');
  cell(row, fmtNum(run[F.loss]), 'num');
  cell(row, fmtNum(run[F.val_loss]), 'num');
  cell(row, fmtNum(run[F.tokens_per_s], 3), 'num');
  cell(row, run.probes ? 'yes' : '');
  cell(row, run.viewable ? link(filesUrl(run.path) + '/', 'files') : '');
  return row;
}
)";

// A study's group in the runs table: its heading, and a row per arm with its runs' statuses and mean final losses,
// closed at first (56 runs once filled the page flat).
constexpr const char* kIndexArmsJs = R"(
// The value all `runs` share for `key`, or '' when they differ.
function shared(runs, key) { return runs.every(r => r[key] === runs[0][key]) ? runs[0][key] : ''; }
function armRow(tbody, study, arm, runs) {
  const key = study.path + '\n' + arm.arm;
  const row = tbody.insertRow();
  row.className = 'arm';
  const toggle = document.createElement('button');
  const show = open => {
    toggle.textContent = open ? '▾' : '▸';
    toggle.title = (open ? 'hide' : 'show') + ' its runs';
    tbody.querySelectorAll('tr.in-arm').forEach(r => { if (r.dataset.arm === key) r.hidden = !open; });
  };
  toggle.onclick = () => { opened.has(key) ? opened.delete(key) : opened.add(key); show(opened.has(key)); };
  cell(row, toggle);
  cell(row, pathText(arm.arm + ' × ' + arm.runs), 'path');
  cell(row, study.path ? pathText(study.path) : '(this folder)', 'path');
  const statuses = cell(row, '');
  for (const st of [...new Set(runs.map(r => r.status))]) {
    const badge = statusBadge(st);
    badge.textContent += ' × ' + runs.filter(r => r.status === st).length;
    statuses.append(badge, ' ');
  }
  cell(row, shared(runs, 'placement'));
  cell(row, shared(runs, 'n_layers'), 'num');
  cell(row, runs.every(r => r.kind === 'analysis') ? '' : arm.ended + ' / ' + arm.runs + ' ended', 'num');
  cell(row, fmtNum(arm[F.loss]), 'num').title = 'mean over the runs that ended';
  cell(row, fmtNum(arm[F.val_loss]), 'num').title = 'mean over the runs that ended';
  cell(row, '').colSpan = 3;
  for (const run of runs) {
    const r = runRow(tbody, run);
    r.className = 'in-arm';
    r.dataset.arm = key;
  }
  show(opened.has(key));
}
function studyGroup(tbody, study, runs) {
  const head = cell(tbody.insertRow(), study.path ? pathText(study.path) : '(this folder)', 'path');
  head.parentNode.className = 'group';
  head.colSpan = 12;
  head.append(` — ${runs.length} runs in ${study.arms.length} arms`);
  for (const arm of study.arms) armRow(tbody, study, arm, runs.filter(r => r.arm === arm.arm));
}
)";

constexpr const char* kIndexRefreshJs = R"(
async function refresh() {
  const r = await fetch('/api/index');
  if (!r.ok) throw new Error('/api/index: ' + r.status);
  const index = await r.json();
  document.getElementById('root').textContent = index.root;
  studyRows(document.querySelector('#studies tbody'), index.studies);
  const runs = document.querySelector('#runs tbody');
  runs.replaceChildren();
  if (!index.runs.length) cell(runs.insertRow(), 'none yet: normlab train --run ' + index.root + '/NAME starts one', 'muted').colSpan = 12;
  const grouped = new Set(index.studies.map(s => s.path));
  for (const run of index.runs) if (!grouped.has(run.study)) runRow(runs, run);
  for (const s of index.studies) studyGroup(runs, s, index.runs.filter(run => run.study === s.path));
  const rows = [...runs.rows];
  selfCheck({runs: index.runs.length, studies: index.studies.length, 'study-statuses': index.studies.map(s => s.status).join(' '),
             'run-statuses': index.runs.map(r => r.status).join(' '), arms: rows.filter(r => r.className === 'arm').length,
             'shown-runs': rows.filter(r => r.querySelector('input') && !r.hidden).length,
             'arm-losses': rows.filter(r => r.className === 'arm').map(r => r.cells[7].textContent).join(' ')});
  return true;
}
poll(refresh, 5000);
)";

}  // namespace

std::string index_page() {
  return page("runs", kIndexBody, std::string(kIndexRowsJs) + kIndexArmsJs + kIndexRefreshJs);
}

namespace {

constexpr const char* kRunBody = R"(
<h1 id="title"></h1>
<p id="summary"></p>
<details><summary>config</summary><pre id="config"></pre></details>
<div id="curves"></div>
<div id="probes" hidden>
<h2>Per-layer profiles (probes)</h2>
<p>step <input type="range" id="slider" min="0" max="0" value="0"> <b id="step"></b>
<span class="muted">the dashed line is step 1, the state at init; the slider follows the newest step while it is at the right end</span></p>
<div id="profiles"></div>
</div>
<div id="analyses" hidden>
<h2>Analyses (normlab probe)</h2>
</div>)";

// The run's per-step charts (loss, learning rate, gradient norm, throughput) fed from metrics.jsonl.
constexpr const char* kRunCurvesJs = R"(
const runPath = new URLSearchParams(location.search).get('path');
document.getElementById('title').textContent = runPath;
document.title = runPath + ' — normlab';
// The per-step charts appear once the run has training files: a study's run trains in its run/ subfolder (not
// there while the run waits its turn), an analysis-only run has none.
let loss = null, perStep = [];
function addCurves() {
  const curves = document.getElementById('curves');
  loss = addChart(curves, 'loss', 'Loss', 'step', 'loss');
  loss.data.datasets.push(dataset('train', 0), dataset('validation', 1, {pointRadius: 3}));
  perStep = [[loss, F.loss], [addChart(curves, 'lr', 'Learning rate', 'step', 'lr'), F.lr],
             [addChart(curves, 'grad_norm', 'Gradient norm (before clipping)', 'step', '‖g‖', {logY: true}), F.grad_norm],
             [addChart(curves, 'tokens_per_s', 'Throughput', 'step', 'tokens/s'), F.tokens_per_s]];
  perStep.slice(1).forEach(([c, key]) => c.data.datasets.push(dataset(key, 0)));
}

)";

// The per-layer profiles of probes.jsonl, at the step the slider picks, with the init step dashed.
constexpr const char* kRunProfilesJs = R"(
// The probe families drawn, each a profile over layers (stream) or over tensors (norm, update).
const profileSpecs = [
  {family: P.families.stream, x: P.layer, y: P.mean_square, title: 'Residual stream E[x²] entering each layer', xTitle: 'layer', logY: true},
  {family: P.families.stream, x: P.layer, y: P.grad_norm, title: 'Gradient norm ‖∂L/∂x‖ of the stream', xTitle: 'layer', logY: true},
  {family: P.families.norm, x: P.name, y: P.inv_sigma, title: 'Norms: mean 1/σ (Jacobian scale)', xTitle: 'norm', logY: true},
  {family: P.families.update, x: P.name, y: P.update_ratio, title: 'Update ratio ‖Δθ‖/‖θ‖', xTitle: 'parameter', logY: true}];
const probeRecords = {[P.families.stream]: new Map(), [P.families.norm]: new Map(), [P.families.update]: new Map()};
let probeSteps = [];
const slider = document.getElementById('slider');
let followNewest = true;
slider.oninput = () => { followNewest = slider.value == slider.max; drawProfiles(); };

function onMetrics(records, reset) {
  if (reset) perStep.forEach(([c]) => c.data.datasets.forEach(d => d.data = []));
  for (const r of records) {
    if (r[F.type] === F.types.train) perStep.forEach(([c, key]) => pushPoint(c.data.datasets[0], r[F.step], r[key]));
    else if (r[F.type] === F.types.eval) pushPoint(loss.data.datasets[1], r[F.step], r[F.val_loss]);
  }
}
function onProbes(records, reset) {
  if (reset) Object.values(probeRecords).forEach(m => m.clear());
  for (const r of records) if (r[P.family] in probeRecords) probeRecords[r[P.family]].set(r[P.step], r);
  probeSteps = [...probeRecords[P.families.stream].keys()].sort((a, b) => a - b);
}
function profile(spec, step, i, extra) {
  const r = probeRecords[spec.family].get(step);
  const ys = r ? r[spec.y].map(v => spec.logY && !(v > 0) ? null : v) : [];  // a log axis has no 0
  return dataset('step ' + step, i, Object.assign({data: ys}, extra));
}
function drawProfiles() {
  if (!probeSteps.length) return;
  document.getElementById('probes').hidden = false;
  slider.max = probeSteps.length - 1;
  if (followNewest) slider.value = slider.max;
  const step = probeSteps[slider.value];
  document.getElementById('step').textContent = step + ' of ' + probeSteps[probeSteps.length - 1];
  for (const spec of profileSpecs) {
    const r = probeRecords[spec.family].get(step) || probeRecords[spec.family].get(probeSteps[0]);
    if (!r) continue;
    if (!spec.chart) spec.chart = addChart(document.getElementById('profiles'), 'profile_' + spec.family + '_' + spec.y, spec.title,
                                           spec.xTitle, spec.y, {labels: [], logY: spec.logY, width: 560});
    spec.chart.data.labels = r[spec.x].map(String);
    spec.chart.data.datasets = [profile(spec, step, 0), profile(spec, probeSteps[0], 7, {borderDash: [5, 4], pointRadius: 0})];
    spec.chart.update();
  }
}
)";

// The analyses of `normlab probe` (analysis.jsonl).
constexpr const char* kRunAnalysesJs = R"(
// analysis.jsonl (normlab probe writes it whole when it ends): one record per analysis, {"analysis", "result"}
// with the result's columns as arrays; each numeric column is drawn against the first (layers or tensor names).
let analysisCharts = 0;
async function showAnalyses(path) {
  const r = await fetch(filesUrl(path));
  if (!r.ok) throw new Error(path + ': ' + r.status);
  const box = document.getElementById('analyses');
  for (const line of (await r.text()).split('\n')) {
    let record;
    try { record = JSON.parse(line); } catch (e) { continue; }  // an empty line, or one the index reports as unreadable
    const columns = Object.entries(record.result || {}).filter(([, v]) => Array.isArray(v));
    if (columns.length < 2) continue;
    const [xName, xs] = columns[0];
    for (const [name, ys] of columns.slice(1)) {
      const finite = ys.filter(v => typeof v === 'number' && Number.isFinite(v));
      if (!finite.length || !ys.every(v => v === null || typeof v === 'number')) continue;
      const logY = finite.every(v => v > 0) && Math.max(...finite) > 100 * Math.min(...finite);
      const c = addChart(box, 'analysis_' + record.analysis + '_' + name + '_' + analysisCharts++, record.analysis + ': ' + name,
                         xName, name, {labels: xs.map(String), logY, width: 560});
      c.data.datasets.push(dataset(name, 0, {data: ys.map(v => logY && !(v > 0) ? null : v)}));
      c.update();
      box.hidden = false;
    }
  }
}

)";

// Each poll: the run's index entry, new lines of its files, the summary line and the self-check.
constexpr const char* kRunRefreshJs = R"(
let metrics = null, probes = null, configShown = false, analysesShown = false;
async function refresh() {
  const r = await fetch('/api/run?path=' + encodeURIComponent(runPath));
  if (!r.ok) throw new Error('/api/run: ' + r.status + ' ' + await r.text());
  const run = await r.json();
  if (!configShown) {
    const c = await fetch(filesUrl(run.path + '/config.json'));
    if (c.ok) {
      const text = await c.text();
      try { document.getElementById('config').textContent = JSON.stringify(JSON.parse(text), null, 2); }
      catch (e) { document.getElementById('config').textContent = text; }  // the status says why it is unreadable
    }
    configShown = true;
  }
  if (run.files !== null && metrics === null) {
    addCurves();
    metrics = tailer(run.files + '/metrics.jsonl', onMetrics);
    probes = tailer(run.files + '/probes.jsonl', onProbes);
  }
  if (metrics !== null) {
    await metrics();
    await probes();
  }
  if (run.analysis !== null && !analysesShown) {
    await showAnalyses(run.analysis);
    analysesShown = true;
  }
  const progress = run.kind === 'analysis' ? ` analysis ${run[F.step]} of ${run[F.steps]}` : ` step ${run[F.step]} of ${run[F.steps]}`;
  const summary = document.getElementById('summary');
  summary.replaceChildren(statusBadge(run.status), ` ${run.placement}, ${run.n_layers} layers,` + progress +
                          (run[F.loss] !== null ? `, loss ${fmtNum(run[F.loss])}` : '') + (run.message ? ' — ' + run.message : ''),
                          ' · ', link(filesUrl(run.path) + '/', 'files'));
  perStep.forEach(([c]) => c.update());
  drawProfiles();
  selfCheck({points: loss === null ? 0 : loss.data.datasets[0].data.length, status: run.status, analyses: analysisCharts});
  return run.status === 'running' || run.status === 'queued';  // a run that ended no longer changes
}
poll(refresh, 2000);
)";

}  // namespace

std::string run_page() {
  return page("run", kRunBody, std::string(kRunCurvesJs) + kRunProfilesJs + kRunAnalysesJs + kRunRefreshJs);
}

namespace {

constexpr const char* kCompareBody = R"(
<h1>Compare runs</h1>
<p>x axis: <select id="axis"><option value="step">step</option><option value="tokens">tokens</option></select>
<span class="muted">tick runs below; the address keeps the choice, so a comparison can be bookmarked</span></p>
<div id="charts"></div>
<table id="runs"><thead><tr><th></th><th>run</th><th>status</th><th>placement</th><th>depth</th><th>last loss</th></tr></thead><tbody></tbody></table>)";

// The two charts, and following each chosen run's metrics.jsonl.
constexpr const char* kCompareFollowJs = R"(
const chosen = new URLSearchParams(location.search).getAll('runs');
const axis = document.getElementById('axis');
const box = document.getElementById('charts');
const trainLoss = addChart(box, 'compare_loss', 'Training loss', 'step', 'loss', {width: 760});
const valLoss = addChart(box, 'compare_validation', 'Validation loss', 'step', 'val loss', {width: 760});
// One entry per chosen run: its tailer, its tokens per step, its raw records (kept to redraw on an axis change).
const followed = new Map();
// `run` is the run's index entry: its training files are in run.files (a study's run/ subfolder).
async function follow(run, i) {
  const c = await fetch(filesUrl(run.files + '/config.json'));
  if (!c.ok) throw new Error(run.files + '/config.json: ' + c.status);
  const t = (await c.json()).train;
  const f = {i, tokensPerStep: t.batch_size * t.seq_len * t.grad_accum, train: [], val: []};
  f.tail = tailer(run.files + '/metrics.jsonl', (records, reset) => {
    if (reset) f.train = [], f.val = [];
    for (const r of records) {
      if (r[F.type] === F.types.train) f.train.push(r); else if (r[F.type] === F.types.eval) f.val.push(r);
    }
  });
  followed.set(run.path, f);
}
)";

// Drawing every followed run against step or tokens.
constexpr const char* kCompareDrawJs = R"(
function draw() {
  trainLoss.data.datasets = []; valLoss.data.datasets = [];
  for (const [path, f] of followed) {
    const scale = axis.value === 'tokens' ? f.tokensPerStep : 1;
    const train = dataset(path, f.i), val = dataset(path, f.i, {pointRadius: 3});
    f.train.forEach(r => pushPoint(train, r[F.step] * scale, r[F.loss]));
    f.val.forEach(r => pushPoint(val, r[F.step] * scale, r[F.val_loss]));
    trainLoss.data.datasets.push(train); valLoss.data.datasets.push(val);
  }
  for (const c of [trainLoss, valLoss]) { c.options.scales.x.title.text = axis.value; c.update(); }
  selfCheck({series: trainLoss.data.datasets.filter(d => d.data.length).length});
}
axis.onchange = draw;
)";

// The first poll lists the runs to tick and follows the chosen; each poll then reads their new lines and draws.
constexpr const char* kCompareRefreshJs = R"(
let listed = false;
async function refresh() {
  if (!listed) {
    const r = await fetch('/api/index');
    if (!r.ok) throw new Error('/api/index: ' + r.status);
    const tbody = document.querySelector('#runs tbody');
    const runs = (await r.json()).runs;
    for (const run of runs) {
      const row = tbody.insertRow();
      const tick = document.createElement('input');
      tick.type = 'checkbox'; tick.checked = chosen.includes(run.path);
      tick.onchange = () => {
        const next = tick.checked ? [...chosen, run.path] : chosen.filter(p => p !== run.path);
        location.search = next.map(p => 'runs=' + encodeURIComponent(p)).join('&');
      };
      cell(row, tick);
      cell(row, link('/run?path=' + encodeURIComponent(run.path), pathText(run.path)), 'path');
      cell(row, statusBadge(run.status));
      cell(row, run.placement);
      cell(row, run.n_layers, 'num');
      cell(row, fmtNum(run[F.loss]), 'num');
    }
    for (const [i, path] of chosen.entries()) {
      const run = runs.find(r => r.path === path);
      if (run === undefined) throw new Error(path + ' is not a run of this folder');
      if (run.files !== null) await follow(run, i);  // an analysis-only run, or one not started, has no curve
    }
    listed = true;
  }
  for (const f of followed.values()) await f.tail();
  draw();
  return true;
}
poll(refresh, 3000);
)";

}  // namespace

std::string compare_page() {
  return page("compare", kCompareBody, std::string(kCompareFollowJs) + kCompareDrawJs + kCompareRefreshJs);
}

}  // namespace normlab::serve
