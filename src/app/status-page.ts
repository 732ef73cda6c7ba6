import { randomBytes } from 'node:crypto';
import type { HttpResponseInit } from '@azure/functions';

/**
 * The status page: one HTML document with its style and script inline, so it needs no build
 * step, no CDN and no file beside the app. It reads the same API routes as any client, from the
 * same prefix it was served under, passing on the `code` (function key) it was opened with.
 *
 * Every value from the hub is written with `textContent`, never as HTML: job names, failure
 * reasons and instance names are data. The policy header allows only this response's script.
 */
export function statusPageResponse(): HttpResponseInit {
  const nonce = randomBytes(16).toString('base64');
  return {
    status: 200,
    body: PAGE.replace('__NONCE__', nonce),
    headers: {
      'content-type': 'text/html; charset=utf-8',
      'cache-control': 'no-store',
      // The page's address carries the function key: never send it on as a referrer.
      'referrer-policy': 'no-referrer',
      'x-content-type-options': 'nosniff',
      'content-security-policy': `default-src 'none'; script-src 'nonce-${nonce}'; style-src 'unsafe-inline'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`,
    },
  };
}

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Baton status</title>
<style>
  :root { --ok: #1a7f37; --bad: #cf222e; --warn: #9a6700; --muted: #656d76; --line: #d0d7de; --bar: #2f81f7; }
  body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1f2328; background: #f6f8fa; }
  header { background: #24292f; color: #fff; padding: 12px 20px; display: flex; gap: 16px; align-items: baseline; flex-wrap: wrap; }
  header h1 { font-size: 18px; margin: 0; }
  header .muted { color: #afb8c1; }
  main { padding: 16px 20px; display: grid; gap: 16px; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); }
  section { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 12px 16px; }
  section.wide { grid-column: 1 / -1; }
  h2 { font-size: 15px; margin: 0 0 8px; }
  table { border-collapse: collapse; width: 100%; }
  th, td { text-align: left; padding: 4px 8px 4px 0; border-bottom: 1px solid #eaeef2; vertical-align: top; }
  th { color: var(--muted); font-weight: 600; }
  .muted { color: var(--muted); }
  .big { font-size: 20px; font-weight: 600; }
  .state-succeeded { color: var(--ok); } .state-failed, .state-timed-out { color: var(--bad); } .state-cancelled { color: var(--warn); }
  .bar { height: 10px; background: #eaeef2; border-radius: 5px; overflow: hidden; margin: 4px 0; }
  .bar > div { height: 100%; background: var(--bar); transition: width .4s; }
  .bar > div.failing { background: linear-gradient(90deg, var(--bar), var(--bad)); }
  #error { color: var(--bad); }
  tr.clickable { cursor: pointer; } tr.clickable:hover { background: #f6f8fa; }
  code { font-size: 12px; }
  .occs { display: flex; gap: 3px; flex-wrap: wrap; }
  .occ { width: 14px; height: 14px; border-radius: 3px; display: inline-block; }
  .occ-started { background: var(--ok); } .occ-late { background: var(--warn); }
  .occ-skipped { background: repeating-linear-gradient(135deg, #d0d7de 0 3px, #fff 3px 6px); border: 1px solid #afb8c1; }
  .occ-missed { background: var(--bad); }
</style>
</head>
<body>
<header>
  <h1>Baton</h1>
  <span>hub <b id="hub">…</b></span>
  <span class="muted" id="updated">connecting…</span>
  <span id="error" role="alert"></span>
</header>
<main>
  <section>
    <h2>Leader</h2>
    <div class="big" id="leader">…</div>
    <div class="muted" id="leader-detail"></div>
  </section>
  <section>
    <h2>Leadership changes</h2>
    <table><thead><tr><th>when</th><th>new leader</th><th>epoch</th><th>why</th></tr></thead><tbody id="timeline"></tbody></table>
    <div class="muted" id="timeline-empty">none recorded yet</div>
  </section>
  <section class="wide">
    <h2>Open runs</h2>
    <div id="open-runs"></div>
    <div class="muted" id="open-empty">no run is open</div>
  </section>
  <section class="wide">
    <h2>Schedules</h2>
    <table><thead><tr><th>job</th><th>recent occurrences, oldest to newest</th><th>start lag: last</th><th>max</th><th>next, on its zone's clock</th></tr></thead><tbody id="schedules"></tbody></table>
    <div class="muted" id="schedules-empty">no scheduled occurrence recorded yet</div>
    <div class="muted">green: started within a second of its time; amber: later; striped: skipped; red: missed. Hover for when and why.</div>
  </section>
  <section class="wide">
    <h2>Recent runs</h2>
    <table><thead><tr><th>run</th><th>state</th><th>items</th><th>failed</th><th>started</th><th>took</th></tr></thead><tbody id="recent"></tbody></table>
  </section>
  <section class="wide" id="failures-section" hidden>
    <h2>Failures of <span id="failures-run"></span></h2>
    <table><thead><tr><th>item</th><th>attempts</th><th>reason</th></tr></thead><tbody id="failures"></tbody></table>
    <div class="muted" id="failures-more"></div>
  </section>
</main>
<script nonce="__NONCE__">
(() => {
  const params = new URLSearchParams(location.search);
  const code = params.get('code');
  const every = Math.max(500, Number(params.get('refresh')) || 2000);
  const base = location.pathname.replace(/\\/page\\/?$/, '');
  const api = (path, query = {}) => {
    const q = new URLSearchParams(query);
    if (code) q.set('code', code);
    const s = q.toString();
    return base + '/' + path + (s ? '?' + s : '');
  };
  const $ = (id) => document.getElementById(id);
  const el = (tag, text, cls) => { const e = document.createElement(tag); if (text !== undefined) e.textContent = text; if (cls) e.className = cls; return e; };
  const row = (cells) => { const tr = el('tr'); for (const c of cells) { const td = el('td'); if (c instanceof Node) td.append(c); else td.textContent = c; tr.append(td); } return tr; };
  const duration = (ms) => {
    if (ms == null || !isFinite(ms)) return '—';
    const s = Math.max(0, Math.round(ms / 1000));
    if (s < 60) return s + ' s';
    const m = Math.floor(s / 60); if (m < 60) return m + ' min ' + (s % 60) + ' s';
    return Math.floor(m / 60) + ' h ' + (m % 60) + ' min';
  };
  const time = (iso) => iso ? new Date(iso).toLocaleTimeString() : '—';
  const lag = (ms) => ms == null ? '—' : ms < 1000 ? Math.max(0, Math.round(ms)) + ' ms' : ms < 60000 ? (ms / 1000).toFixed(1) + ' s' : duration(ms);
  /** A start later than this is shown as late. */
  const LATE_MS = 1000;
  /** Samples of each open run's done count, for items/s over the last 15 s. */
  const samples = new Map();
  let selected = null;
  let lastRuns = 0;
  let lastOpen = '';

  function rate(run, now) {
    const list = samples.get(run.runId) || [];
    list.push({ t: now, done: run.done });
    while (list.length > 2 && now - list[0].t > 15000) list.shift();
    samples.set(run.runId, list);
    const first = list[0], last = list[list.length - 1];
    if (last.t - first.t >= 1000 && last.done > first.done) return (last.done - first.done) / ((last.t - first.t) / 1000);
    const since = now - Date.parse(run.createdAt);
    return since > 1000 && run.done > 0 ? run.done / (since / 1000) : null;
  }

  const rankText = (l) => (l.version !== null ? ' · version ' + l.version + ' · priority ' + l.priority : '');

  function renderLeader(status) {
    const leader = status.leader;
    if (leader) {
      $('leader').textContent = leader.identity || 'unnamed holder';
      const since = leader.since || leader.acquiredAt;
      $('leader-detail').textContent = 'epoch ' + leader.epoch + rankText(leader) + ' · leading for ' + duration(since ? Date.now() - Date.parse(since) : leader.ledForMs);
    } else if (status.restingUntil) {
      // An idle leader returned until it is next needed: not a missing leader.
      $('leader').textContent = 'resting';
      $('leader-detail').textContent = 'until ' + new Date(status.restingUntil).toLocaleTimeString() + ' · nothing open or due before then; a trigger wakes it' + (status.lastLeader ? ' · last ' + status.lastLeader.identity + ', epoch ' + status.lastLeader.epoch : '');
    } else if (status.lastLeader) {
      $('leader').textContent = status.lastLeader.identity;
      $('leader-detail').textContent = 'epoch ' + status.lastLeader.epoch + rankText(status.lastLeader) + ' · between terms (an idle leader frees the lease until the next tick)';
    } else {
      $('leader').textContent = 'no leader yet';
      $('leader-detail').textContent = '';
    }
    const body = $('timeline');
    body.replaceChildren(...status.leadershipChanges.map((c) =>
      row([time(c.at), c.holder, String(c.epoch), c.why])));
    $('timeline-empty').hidden = status.leadershipChanges.length > 0;
  }

  function renderOpen(status, now) {
    const box = $('open-runs');
    const open = status.activeRuns;
    for (const id of [...samples.keys()]) if (!open.some((r) => r.runId === id)) samples.delete(id);
    box.replaceChildren(...open.map((run) => {
      const div = el('div'); div.className = 'run'; div.dataset.run = run.runId;
      const planned = run.counters.planned;
      const pct = planned > 0 ? Math.min(100, (100 * run.done) / planned) : 0;
      const r = rate(run, now);
      const left = planned - run.done;
      const title = el('div'); title.append(el('b', run.runId), el('span', ' ' + run.state, 'muted'));
      const bar = el('div', undefined, 'bar'); const fill = el('div'); fill.style.width = pct.toFixed(1) + '%';
      if (run.counters.failed > 0) fill.className = 'failing';
      bar.append(fill);
      const line = el('div', undefined, 'muted');
      line.append(el('span', run.done + ' / ' + (planned || '?') + ' items', 'progress'),
        el('span', ' · ' + run.counters.failed + ' failed'),
        el('span', ' · ' + (r ? r.toFixed(1) + ' items/s' : '— items/s'), 'rate'),
        el('span', ' · ETA ' + (r && left > 0 ? duration((left / r) * 1000) : '—'), 'eta'));
      div.append(title, bar, line);
      // An instance of an older version (a rolling deploy) may answer without the list.
      const waiting = Array.isArray(run.outstanding) ? run.outstanding : [];
      if (waiting.length > 0) {
        const w = el('div', undefined, 'muted waiting');
        w.append(el('span', 'oldest waiting: '));
        w.append(...waiting.map((o, k) => el('span', (k ? ', ' : '') + 'message ' + o.message + ' (' +
          (o.count > 1 ? 'items ' + o.first + '–' + (o.first + o.count - 1) : 'item ' + o.first) + ') ' +
          duration(o.ageMs != null ? o.ageMs : Date.now() - Date.parse(o.since)), 'outstanding')));
        div.append(w);
      }
      if (run.counters.failed > 0) div.append(el('div', 'click for its failures so far', 'muted'));
      div.addEventListener('click', () => showFailures(run.runId));
      return div;
    }));
    $('open-empty').hidden = open.length > 0;
  }

  /** Each job's recent occurrences as a strip a person reads at a glance, with its lags. */
  function renderSchedules(status) {
    // An instance of an older version (a rolling deploy) may answer the poll without occurrences.
    const jobs = status.jobs.filter((j) => Array.isArray(j.occurrences) && j.occurrences.length > 0);
    $('schedules').replaceChildren(...jobs.map((j) => {
      const strip = el('div', undefined, 'occs');
      strip.dataset.job = j.job;
      for (const o of [...j.occurrences].reverse()) {
        const late = o.outcome === 'started' && o.startLagMs > LATE_MS;
        const box = el('span', undefined, 'occ occ-' + (late ? 'late' : o.outcome));
        box.dataset.outcome = o.outcome;
        box.title = time(o.occurrence) + ' · ' + (o.outcome === 'started' ? 'started ' + lag(o.startLagMs) + ' after its time' : o.outcome + (o.reason ? ': ' + o.reason : ''));
        strip.append(box);
      }
      const lags = j.occurrences.filter((o) => o.startLagMs !== null).map((o) => o.startLagMs);
      // The schedule as the leader read it (older versions send none): its zone's wall clock, UTC on hover.
      const next = j.schedule && j.schedule.next[0];
      const when = el('span', next ? next.local.replace('T', ' ') : '—', 'next-run');
      if (next) when.title = j.schedule.expression + ' in ' + j.schedule.timeZone + (j.schedule.jitterSeconds ? ', jitter ' + j.schedule.jitterSeconds + ' s' : '') + ' · ' + next.at;
      return row([j.job, strip, el('span', lags.length ? lag(lags[0]) : '—', 'last-lag'), lags.length ? lag(Math.max(...lags)) : '—', when]);
    }));
    $('schedules-empty').hidden = jobs.length > 0;
  }

  /** The last page of recent runs; open ones are shown with the status's fresher counters. */
  let recent = [];
  function renderRecent(active) {
    const fresh = new Map(active.map((r) => [r.runId, r]));
    $('recent').replaceChildren(...recent.map((listed) => {
      const run = fresh.get(listed.runId) || listed;
      const took = run.endedAt ? Date.parse(run.endedAt) - Date.parse(run.createdAt) : null;
      const tr = row([run.runId, el('span', run.state, 'state-' + run.state), run.done + ' / ' + run.counters.planned, String(run.counters.failed), time(run.createdAt), duration(took)]);
      tr.className = 'clickable'; tr.dataset.run = run.runId;
      tr.title = 'show this run\\'s failures';
      tr.addEventListener('click', () => showFailures(run.runId));
      return tr;
    }));
  }

  async function get(path, query) {
    const res = await fetch(api(path, query), { headers: { accept: 'application/json' } });
    const body = await res.json().catch(() => ({}));
    if (!res.ok) throw new Error(path + ': ' + (body.error || res.status + ' ' + res.statusText));
    return body;
  }

  async function showFailures(runId) {
    selected = runId;
    $('failures-section').hidden = false;
    $('failures-run').textContent = runId;
    const [job, ...rest] = runId.split('/');
    try {
      const page = await get('runs/' + encodeURIComponent(job) + '/' + encodeURIComponent(rest.join('/')) + '/failures', { limit: '100' });
      if (selected !== runId) return;
      $('failures').replaceChildren(...page.failures.map((f) => row([String(f.item), String(f.attempts), f.reason])));
      $('failures-more').textContent = page.failures.length === 0 ? 'no failures' : page.next !== null ? 'the first 100 are shown; baton failures ' + runId + ' lists them all' : '';
    } catch (err) {
      $('failures-more').textContent = String(err.message || err);
    }
  }

  async function refresh() {
    const now = Date.now();
    try {
      const status = await get('status');
      $('hub').textContent = status.hub;
      renderLeader(status);
      renderOpen(status, now);
      renderSchedules(status);
      // Listing runs reads every run record: less often than the status, and at once when a run opens or ends.
      const open = status.activeRuns.map((r) => r.runId).join(' ');
      if (now - lastRuns >= Math.max(every, 5000) || open !== lastOpen) {
        recent = (await get('runs', { limit: '10' })).runs;
        lastRuns = now;
        lastOpen = open;
      }
      renderRecent(status.activeRuns);
      $('error').textContent = '';
      $('updated').textContent = 'updated ' + new Date().toLocaleTimeString() + ' · every ' + every / 1000 + ' s';
    } catch (err) {
      $('error').textContent = String(err.message || err);
    } finally {
      setTimeout(refresh, every);
    }
  }
  refresh();
})();
</script>
</body>
</html>
`;
