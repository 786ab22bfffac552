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

function showJob(job) {
  document.getElementById('job-id').textContent = job.id;
  document.getElementById('job-state').textContent = job.state;
  const last = job.steps_recent.length ? job.steps_recent[job.steps_recent.length - 1] : null;
  document.getElementById('job-summary').textContent =
      job.schedule + ', pp ' + job.pp + ', dp ' + job.dp + ', step ' + job.steps_done + '/' + job.steps +
      (last ? ', step time ' + (last.step_time_s * 1e3).toFixed(2) + ' ms, bubble measured ' + last.bubble.toFixed(3) : '') +
      ', predicted ' + job.predicted_bubble_rate.toFixed(3) + ', probes checked ' + job.health.probes_checked +
      (job.failure_cause ? ', failure: ' + job.failure_cause : '');
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
    cell(tr, s.relative.toFixed(2), s.relative < 0.75 ? 'over' : ''); cell(tr, s.individual.toFixed(2), s.individual < 0.75 ? 'over' : '');
    sc.appendChild(tr);
  }
}

async function refresh() {
  try {
    const [jobs, workers] = await Promise.all([get('/api/jobs'), get('/api/workers')]);
    showJobs(jobs);
    showWorkers(workers);
    if (selected !== null) showJob(await get('/api/job?id=' + encodeURIComponent(selected)));
    document.getElementById('updated').textContent = 'updated ' + new Date().toLocaleTimeString();
  } catch (err) {
    document.getElementById('updated').textContent = 'error: ' + err.message;
  }
}
refresh();
setInterval(refresh, 1000);
)JS";

}  // namespace pipecoord::coordinator::http
