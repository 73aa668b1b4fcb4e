// The /dashboard page: one self-contained HTML document (no CDN, nothing fetched but its own JSON),
// drawing inline SVG with a small script. Live mode polls /dashboard/data once a second; with
// ?run=NAME it loads that recorded run once from /dashboard/data?run=NAME. The data's shape is
// DashboardData (dashboard-data.ts).
//
// For tests and scripts the page reports on <body>: data-status is 'loading', then 'drawn' (or
// 'error' with the message in #error); data-requests is the run's request count and data-points
// the number of per-request points drawn in the latency scatter (circles with class 'req').
//
// The drawing code (CHARTS_SCRIPT) is separate from the page's own script so that the demo's
// side-by-side page (demo/page.ts) draws with the same charts. The scripts are plain ES2017
// without template literals, so this file can hold them in strings.

const STYLE = `
body { font: 13px system-ui, sans-serif; margin: 16px; color: #222; background: #fafafa; }
h1 { font-size: 18px; margin: 0 0 4px; }
#facts { color: #555; margin-bottom: 12px; }
#facts span { margin-right: 14px; }
#now span { margin-right: 14px; font-variant-numeric: tabular-nums; }
#error { color: #b00; white-space: pre-wrap; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(600px, 1fr)); gap: 12px; }
.panel { background: #fff; border: 1px solid #ddd; border-radius: 4px; padding: 8px; }
.panel h2 { font-size: 13px; margin: 0 0 4px; font-weight: 600; }
svg text { font-size: 10px; fill: #555; }
.legend span { margin-right: 10px; }
.legend i { display: inline-block; width: 10px; height: 10px; margin-right: 3px; vertical-align: -1px; }
a { color: #2563eb; }
`;

/**
 * The chart library, shared with the demo's side-by-side page (demo/page.ts): `headroomCharts(root,
 * prefix)` draws panels into `root`, their element ids prefixed so that two sets can share a page.
 * Each chart takes DashboardData (or its `series` part); `lines` and `latency` take an optional
 * fixed top of the y axis.
 */
