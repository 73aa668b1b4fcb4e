// The demo's one page: the two engines side by side, live. Self-contained (no CDN), drawn with the
// dashboard's own chart code (CHARTS_SCRIPT from obs/dashboard-page.ts); it polls /demo/data once a
// second (DemoData, demo-server.ts) and stops polling once the run is over.
//
// What makes the story readable at a glance: both columns share every y axis (a collapsing engine's
// latency would otherwise look as flat as a healthy one's), the x axis is seconds since the load
// started on both, and each column opens with its verdict and goodput in large type.
//
// For tests and scripts: <body data-status> is 'loading', then 'drawn' (or 'error' with #error);
// each column <div class="side" id="side-off|side-on"> carries data-arrivals, data-refused,
// data-retry-after and data-points (E2E points drawn) once drawn; <body data-phase> is the run's phase.
//
// The script is plain ES2017 without template literals, so this file can hold it in one.
import { CHARTS_SCRIPT } from '../obs/dashboard-page.ts';

const STYLE = `
body { font: 13px system-ui, sans-serif; margin: 16px; color: #222; background: #fafafa; }
h1 { font-size: 20px; margin: 0 0 6px; }
#story { max-width: 1250px; color: #333; margin: 0 0 8px; line-height: 1.4; }
#run { color: #555; margin-bottom: 10px; font-variant-numeric: tabular-nums; }
#error { color: #b00; white-space: pre-wrap; }
.sides { display: grid; grid-template-columns: repeat(2, 620px); gap: 14px; }
.side h2 { font-size: 16px; margin: 0 0 4px; }
.verdict { font-size: 15px; font-weight: 600; padding: 6px 8px; border-radius: 4px; margin-bottom: 6px; }
.verdict.bad { background: #fee2e2; color: #991b1b; }
.verdict.good { background: #dcfce7; color: #166534; }
.verdict.warn { background: #fef3c7; color: #92400e; }
.verdict.wait { background: #e5e7eb; color: #374151; }
.cards { display: grid; grid-template-columns: repeat(3, 1fr); gap: 6px; margin-bottom: 8px; }
.card { background: #fff; border: 1px solid #ddd; border-radius: 4px; padding: 4px 8px; }
.card b { display: block; font-size: 20px; font-variant-numeric: tabular-nums; }
.card span { color: #555; font-size: 11px; }
.panel { background: #fff; border: 1px solid #ddd; border-radius: 4px; padding: 6px; margin-bottom: 8px; }
.panel h2 { font-size: 12px; margin: 0 0 2px; font-weight: 600; }
svg text { font-size: 10px; fill: #555; }
.legend span { margin-right: 10px; }
.legend i { display: inline-block; width: 10px; height: 10px; margin-right: 3px; vertical-align: -1px; }
`;

