#include "coordinator/http/dashboard_page.h"

namespace pipecoord::coordinator::http {

const char kDashboardHtml[] = R"HTML(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>pipecoord dashboard</title>
<link rel="stylesheet" href="/dashboard.css">
<script src="/dashboard.js" defer></script>
</head>
<body>
<header><h1>pipecoord</h1><span id="updated">loading...</span> <a href="/metrics">/metrics</a></header>
<main>
<section><h2>Jobs</h2>
<table id="jobs"><thead><tr><th>job</th><th>name</th><th>state</th><th>schedule</th><th>pp</th><th>dp</th>
<th>steps</th><th>loss</th><th>health events</th></tr></thead><tbody></tbody></table></section>
<section><h2>Workers</h2>
<table id="workers"><thead><tr><th>worker</th><th>host</th><th>device</th><th>data endpoint</th><th>job</th>
<th>rank</th><th>lease</th></tr></thead><tbody></tbody></table></section>
<section id="job"><h2>Job <span id="job-id">-</span> <span id="job-state"></span></h2>
<p id="job-summary"></p>
<p id="calibration" class="note"></p>
<div id="rebalance" hidden><strong>Rebalance suggestion</strong> <span id="rebalance-text"></span></div>
<div class="charts">
<figure><figcaption>Loss</figcaption><svg id="chart-loss" class="chart"></svg><p class="note" id="note-loss"></p></figure>
<figure><figcaption>Gradient norm</figcaption><svg id="chart-grad-norm" class="chart"></svg><p class="note" id="note-grad-norm"></p></figure>
<figure><figcaption>Step time</figcaption><svg id="chart-step-time" class="chart"></svg><p class="note" id="note-step-time"></p></figure>
<figure><figcaption>Bubble rate</figcaption><svg id="chart-bubble" class="chart"></svg><p class="note" id="note-bubble"></p></figure>
<figure><figcaption>Idle time by cause, summed over ranks</figcaption><svg id="chart-idle" class="chart"></svg><p class="note" id="note-idle"></p></figure>
<figure><figcaption>Peak memory per rank against its budget</figcaption><svg id="chart-memory" class="chart"></svg><p class="note" id="note-memory"></p></figure>
</div>
<h3>Timeline of the last steps</h3>
<p class="legend"><span class="sw F"></span>F <span class="sw B"></span>B/BW <span class="sw W"></span>W
<span class="sw PROBE"></span>probe <span class="sw OPT"></span>optimizer <span class="sw idle"></span>predicted bubble</p>
<svg id="timeline" width="1000" height="60"></svg>
<h3>Health events</h3>
<table id="events"><thead><tr><th>kind</th><th>rank</th><th>step</th><th>message</th></tr></thead><tbody></tbody></table>
<h3>Memory per rank against the plan's budget</h3>
<table id="memory"><thead><tr><th>rank</th><th>peak</th><th>budget</th><th></th></tr></thead><tbody></tbody></table>
<h3>Straggler scores</h3>
<table id="scores"><thead><tr><th>rank</th><th>op</th><th>relative</th><th>individual</th></tr></thead><tbody></tbody></table>
</section>
</main>
</body>
</html>
)HTML";