export const CHARTS_SCRIPT = `
var headroomCharts = function (root, prefix) {
  var NS = 'http://www.w3.org/2000/svg';
  var W = 600, H = 200, L = 48, R = 10, T = 8, B = 22;
  var COLORS = { admitted: '#2563eb', finished: '#16a34a', refused: '#dc2626', outstanding: '#7c3aed', waiting: '#ea580c', running: '#0891b2', batch: '#334155', kv: '#a16207', ttft: '#0891b2', e2e: '#2563eb', late: '#ea580c', failed: '#dc2626', bound: '#2563eb', refusedBound: '#dc2626', budget: '#111' };
  function el(name, attrs, parent) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) e.setAttribute(k, String(attrs[k]));
    if (parent) parent.appendChild(e);
    return e;
  }
  function text(parent, x, y, s, anchor) {
    var t = el('text', { x: x, y: y, 'text-anchor': anchor || 'start' }, parent);
    t.textContent = s;
    return t;
  }
  function fmt(v) {
    if (v === null || v === undefined) return '–';
    if (Math.abs(v) >= 1000) return String(Math.round(v / 100) / 10) + 'k';
    return Math.abs(v) < 10 && Math.abs(v % 1) > 1e-9 ? String(Math.round(v * 100) / 100) : String(Math.round(v));
  }
  function panel(id, title, legend) {
    var p = document.getElementById(prefix + id);
    if (!p) {
      p = document.createElement('div');
      p.className = 'panel';
      p.id = prefix + id;
      root.appendChild(p);
    }
    p.innerHTML = '';
    var h = document.createElement('h2');
    h.textContent = title;
    p.appendChild(h);
    if (legend) {
      var lg = document.createElement('div');
      lg.className = 'legend';
      legend.forEach(function (k) {
        var s = document.createElement('span');
        var i = document.createElement('i');
        i.style.background = COLORS[k[0]];
        s.appendChild(i);
        s.appendChild(document.createTextNode(k[1]));
        lg.appendChild(s);
      });
      p.appendChild(lg);
    }
    var svg = el('svg', { width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, 'data-chart': id }, p);
    return svg;
  }
  /** A round tick step (1, 2 or 5 times a power of ten) giving at most five intervals up to v. */
  function step(v) {
    var raw = v / 5, p = Math.pow(10, Math.floor(Math.log10(raw))), m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }
  /** Axes for x in [0, xMax] and y in [0, yMax] (rounded up to a tick); returns the scales. */
  function axes(svg, xMax, yMax, xLabel) {
    xMax = xMax > 0 ? xMax : 1;
    yMax = yMax > 0 ? yMax : 1;
    var ys = step(yMax), xs = step(xMax);
    yMax = Math.ceil(yMax / ys - 1e-9) * ys;
    var sx = function (x) { return L + (x / xMax) * (W - L - R); };
    var sy = function (y) { return H - B - (Math.min(y, yMax) / yMax) * (H - T - B); };
    el('line', { x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: '#999' }, svg);
    el('line', { x1: L, y1: T, x2: L, y2: H - B, stroke: '#999' }, svg);
    for (var yv = 0; yv <= yMax + 1e-9; yv += ys) {
      el('line', { x1: L, y1: sy(yv), x2: W - R, y2: sy(yv), stroke: '#eee' }, svg);
      text(svg, L - 4, sy(yv) + 3, fmt(yv), 'end');
    }
    for (var xv = 0; xv <= xMax + 1e-9; xv += xs) text(svg, sx(xv), H - B + 12, fmt(xv), 'middle');
    text(svg, W - R, H - 2, xLabel || 's', 'end');
    return { x: sx, y: sy, yMax: yMax };
  }
  function max(xs) {
    var m = 0;
    for (var i = 0; i < xs.length; i++) if (xs[i] !== null && xs[i] > m) m = xs[i];
    return m;
  }
  function xEnd(d) {
    var ts = d.series.tS;
    return ts.length > 0 ? ts[ts.length - 1] + d.series.bucketS : 1;
  }
  function lines(id, title, d, named, yLabel, yTop) {
    var ts = d.series.tS;
    var svg = panel(id, title, named.map(function (n) { return [n[0], n[1]]; }));
    var yMax = 0;
    named.forEach(function (n) { yMax = Math.max(yMax, max(n[2])); });
    var s = axes(svg, xEnd(d), yTop || yMax * 1.1);
    if (yLabel) text(svg, 2, T + 8, yLabel);
    named.forEach(function (n) {
      var d = '', pen = false;
      for (var i = 0; i < ts.length; i++) {
        var v = n[2][i];
        if (v === null || v === undefined) { pen = false; continue; }
        d += (pen ? 'L' : 'M') + s.x(ts[i]).toFixed(1) + ',' + s.y(v).toFixed(1);
        pen = true;
      }
      el('path', { d: d, fill: 'none', stroke: COLORS[n[0]], 'stroke-width': 1.5, 'data-series': n[0] }, svg);
    });
  }
  /** A budget far above every point is named, not drawn: it would flatten the points to the axis. */
  function budgetLine(svg, s, xMax, ms, yMax) {
    if (ms === null || ms === undefined) return;
    if (ms > yMax) {
      text(svg, W - R - 2, T + 8, 'budget ' + fmt(ms) + ' ms (above)', 'end');
      return;
    }
    el('line', { x1: s.x(0), y1: s.y(ms), x2: s.x(xMax), y2: s.y(ms), stroke: COLORS.budget, 'stroke-dasharray': '4 3', 'data-budget': ms }, svg);
    text(svg, W - R - 2, s.y(ms) - 3, 'budget ' + fmt(ms) + ' ms', 'end');
  }
  /** yTop: a fixed top of the y axis, ms (so two engines side by side share a scale). */
  function latency(d, yTop) {
    var svg = panel('latency', 'Latency per request (by arrival): E2E and TTFT, ms' + (d.requests.length < d.numRequests - d.numRefused ? ' — ' + d.requests.length + ' shown' : ''),
      [['e2e', 'E2E'], ['ttft', 'TTFT'], ['late', 'E2E over budget'], ['failed', 'aborted / failed']]);
    var xMax = xEnd(d);
    var top = max(d.requests.map(function (r) { return r.e2eMs; }));
    var yMax = yTop || (d.sloMs !== null && d.sloMs <= 4 * top ? Math.max(top, d.sloMs) : top) * 1.1;
    var s = axes(svg, xMax, yMax);
    var n = 0;
    d.requests.forEach(function (r) {
      if (r.ttftMs !== null) el('circle', { cx: s.x(r.tS).toFixed(1), cy: s.y(r.ttftMs).toFixed(1), r: 1.6, fill: COLORS.ttft, class: 'ttft' }, svg);
    });
    d.requests.forEach(function (r) {
      var bad = r.outcome === 'abort' || r.outcome === 'error';
      var y = r.e2eMs === null ? yMax : r.e2eMs;
      var c = bad ? COLORS.failed : d.sloMs !== null && y > d.sloMs ? COLORS.late : COLORS.e2e;
      var dot = el('circle', { cx: s.x(r.tS).toFixed(1), cy: s.y(y).toFixed(1), r: 2.4, fill: c, class: 'req', 'data-id': r.id }, svg);
      el('title', {}, dot).textContent = r.id + ': ' + r.outcome + ', E2E ' + fmt(r.e2eMs) + ' ms, TTFT ' + fmt(r.ttftMs) + ' ms';
      n++;
    });
    budgetLine(svg, s, xMax, d.sloMs, s.yMax);
    return n;
  }
  function bounds(d) {
    var svg = panel('bound', 'Admission bound against the budget, ms (' + d.decisions.length + ' decisions)', [['bound', 'bound, admitted'], ['refusedBound', 'bound, refused'], ['budget', 'budget']]);
    var xMax = xEnd(d);
    var yMax = Math.max(max(d.decisions.map(function (x) { return x.boundMs; })), max(d.decisions.map(function (x) { return x.budgetMs; })), d.sloMs || 0) * 1.1;
    var s = axes(svg, xMax, yMax);
    d.decisions.forEach(function (x) {
      el('rect', { x: s.x(x.tS) - 1, y: s.y(x.budgetMs) - 0.5, width: 2, height: 1, fill: COLORS.budget }, svg);
      if (x.boundMs === null) return;
      el('circle', { cx: s.x(x.tS).toFixed(1), cy: s.y(x.boundMs).toFixed(1), r: 2, fill: x.admit ? COLORS.bound : COLORS.refusedBound, class: 'decision' }, svg);
    });
    budgetLine(svg, s, xMax, d.sloMs, s.yMax);
  }
  return { COLORS: COLORS, panel: panel, axes: axes, lines: lines, latency: latency, bounds: bounds, fmt: fmt, max: max, el: el, text: text };
};
`;