const SCRIPT = `
(function () {
  var body = document.body;
  var timer = null;
  function setText(id, s) { document.getElementById(id).textContent = s; }
  function secs(ms) {
    if (ms === null) return '–';
    if (ms === 'timeout') return 'gave up';
    return ms >= 10000 ? String(Math.round(ms / 1000)) + ' s' : (Math.round(ms / 100) / 10).toFixed(1) + ' s';
  }
  function pct(x) { return x === null ? '–' : String(Math.round(x * 1000) / 10) + '%'; }
  function range(n) { var a = []; for (var i = 0; i < n; i++) a.push(i); return a; }
  function pad(xs, n, fill) { var a = xs.slice(0, n); while (a.length < n) a.push(fill); return a; }
  /** Means over w-second buckets of a per-second series (m buckets; null past the data). */
  function coarse(xs, w, m) {
    return range(m).map(function (i) {
      if (i * w >= xs.length) return null;
      var sum = 0;
      for (var k = i * w; k < (i + 1) * w; k++) sum += xs[k] || 0;
      return Math.round((sum / w) * 100) / 100;
    });
  }
  function top(xss) { var m = 0; xss.forEach(function (xs) { xs.forEach(function (v) { if (v !== null && v > m) m = v; }); }); return m; }
  /** The engine's live window re-based to seconds since the load started (offsetS: load second of its first bucket, ±0.5 s). */
  function engineView(d, offsetS, n) {
    var ser = d.series, out = { waiting: [], running: [], outstanding: [] };
    var shift = Math.round(offsetS);
    for (var k = 0; k < ser.tS.length; k++) {
      var s = k + shift;
      if (s < 0 || s >= n) continue;
      out.waiting[s] = ser.waiting[k];
      out.running[s] = ser.running[k];
      out.outstanding[s] = ser.outstanding[k];
    }
    ['waiting', 'running', 'outstanding'].forEach(function (key) { out[key] = range(n).map(function (i) { return out[key][i] === undefined ? null : out[key][i]; }); });
    // A point within a second before the load's start is the clock's rounding, not an earlier request.
    var reqs = d.requests.filter(function (r) { return r.tS + offsetS >= -1; }).map(function (r) { return { id: r.id, tS: Math.max(0, r.tS + offsetS), ttftMs: r.ttftMs, e2eMs: r.e2eMs, outcome: r.outcome }; });
    // The engine's own totals also count the capacity probe's requests (before the load): not shown.
    return { sloMs: d.sloMs, numRequests: reqs.length, numRefused: 0, requests: reqs, series: { bucketS: 1, tS: range(n), waiting: out.waiting, running: out.running, outstanding: out.outstanding } };
  }
  function card(box, value, label) {
    var c = document.createElement('div');
    c.className = 'card';
    var b = document.createElement('b');
    b.textContent = value;
    var s = document.createElement('span');
    s.textContent = label;
    c.appendChild(b);
    c.appendChild(s);
    box.appendChild(c);
  }
  /** Green: the admitted requests inside the SLO at the engine's default guarantee (95%); amber: 80-95%; red: below. */
  function verdict(side, j) {
    var c = side.client;
    if (c.numAdmittedDone < 5) return ['wait', 'warming up: ' + c.numAdmittedDone + ' admitted requests answered'];
    var p99 = c.p99E2eMs === 'timeout' ? '> ' + j.timeoutS + ' s, clients gave up' : secs(c.p99E2eMs);
    var share = pct(c.admittedInSlo) + ' of admitted requests inside the ' + secs(j.sloMs) + ' SLO (p99 E2E ' + p99 + ')';
    if (c.admittedInSlo >= 0.95) return ['good', 'holds the SLO: ' + share];
    if (c.admittedInSlo >= 0.8) return ['warn', 'slipping: ' + share];
    return ['bad', 'collapsed: ' + share];
  }
  function drawSide(key, side, j, n, tops) {
    var col = document.getElementById('side-' + key);
    col.innerHTML = '';
    var h = document.createElement('h2');
    h.textContent = side.name + (side.engine === null ? ' (engine data unavailable: ' + side.engineError + ')' : '');
    col.appendChild(h);
    var v = verdict(side, j);
    var vd = document.createElement('div');
    vd.className = 'verdict ' + v[0];
    vd.textContent = v[1];
    col.appendChild(vd);
    var c = side.client;
    var cards = document.createElement('div');
    cards.className = 'cards';
    card(cards, String(c.goodputRps), 'goodput, req/s inside the SLO (' + c.numGood + ' requests)');
    card(cards, pct(c.admittedInSlo), 'of admitted requests inside the SLO');
    card(cards, c.p99E2eMs === 'timeout' ? '> ' + j.timeoutS + ' s' : secs(c.p99E2eMs), 'p99 E2E of admitted (p50 ' + secs(c.p50E2eMs) + ')');
    card(cards, String(c.numSent), 'arrivals sent');
    card(cards, String(c.numRefused), 'refused at once: 503, ' + c.numRetryAfter + ' with Retry-After' + (c.retryAfterMedianS === null ? '' : ' (median ' + c.retryAfterMedianS + ' s)'));
    card(cards, String(c.numTimedOut + c.numLate), 'late: ' + c.numLate + ' past the SLO, ' + c.numTimedOut + ' given up after ' + j.timeoutS + ' s');
    col.appendChild(cards);
    var charts = headroomCharts(col, key + '-');
    charts.COLORS.arrivals = '#94a3b8';
    charts.COLORS.good = '#16a34a';
    charts.COLORS.lateDone = '#ea580c';
    var cs = c.series, w = tops.rateBucketS, m = Math.ceil(n / w);
    var cd = { series: { bucketS: w, tS: range(m).map(function (i) { return i * w; }) } };
    var per = 'Requests per second' + (w > 1 ? ' (' + w + ' s means)' : '') + ': arrivals, answered inside the SLO, late or given up, refused';
    charts.lines('rates', per, cd, [['arrivals', 'arrivals', coarse(cs.arrivals, w, m)], ['good', 'inside the SLO', coarse(cs.good, w, m)], ['lateDone', 'late / gave up', coarse(cs.late, w, m)], ['refused', 'refused (503)', coarse(cs.refused, w, m)]], null, tops.rate);
    var points = 0;
    if (side.engine !== null) {
      var ev = engineView(side.engine, side.engineOffsetS, n);
      charts.lines('queue', 'Engine: outstanding, waiting and running requests', ev, [['outstanding', 'outstanding', ev.series.outstanding], ['waiting', 'waiting', ev.series.waiting], ['running', 'running', ev.series.running]], null, tops.queue);
      points = charts.latency(ev, tops.latency);
    }
    col.setAttribute('data-arrivals', String(c.numSent));
    col.setAttribute('data-refused', String(c.numRefused));
    col.setAttribute('data-retry-after', String(c.numRetryAfter));
    col.setAttribute('data-points', String(points));
  }
  function draw(j) {
    var n = Math.max(1, Math.ceil(Math.max(j.elapsedS, j.durationS)));
    var when = j.phase === 'running' ? 'load running: ' + Math.round(j.elapsedS) + ' s of ' + j.durationS + ' s'
      : j.phase === 'finishing' ? 'arrivals over (' + j.durationS + ' s); waiting for the last answers: ' + Math.round(j.elapsedS) + ' s'
      : j.phase === 'done' ? 'done: ' + j.durationS + ' s of arrivals, the last answered at ' + Math.round(j.elapsedS) + ' s'
      : 'stopped at ' + Math.round(j.elapsedS) + ' s';
    setText('run', when + ' · ' + j.rate + ' req/s Poisson' + (j.capacityRps === null ? '' : ' (twice the ' + j.capacityRps + ' req/s the unmanaged engine answered in a ' + j.probeS + ' s probe)') + ', seed ' + j.seed + ', ' + j.workload + ' workload · SLO ' + secs(j.sloMs) + ' E2E · ' + j.runner + ' runner, ' + j.model);
    var keys = ['off', 'on'];
    var views = j.sides.map(function (s) { return s.engine === null ? null : engineView(s.engine, s.engineOffsetS, n); });
    // Poisson counts per second are noise at a few requests per second: longer runs draw 5 s means.
    var w = n > 60 ? 5 : 1, m = Math.ceil(n / w);
    var tops = {
      rateBucketS: w,
      rate: 1.1 * top(j.sides.map(function (s) { var x = s.client.series; return [x.arrivals, x.good, x.late, x.refused].reduce(function (a, xs) { return a.concat(coarse(xs, w, m)); }, []); })),
      queue: 1.1 * top(views.map(function (v) { return v === null ? [] : v.series.outstanding.concat(v.series.waiting, v.series.running); })),
      latency: 1.1 * Math.max(1.1 * j.sloMs, top(views.map(function (v) { return v === null ? [] : v.requests.map(function (r) { return r.e2eMs; }); })))
    };
    j.sides.forEach(function (s, i) { drawSide(keys[i], s, j, n, tops); });
    body.setAttribute('data-phase', j.phase);
    body.setAttribute('data-status', 'drawn');
    if (j.phase === 'done' && timer !== null) { clearInterval(timer); timer = null; }
  }
  function fail(msg) {
    document.getElementById('error').textContent = msg;
    body.setAttribute('data-status', 'error');
  }
  function load() {
    return fetch('/demo/data', { cache: 'no-store' }).then(function (r) {
      if (!r.ok) throw new Error('HTTP ' + r.status);
      return r.json();
    }).then(function (j) { document.getElementById('error').textContent = ''; draw(j); }).catch(function (e) { fail(String(e && e.message ? e.message : e)); });
  }
  load();
  timer = setInterval(load, 1000);
})();
`;

/** The page, with the story paragraph the terminal prints too. */
export function demoPage(story: string): string {
  const esc = story.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Headroom demo: the same overload, admission off and on</title>
<link rel="icon" href="data:,">
<style>${STYLE}</style>
</head>
<body data-status="loading">
<h1>Headroom demo — the same overload, admission off (left) and on (right)</h1>
<p id="story">${esc}</p>
<div id="run"></div>
<div id="error"></div>
<div class="sides"><div class="side" id="side-off"></div><div class="side" id="side-on"></div></div>
<script>${CHARTS_SCRIPT}${SCRIPT}</script>
</body>
</html>
`;
}