const char kDashboardCss[] = R"CSS(body { font: 14px sans-serif; margin: 0; color: #222; }
header { background: #243447; color: #fff; padding: 8px 16px; display: flex; gap: 16px; align-items: baseline; }
header h1 { font-size: 20px; margin: 0; } header a { color: #9cf; }
main { padding: 8px 16px; }
table { border-collapse: collapse; margin-bottom: 8px; }
th, td { border: 1px solid #ccc; padding: 2px 8px; text-align: left; vertical-align: top; }
th { background: #eef; }
tr.selected td { background: #ffd; }
tr.clickable { cursor: pointer; }
td.kind-SDC, td.kind-HANG { color: #fff; background: #c0392b; font-weight: bold; }
td.kind-STRAGGLER, td.kind-BUBBLE, td.kind-MEMORY { background: #f5b041; font-weight: bold; }
td.over { color: #c0392b; font-weight: bold; }
.bar { height: 10px; background: #5dade2; display: inline-block; }
.bar.over { background: #c0392b; }
.legend .sw { display: inline-block; width: 12px; height: 12px; margin: 0 2px 0 10px; vertical-align: middle; }
.F { background: #3498db; } .B { background: #27ae60; } .W { background: #16a085; }
.PROBE { background: #8e44ad; } .OPT { background: #7f8c8d; }
.idle { background: rgba(231, 76, 60, 0.35); border: 1px dashed #e74c3c; }
svg { border: 1px solid #ccc; background: #fafafa; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(600px, 1fr)); gap: 8px 16px; }
figure { margin: 0; } figcaption { font-weight: bold; margin: 4px 0; }
svg.chart { width: 600px; height: 230px; background: #fff; }
svg.chart text { font-size: 11px; fill: #444; }
.note { color: #666; font-style: italic; margin: 2px 0 6px; min-height: 1em; }
#rebalance { border: 1px solid #f5b041; background: #fef5e7; padding: 6px 10px; margin: 6px 0; }
)CSS";

const char kDashboardJs[] = R"JS('use strict';
const COLORS = {F: '#3498db', B: '#27ae60', BW: '#27ae60', W: '#16a085', PROBE: '#8e44ad', OPT: '#7f8c8d'};
let selected = null;

function cell(row, text, cls) {
  const td = document.createElement('td');
  td.textContent = text === null || text === undefined ? '' : String(text);
  if (cls) td.className = cls;
  row.appendChild(td);
  return td;
}
function clear(tbody) { while (tbody.firstChild) tbody.removeChild(tbody.firstChild); }
function mib(b) { return (b / 1048576).toFixed(2) + ' MiB'; }
async function get(path) {
  const r = await fetch(path, {cache: 'no-store'});
  if (!r.ok) throw new Error(path + ': HTTP ' + r.status);
  return r.json();
}

function showJobs(data) {
  const tbody = document.querySelector('#jobs tbody');
  clear(tbody);
  if (selected === null || !data.jobs.some(j => j.id === selected)) {
    const running = data.jobs.filter(j => j.state === 'RUNNING');
    const pick = running.length ? running[running.length - 1] : data.jobs[data.jobs.length - 1];
    selected = pick ? pick.id : null;
  }
  for (const j of data.jobs) {
    const tr = document.createElement('tr');
    tr.className = 'clickable' + (j.id === selected ? ' selected' : '');
    tr.addEventListener('click', () => { selected = j.id; refresh(); });
    cell(tr, j.id); cell(tr, j.name); cell(tr, j.state); cell(tr, j.schedule); cell(tr, j.pp); cell(tr, j.dp);
    cell(tr, j.steps_done + '/' + j.steps); cell(tr, j.loss === null ? '-' : j.loss.toFixed(4));
    cell(tr, j.health_events, j.health_events > 0 ? 'over' : '');
    tbody.appendChild(tr);
  }
}

function showWorkers(data) {
  const tbody = document.querySelector('#workers tbody');
  clear(tbody);
  for (const w of data.workers) {
    const tr = document.createElement('tr');
    cell(tr, w.id); cell(tr, w.host); cell(tr, w.device); cell(tr, w.endpoint); cell(tr, w.job || '-');
    cell(tr, w.job ? w.rank : '-'); cell(tr, w.lease_ms + ' ms');
    tbody.appendChild(tr);
  }
}

function svgEl(name, attrs) {
  const e = document.createElementNS('http://www.w3.org/2000/svg', name);
  for (const k in attrs) e.setAttribute(k, String(attrs[k]));
  return e;
}

function showTimeline(job) {
  const svg = document.getElementById('timeline');
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const acts = job.timeline.actions, idle = job.timeline.predicted_idle;
  const rows = job.pp * Math.max(1, job.dp);
  const left = 110, width = 1000 - left - 10, rowH = 26;
  svg.setAttribute('height', String(rows * rowH + 30));
  let end = 0;
  for (const a of acts) end = Math.max(end, a.end_s);
  for (const w of idle) end = Math.max(end, w.end_s);
  if (end <= 0) end = 1;
  const x = s => left + (s / end) * width;
  for (let r = 0; r < rows; r++) {
    const label = svgEl('text', {x: 4, y: r * rowH + 17, 'font-size': 12});
    label.textContent = 'rank ' + (r % job.pp) + ' (dp ' + Math.floor(r / job.pp) + ')';
    svg.appendChild(label);
  }
  for (const a of acts) {
    const compute = a.op in COLORS;
    const h = compute ? rowH - 8 : 4;
    const rect = svgEl('rect', {x: x(a.start_s), y: a.row * rowH + (compute ? 4 : rowH - 6),
                                width: Math.max(1, x(a.end_s) - x(a.start_s)), height: h,
                                fill: COLORS[a.op] || '#bbb'});
    const title = svgEl('title', {});
    title.textContent = a.stage + a.op + (a.mb >= 0 ? a.mb : '') + ' step ' + a.step + ': ' +
        ((a.end_s - a.start_s) * 1e3).toFixed(3) + ' ms' + (a.wait_s > 0 ? ', waited ' + (a.wait_s * 1e3).toFixed(3) + ' ms' : '');
    rect.appendChild(title);
    svg.appendChild(rect);
  }
  for (const w of idle) {
    const rect = svgEl('rect', {x: x(w.start_s), y: w.row * rowH + 2, width: Math.max(1, x(w.end_s) - x(w.start_s)),
                                height: rowH - 4, fill: 'rgba(231,76,60,0.30)', stroke: '#e74c3c',
                                'stroke-dasharray': '3,2', 'class': 'predicted-idle'});
    const title = svgEl('title', {});
    title.textContent = 'predicted bubble, step ' + w.step;
    rect.appendChild(title);
    svg.appendChild(rect);
  }
  const axis = svgEl('text', {x: left, y: rows * rowH + 20, 'font-size': 12});
  axis.textContent = '0 .. ' + (end * 1e3).toFixed(2) + ' ms (last ' + new Set(acts.map(a => a.step)).size + ' steps)';
  svg.appendChild(axis);
}

// A step of 1, 2 or 5 x 10^k giving about `n` ticks over [lo, hi].
function niceTicks(lo, hi, n) {
  const raw = (hi - lo) / n, mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map(m => m * mag).find(s => s >= raw);
  const ticks = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) ticks.push(t);
  return {ticks, step, decimals: Math.max(0, -Math.floor(Math.log10(step)))};
}

// A line chart of `series` ({name, color, ys (null: no point), dashed}) over the steps `xs`, and
// of `levels` ({name, color, y}: one value for every step, drawn dashed). `unit` names y's unit
// after `scale` (e.g. 1e3 for ms). Each line carries data-series and data-points (its points).
function lineChart(svg, xs, unit, scale, series, levels, opts) {
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const W = 600, H = 230, left = 58, right = 12, top = 30, bottom = 32;
  svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
  const lines = series.map(s => ({s, pts: xs.map((x, i) => [x, s.ys[i]]).filter(p => p[1] !== null && isFinite(p[1]))}));
  const ys = [];
  for (const l of lines) for (const p of l.pts) ys.push(p[1] * scale);
  for (const v of levels) ys.push(v.y * scale);
  let y0 = ys.length ? ys.reduce((a, b) => Math.min(a, b)) : 0, y1 = ys.length ? ys.reduce((a, b) => Math.max(a, b)) : 1;
  if (opts.fromZero) y0 = Math.min(0, y0);
  if (y1 - y0 < 1e-12) { y1 += Math.abs(y1) * 0.1 || 1; y0 -= opts.fromZero && y0 >= 0 ? 0 : Math.abs(y0) * 0.1 || 1; }
  // The axis ends on ticks, so its top and bottom are labeled.
  const yt = niceTicks(y0, y1, 4);
  y0 = Math.min(y0, yt.ticks[0]); y1 = Math.max(y1, yt.ticks[yt.ticks.length - 1]);
  if (y1 > yt.ticks[yt.ticks.length - 1]) yt.ticks.push(y1 = yt.ticks[yt.ticks.length - 1] + yt.step);
  if (y0 < yt.ticks[0]) yt.ticks.unshift(y0 = yt.ticks[0] - yt.step);
  let x0 = xs.length ? xs[0] : 0, x1 = xs.length ? xs[xs.length - 1] : 1;
  if (x1 <= x0) x1 = x0 + 1;
  const px = x => left + (x - x0) / (x1 - x0) * (W - left - right);
  const py = y => H - bottom - (y * scale - y0) / (y1 - y0) * (H - top - bottom);
  for (const t of yt.ticks) {
    const y = H - bottom - (t - y0) / (y1 - y0) * (H - top - bottom);
    svg.appendChild(svgEl('line', {x1: left, x2: W - right, y1: y, y2: y, stroke: '#e5e5e5'}));
    const label = svgEl('text', {x: left - 4, y: y + 4, 'text-anchor': 'end'});
    label.textContent = t.toFixed(yt.decimals);
    svg.appendChild(label);
  }
  const unitLabel = svgEl('text', {x: 4, y: H - 4});
  unitLabel.textContent = unit;
  svg.appendChild(unitLabel);
  const xt = niceTicks(x0, x1, 6);
  for (const t of xt.ticks) {
    if (t !== Math.round(t)) continue;
    svg.appendChild(svgEl('line', {x1: px(t), x2: px(t), y1: H - bottom, y2: H - bottom + 4, stroke: '#888'}));
    const label = svgEl('text', {x: px(t), y: H - bottom + 15, 'text-anchor': 'middle'});
    label.textContent = String(t);
    svg.appendChild(label);
  }
  const xLabel = svgEl('text', {x: W - right, y: H - 4, 'text-anchor': 'end'});
  xLabel.textContent = 'step';
  svg.appendChild(xLabel);
  svg.appendChild(svgEl('polyline', {points: left + ',' + top + ' ' + left + ',' + (H - bottom) + ' ' + (W - right) + ',' + (H - bottom),
                                     fill: 'none', stroke: '#888'}));
  const legend = [];
  for (const v of levels) {
    svg.appendChild(svgEl('polyline', {points: px(x0) + ',' + py(v.y) + ' ' + px(x1) + ',' + py(v.y), fill: 'none',
                                       stroke: v.color, 'stroke-width': 1.5, 'stroke-dasharray': '6,4', 'class': 'level',
                                       'data-series': v.name, 'data-value': v.y}));
  }
  for (const l of lines) {
    const line = svgEl('polyline', {points: l.pts.map(p => px(p[0]).toFixed(1) + ',' + py(p[1]).toFixed(1)).join(' '),
                                    fill: 'none', stroke: l.s.color, 'stroke-width': 1.5, 'class': 'series',
                                    'data-series': l.s.name, 'data-points': l.pts.length,
                                    'data-last': l.pts.length ? l.pts[l.pts.length - 1][1] : ''});
    if (l.s.dashed) line.setAttribute('stroke-dasharray', '2,2');
    if (l.s.rank !== undefined) line.setAttribute('data-rank', l.s.rank);
    const title = svgEl('title', {});
    title.textContent = l.s.name + (l.pts.length ? ': ' + (l.pts[l.pts.length - 1][1] * scale).toFixed(yt.decimals + 2) + ' ' + unit +
        ' at step ' + l.pts[l.pts.length - 1][0] : ': no points');
    line.appendChild(title);
    svg.appendChild(line);
    // A single point draws no line: mark it.
    if (l.pts.length === 1) svg.appendChild(svgEl('circle', {cx: px(l.pts[0][0]), cy: py(l.pts[0][1]), r: 3, fill: l.s.color}));
    if (l.pts.length) legend.push({name: l.s.name, color: l.s.color});
  }
  for (const v of levels) legend.push({name: v.name, color: v.color, dashed: true});
  let lx = left + 4;
  for (const [i, e] of legend.entries()) {
    const width = 32 + 6.4 * e.name.length;
    if (lx + width > W - right && i < legend.length - 1) {  // no room: count the rest
      const more = svgEl('text', {x: lx, y: 20});
      more.textContent = '+' + (legend.length - i) + ' more';
      svg.appendChild(more);
      break;
    }
    svg.appendChild(svgEl('line', {x1: lx, x2: lx + 16, y1: 16, y2: 16, stroke: e.color, 'stroke-width': 2,
                                   'stroke-dasharray': e.dashed ? '4,3' : 'none'}));
    const t = svgEl('text', {x: lx + 20, y: 20});
    t.textContent = e.name;
    svg.appendChild(t);
    lx += width;
  }
}

const RANK_COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#17becf', '#8c564b', '#e377c2'];

function showCurves(job) {
  const s = job.series, cal = job.calibration;
  const note = (id, text) => { document.getElementById(id).textContent = text; };
  const any = ys => ys.some(y => y !== null);
  const lossSeries = [{name: 'loss', color: '#1f77b4', ys: s.loss}];
  if (s.val_loss) lossSeries.push({name: 'validation loss', color: '#d62728', ys: s.val_loss});
  lineChart(document.getElementById('chart-loss'), s.step, 'loss', 1, lossSeries, [], {fromZero: false});
  let lossNote = s.step.length ? '' : 'no step measured yet';
  if (s.val_loss) {
    const at = s.val_loss.map((v, i) => [s.step[i], v, s.val_bits_per_byte ? s.val_bits_per_byte[i] : null])
                         .filter(p => p[1] !== null);
    const last = at[at.length - 1];
    lossNote = 'validation loss ' + last[1].toFixed(4) + ' nats' +
               (last[2] !== null ? ' (' + last[2].toFixed(4) + ' bits per byte)' : '') + ' at step ' + last[0];
  }
  note('note-loss', lossNote);
  // The global gradient norm before clipping, the clipping threshold as a level; the learning
  // rate of the last step in the note.
  const clip = job.clip_grad_norm || 0;
  lineChart(document.getElementById('chart-grad-norm'), s.step, 'L2 norm', 1, [{name: 'gradient norm', color: '#2ca02c', ys: s.grad_norm}],
            clip > 0 ? [{name: 'clip', color: '#888', y: clip}] : [], {fromZero: true});
  const lr = s.learning_rate.length ? s.learning_rate[s.learning_rate.length - 1] : null;
  const clipped = clip > 0 ? s.grad_norm.filter(g => g !== null && g > clip).length : 0;
  note('note-grad-norm', !any(s.grad_norm) ? 'no gradient norm reported (the backend computes none)'
                         : 'learning rate ' + (lr !== null ? lr.toPrecision(4) : '-') + ' at the last step' +
                           (clip > 0 ? '; clipped to ' + clip + ' in ' + clipped + ' step(s)' : ''));
  // The records' predictions are the calibrated ones once the job is calibrated, the plan's before.
  const predicted = cal ? 'predicted (calibrated)' : 'predicted (plan)';
  const calNote = cal ? 'calibrated on ' + cal.steps_measured + ' measured steps; steps before it show the plan\'s prediction'
                      : 'not calibrated yet';
  lineChart(document.getElementById('chart-step-time'), s.step, 'ms', 1e3,
            [{name: 'measured', color: '#1f77b4', ys: s.step_time_s}, {name: predicted, color: '#ff7f0e', ys: s.predicted_step_s}],
            cal && cal.plan_step_s > 0 ? [{name: 'plan', color: '#888', y: cal.plan_step_s}] : [], {fromZero: true});
  note('note-step-time', any(s.predicted_step_s) ? calNote : calNote + ': no predicted step time reported yet');
  lineChart(document.getElementById('chart-bubble'), s.step, 'bubble rate (idle / ranks x step time)', 1,
            [{name: 'measured', color: '#1f77b4', ys: s.bubble}, {name: predicted, color: '#ff7f0e', ys: s.predicted_bubble}],
            [{name: 'plan', color: '#888', y: job.predicted_bubble_rate}], {fromZero: true});
  note('note-bubble', any(s.predicted_bubble) ? calNote : calNote + ': no per-step prediction reported yet');
  lineChart(document.getElementById('chart-idle'), s.step, 'ms (summed over ' + job.pp * Math.max(1, job.dp) + ' ranks)', 1e3,
            [{name: 'inherent', color: '#7f7f7f', ys: s.idle.inherent_s}, {name: 'imbalance', color: '#ff7f0e', ys: s.idle.imbalance_s},
             {name: 'variation', color: '#d62728', ys: s.idle.variation_s}, {name: 'comm', color: '#2ca02c', ys: s.idle.comm_s}],
            [], {fromZero: true});
  const lastCause = s.idle.cause_rank.length ? s.idle.cause_rank[s.idle.cause_rank.length - 1] : -1;
  note('note-idle', !any(s.idle.inherent_s) ? 'no idle-time split reported yet' :
       lastCause >= 0 ? 'last step: variation waits caused by rank ' + lastCause : '');
  const ranks = s.peak_bytes.map((ys, g) => ({name: 'rank ' + (g % job.pp) + ' (dp ' + Math.floor(g / job.pp) + ')',
                                              color: RANK_COLORS[g % RANK_COLORS.length], ys, rank: g}));
  // A replica's rank shares its pipeline rank's budget: one dashed level per pipeline rank.
  const budgets = job.budget_bytes.slice(0, job.pp).map((b, r) => ({name: 'budget ' + r, color: RANK_COLORS[r % RANK_COLORS.length], y: b}))
      .filter(b => b.y > 0);
  lineChart(document.getElementById('chart-memory'), s.step, 'MiB', 1 / 1048576, ranks, budgets, {fromZero: true});
  note('note-memory', 'dashed: the plan\'s budget of each pipeline rank (dp replicas share it)');
  document.getElementById('calibration').textContent = cal
      ? 'Calibrated on ' + cal.steps_measured + ' measured steps: predicted step ' + (cal.predicted_step_s * 1e3).toFixed(2) +
        ' ms, bubble ' + cal.predicted_bubble_rate.toFixed(3) + ' (plan ' + (cal.plan_step_s * 1e3).toFixed(2) + ' ms, ' +
        job.predicted_bubble_rate.toFixed(3) + ')'
      : 'Not calibrated yet: predictions are the plan\'s (bubble ' + job.predicted_bubble_rate.toFixed(3) + ').';
  const rb = job.rebalance, box = document.getElementById('rebalance');
  box.hidden = !rb;
  document.getElementById('rebalance-text').textContent = rb
      ? 'layers per rank ' + rb.current_stage_layers.join(',') + ' \u2192 ' + rb.stage_layers.join(',') +
        (rb.schedule ? ' (' + rb.schedule + ')' : '') + ': predicted step ' + (rb.current_step_s * 1e3).toFixed(2) + ' ms \u2192 ' +
        (rb.proposed_step_s * 1e3).toFixed(2) + ' ms, gain ' + (rb.gain * 100).toFixed(1) + '%' + (rb.reason ? '. ' + rb.reason : '')
      : '';
}

function showJob(job) {
  document.getElementById('job-id').textContent = job.id;
  document.getElementById('job-state').textContent =
      job.state + (job.recovering ? ' (degraded: ' + job.recovering + ')' : '');
  const n = job.series.step.length;
  document.getElementById('job-summary').textContent =
      job.schedule + ', pp ' + job.pp + ', dp ' + job.dp + ', step ' + job.steps_done + '/' + job.steps +
      (n ? ', step time ' + (job.series.step_time_s[n - 1] * 1e3).toFixed(2) + ' ms, bubble measured ' +
           job.series.bubble[n - 1].toFixed(3) : '') +
      ', predicted ' + job.predicted_bubble_rate.toFixed(3) + ', probes checked ' + job.health.probes_checked + ' (replays ' + job.health.replays_checked + ')' +
      (job.recoveries ? ', lost ranks recovered in place ' + job.recoveries : '') +
      (job.restarts ? ', restarts ' + job.restarts : '') +
      (job.failure_cause ? ', failure: ' + job.failure_cause : '');
  showCurves(job);
  showTimeline(job);
  const ev = document.querySelector('#events tbody');
  clear(ev);
  for (const e of job.events.slice().reverse()) {
    const tr = document.createElement('tr');
    tr.className = 'event event-' + e.kind;
    cell(tr, e.kind, 'kind-' + e.kind); cell(tr, e.rank >= 0 ? e.rank + ' (dp ' + e.dp + ')' : '-');
    cell(tr, e.step >= 0 ? e.step : '-'); cell(tr, e.message);
    ev.appendChild(tr);
  }
  const mem = document.querySelector('#memory tbody');
  clear(mem);
  let maxBytes = 1;
  for (const m of job.memory) maxBytes = Math.max(maxBytes, m.peak_bytes, m.budget_bytes);
  for (const m of job.memory) {
    const tr = document.createElement('tr');
    const over = m.budget_bytes > 0 && m.peak_bytes > m.budget_bytes;
    cell(tr, m.rank + ' (dp ' + m.dp + ')'); cell(tr, mib(m.peak_bytes), over ? 'over' : ''); cell(tr, mib(m.budget_bytes));
    const td = cell(tr, '');
    const bar = document.createElement('span');
    bar.className = 'bar' + (over ? ' over' : '');
    bar.style.width = Math.round(200 * m.peak_bytes / maxBytes) + 'px';
    td.appendChild(bar);
    mem.appendChild(tr);
  }
  const sc = document.querySelector('#scores tbody');
  clear(sc);
  for (const s of job.scores) {
    const tr = document.createElement('tr');
    cell(tr, s.rank + ' (dp ' + s.dp + ')'); cell(tr, s.op);
    cell(tr, s.relative.toFixed(2), s.relative < 0.7 ? 'over' : ''); cell(tr, s.individual.toFixed(2), s.individual < 0.7 ? 'over' : '');
    sc.appendChild(tr);
  }
}

// The job's JSON holds every step record: a long job's is megabytes, so it is fetched less often
// as it grows (every second up to 2 MB, then a second more per 2 MB, at most every 15 s).
let shown = null, shownAt = 0, detailEveryMs = 1000;
async function refresh() {
  try {
    const [jobs, workers] = await Promise.all([get('/api/jobs'), get('/api/workers')]);
    showJobs(jobs);
    showWorkers(workers);
    if (selected !== null && (selected !== shown || Date.now() - shownAt >= detailEveryMs - 100)) {
      const r = await fetch('/api/job?id=' + encodeURIComponent(selected), {cache: 'no-store'});
      if (!r.ok) throw new Error('/api/job: HTTP ' + r.status);
      const text = await r.text();
      showJob(JSON.parse(text));
      shown = selected;
      shownAt = Date.now();
      detailEveryMs = 1000 * Math.min(15, Math.max(1, Math.ceil(text.length / 2e6)));
    }
    document.getElementById('updated').textContent = 'updated ' + new Date().toLocaleTimeString();
  } catch (err) {
    document.getElementById('updated').textContent = 'error: ' + err.message;
  }
}
refresh();
setInterval(refresh, 1000);
)JS";

}  // namespace pipecoord::coordinator::http