const SCRIPT = `
(function () {
  var charts = headroomCharts(document.getElementById('charts'), '');
  var lines = charts.lines, latency = charts.latency, bounds = charts.bounds;
  var params = new URLSearchParams(location.search);
  var run = params.get('run');
  var body = document.body;
  function draw(d) {
    document.getElementById('title').textContent = d.mode === 'run' ? 'Headroom — ' + (d.facts.source || 'run') + ' ' + d.title : 'Headroom — live engine';
    var facts = document.getElementById('facts');
    facts.innerHTML = '';
    Object.keys(d.facts).forEach(function (k) {
      var s = document.createElement('span');
      s.textContent = k + ': ' + d.facts[k];
      facts.appendChild(s);
    });
    var s2 = document.createElement('span');
    s2.textContent = 'requests: ' + d.numRequests + ' (' + d.numRefused + ' refused)';
    facts.appendChild(s2);
    var now = document.getElementById('now');
    now.innerHTML = '';
    if (d.now) Object.keys(d.now).forEach(function (k) {
      var s = document.createElement('span');
      s.textContent = k + ' ' + d.now[k];
      now.appendChild(s);
    });
    var x = d.series;
    lines('rates', 'Admitted, completed and refused per second', d, [['admitted', 'admitted', x.admitted], ['finished', 'completed', x.finished], ['refused', 'refused', x.refused]]);
    lines('queue', 'Outstanding, waiting and running requests', d, [['outstanding', 'outstanding', x.outstanding], ['waiting', 'waiting', x.waiting], ['running', 'running', x.running]]);
    if (x.batch.some(function (v) { return v !== null; }) || d.mode === 'live') lines('batch', 'Batch size (mean rows per step)', d, [['batch', 'rows per step', x.batch]]);
    if (x.kv.some(function (v) { return v !== null; })) lines('kv', 'KV blocks in use (share)', d, [['kv', 'KV use', x.kv]]);
    var n = latency(d);
    if (d.decisions.length > 0 || d.mode === 'live') bounds(d);
    body.setAttribute('data-requests', String(d.numRequests));
    body.setAttribute('data-points', String(n));
    body.setAttribute('data-status', 'drawn');
  }
  function fail(msg) {
    document.getElementById('error').textContent = msg;
    body.setAttribute('data-status', 'error');
  }
  function load() {
    var url = '/dashboard/data' + (run === null ? '' : '?run=' + encodeURIComponent(run));
    return fetch(url, { cache: 'no-store' }).then(function (r) {
      return r.json().then(function (j) {
        if (!r.ok) throw new Error((j && j.error && j.error.message) || ('HTTP ' + r.status));
        return j;
      });
    }).then(draw, function (e) { fail(String(e && e.message ? e.message : e)); });
  }
  function runs() {
    fetch('/dashboard/runs', { cache: 'no-store' }).then(function (r) { return r.ok ? r.json() : { runs: [] }; }).then(function (j) {
      var box = document.getElementById('runs');
      box.innerHTML = '';
      var live = document.createElement('a');
      live.href = '/dashboard';
      live.textContent = 'live';
      box.appendChild(live);
      j.runs.forEach(function (name) {
        box.appendChild(document.createTextNode(' · '));
        var a = document.createElement('a');
        a.href = '/dashboard?run=' + encodeURIComponent(name);
        a.textContent = name;
        box.appendChild(a);
      });
    }, function () {});
  }
  runs();
  if (run === null) {
    load();
    setInterval(load, 1000);
  } else {
    load();
  }
})();
`;

export const DASHBOARD_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Headroom dashboard</title>
<link rel="icon" href="data:,">
<style>${STYLE}</style>
</head>
<body data-status="loading">
<h1 id="title">Headroom</h1>
<div id="facts"></div>
<div id="now"></div>
<div id="error"></div>
<div class="grid" id="charts"></div>
<p>Runs: <span id="runs"></span></p>
<script>${CHARTS_SCRIPT}${SCRIPT}</script>
</body>
</html>
`;
