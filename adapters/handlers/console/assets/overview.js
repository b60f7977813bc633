// Outbox console: the overview, the page an operator lands on. It reads
// GET /v1/admin/overview and draws what an on-call person asks first: how
// many intents wait for a person and for how long, by provider account;
// episodes entering needs-human per hour over the last 7 days (an inline
// SVG drawn here, with its numbers in a table beside it); and each account's
// pause and breaker state. Loaded before console.js, whose helpers (h, api,
// fmtAge, fmtTime, ageOf, setView, notice, stopRefresh, refreshTimer) it
// uses at call time. Everything is built with textContent / attributes,
// never innerHTML.
'use strict';

const SVG_NS = 'http://www.w3.org/2000/svg';

function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function hourLabel(iso) {
  const d = new Date(iso);
  return d.toISOString().slice(5, 13).replace('T', ' ') + ':00Z';
}

// episodeChart draws one bar per hour (needs-human episodes). Readable
// without colour: bars are solid dark, the axis carries the scale and the
// days, every non-empty bar has its count above it and a <title>.
function episodeChart(hours) {
  const W = 860, H = 220, left = 40, right = 10, top = 22, bottom = 36;
  const n = Math.max(hours.length, 1);
  const max = Math.max(1, ...hours.map(x => x.needsHuman));
  const bw = (W - left - right) / n;
  const y = v => top + (H - top - bottom) * (1 - v / max);
  const svg = s('svg', { id: 'ov-chart', viewBox: '0 0 ' + W + ' ' + H, width: '100%', role: 'img',
    'aria-labelledby': 'ov-chart-title ov-chart-desc', class: 'chart' },
  s('title', { id: 'ov-chart-title' }, 'Episodes entering needs-human per hour, last 7 days'),
  s('desc', { id: 'ov-chart-desc' }, 'One bar per hour; the table beside the chart lists every hour with an episode.'));
  // axis and scale
  svg.append(s('line', { x1: left, y1: y(0), x2: W - right, y2: y(0), stroke: '#1b1f24', 'stroke-width': 1 }));
  svg.append(s('line', { x1: left, y1: top, x2: left, y2: y(0), stroke: '#1b1f24', 'stroke-width': 1 }));
  for (const v of [0, max]) {
    svg.append(s('text', { x: left - 6, y: y(v) + 4, 'text-anchor': 'end', 'font-size': 11, fill: '#1b1f24' }, String(v)));
    if (v) svg.append(s('line', { x1: left, y1: y(v), x2: W - right, y2: y(v), stroke: '#8c959f', 'stroke-dasharray': '3 3', 'stroke-width': 1 }));
  }
  hours.forEach((hr, i) => {
    const x = left + i * bw;
    const d = new Date(hr.start);
    if (d.getUTCHours() === 0) {
      svg.append(s('line', { x1: x, y1: y(0), x2: x, y2: y(0) + 5, stroke: '#1b1f24' }));
      svg.append(s('text', { x: x + 2, y: H - bottom + 18, 'font-size': 11, fill: '#1b1f24' }, d.toISOString().slice(5, 10)));
    }
    if (!hr.needsHuman) return;
    const g = s('g', { class: 'bar', 'data-hour': hr.start, 'data-count': hr.needsHuman },
      s('title', {}, hourLabel(hr.start) + ': ' + hr.needsHuman + ' entered needs-human'),
      s('rect', { x: x + 0.5, y: y(hr.needsHuman), width: Math.max(bw - 1, 2), height: y(0) - y(hr.needsHuman), fill: '#1b1f24' }),
      s('text', { x: x + bw / 2, y: y(hr.needsHuman) - 4, 'text-anchor': 'middle', 'font-size': 10, fill: '#1b1f24' }, String(hr.needsHuman)));
    svg.append(g);
  });
  svg.append(s('text', { x: left, y: H - 4, 'font-size': 11, fill: '#57606a' }, 'hour (UTC) →  the rightmost bar is the current hour'));
  return svg;
}

function episodeTable(hours) {
  const rows = hours.filter(x => x.needsHuman || x.failed || x.expired || x.breakerOpened).slice().reverse();
  if (!rows.length) return h('p', { class: 'muted', id: 'ov-episodes-table' }, 'No episode in the last 7 days.');
  return h('table', { id: 'ov-episodes-table' },
    h('caption', { class: 'muted' }, 'Hours with an episode, newest first'),
    h('thead', {}, h('tr', {}, ['Hour (UTC)', 'Needs-human', 'Failed', 'Expired', 'Breaker opened'].map(c => h('th', { scope: 'col' }, c)))),
    h('tbody', {}, rows.map(x => h('tr', { 'data-hour': x.start },
      h('td', {}, hourLabel(x.start)), h('td', {}, String(x.needsHuman)), h('td', {}, String(x.failed)),
      h('td', {}, String(x.expired)), h('td', {}, String(x.breakerOpened))))));
}

function paceText(p) { return p ? p.rate + ' per ' + p.per + (p.burst > 1 ? ' (burst ' + p.burst + ')' : '') : 'unpaced'; }

function queueLink(provider, account, text) {
  const q = new URLSearchParams({ provider, account });
  return h('a', { href: '#/queue?' + q.toString() }, text);
}

function intentLink(id) { return h('a', { href: '#/intents/' + encodeURIComponent(id), class: 'mono' }, id); }

function drawOverview(box, ov) {
  const nh = ov.needsHuman;
  const ep = ov.episodes;
  const oldest = nh.oldestSince ? fmtAge(ageOf(nh.oldestSince)) : '—';
  const summary = h('section', { 'aria-labelledby': 'h-ov-waiting' },
    h('h2', { id: 'h-ov-waiting' }, 'Waiting for a person'),
    h('p', { class: 'stat', role: 'status' },
      h('strong', { id: 'ov-total', 'data-total': nh.total }, String(nh.total) + (nh.truncated ? '+' : '')), ' intents in needs-human',
      ' · oldest waiting ', h('strong', { id: 'ov-oldest' }, oldest),
      nh.oldestIntent ? [' (', intentLink(nh.oldestIntent), ')'] : null),
    nh.truncated ? notice('warn', 'More than 1000 wait: the figures cover the oldest 1000.') : null,
    nh.byAccount.length ? h('table', { id: 'ov-needs-human' },
      h('thead', {}, h('tr', {}, ['Provider / account', 'Waiting', 'Oldest wait', 'Oldest intent'].map(c => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, nh.byAccount.map(g => h('tr', { 'data-account': g.provider + '/' + g.account, 'data-count': g.count },
        h('td', {}, queueLink(g.provider, g.account, g.provider + ' / ' + g.account)),
        h('td', {}, String(g.count)),
        h('td', {}, fmtAge(ageOf(g.oldestSince))),
        h('td', {}, intentLink(g.oldestIntent))))))
      : h('p', { class: 'muted', id: 'ov-needs-human' }, 'Nothing waits for a person.'));

  const t = ep.totals;
  const episodes = h('section', { 'aria-labelledby': 'h-ov-episodes' },
    h('h2', { id: 'h-ov-episodes' }, 'Episodes entering needs-human per hour, last 7 days'),
    ep.recorded ? null : notice('warn', 'Operator events are off in this deployment (no subscriber), so the ledger records no episode and the chart stays empty.', 'ov-not-recorded'),
    ep.truncated ? notice('warn', 'Very many episodes: the oldest hours are incomplete.') : null,
    h('p', { id: 'ov-episode-totals', 'data-needs-human': t.needsHuman },
      '7 days: ' + t.needsHuman + ' entered needs-human, ' + t.failed + ' failed, ' + t.expired + ' expired after an attempt, ' + t.breakerOpened + ' breaker opens.'),
    h('div', { class: 'chart-row' }, h('div', { class: 'chart-box' }, episodeChart(ep.hours)), h('div', { class: 'chart-table' }, episodeTable(ep.hours))),
    h('h3', {}, 'Latest episodes'),
    ep.recent.length ? h('table', { id: 'ov-recent' },
      h('thead', {}, h('tr', {}, ['At', 'Episode', 'Intent'].map(c => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, ep.recent.map(r => h('tr', { 'data-type': r.type, 'data-intent': r.intentId || '' },
        h('td', {}, fmtTime(r.at)), h('td', {}, r.type), h('td', {}, r.intentId ? intentLink(r.intentId) : '—')))))
      : h('p', { class: 'muted', id: 'ov-recent' }, 'None.'));

  const accounts = h('section', { 'aria-labelledby': 'h-ov-accounts' },
    h('h2', { id: 'h-ov-accounts' }, 'Provider accounts: pace, pause and breaker'),
    ov.pacing ? null : notice('warn', 'The account gate is off in this deployment: no pace, pause or breaker applies.'),
    ov.accounts.length ? h('table', { id: 'ov-accounts' },
      h('thead', {}, h('tr', {}, ['Provider / account', 'Pace', 'Paused', 'Breaker', 'Last change', 'Needs-human'].map(c => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, ov.accounts.map(a => h('tr', { 'data-account': a.provider + '/' + a.account, 'data-paused': a.paused ? 'yes' : 'no', 'data-breaker': a.breakerState },
        h('td', {}, a.provider + ' / ' + a.account),
        h('td', {}, paceText(a.pace)),
        h('td', {}, a.paused ? h('strong', {}, 'PAUSED until ' + fmtTime(a.pausedUntil)) : (a.pausedUntil ? 'no (last pause ended ' + fmtTime(a.pausedUntil) + ')' : 'no')),
        h('td', {}, a.breakerState === 'closed' ? 'closed' + (a.breaker.failures ? ' (' + a.breaker.failures + ' failures in a row)' : '')
          : h('strong', {}, a.breakerState.toUpperCase()), a.breaker.openUntil && a.breakerState !== 'closed' ? ' until ' + fmtTime(a.breaker.openUntil) : ''),
        h('td', {}, a.lastChange ? a.lastChange.kind + ' at ' + fmtTime(a.lastChange.at) + (a.lastChange.detail ? ': ' + a.lastChange.detail : '') : '—'),
        h('td', {}, a.needsHuman ? queueLink(a.provider, a.account, String(a.needsHuman)) : '0')))))
      : h('p', { class: 'muted', id: 'ov-accounts' }, 'No account has been paced, paused or opened yet.'),
    ov.accountsTruncated ? h('p', { class: 'muted' }, 'Only the first 100 accounts are shown.') : null);

  const outcomes = h('section', { 'aria-labelledby': 'h-ov-outcomes' },
    h('h2', { id: 'h-ov-outcomes' }, 'Delivery outcomes'),
    h('p', { id: 'ov-outcomes' }, 'Last 7 days, from the operator-event ledger: ' + t.failed + ' failed, ' + t.expired + ' expired after an attempt, ' + t.needsHuman + ' handed to a person.'),
    h('p', { class: 'muted' }, 'Delivered, retried and unknown-outcome counts per minute, and attempt latency by provider, are CloudWatch metrics (namespace Outbox) on the stack\'s dashboard: the store does not count deliveries, since that would cost a write per intent.'));

  box.replaceChildren(
    h('p', { class: 'muted', id: 'ov-generated' }, 'As of ' + fmtTime(ov.generatedAt) + ' · refreshes every 10 s'),
    summary, episodes, accounts, outcomes);
}

async function renderOverview() {
  stopRefresh();
  const box = h('div', { id: 'overview' });
  const msg = h('div', { id: 'overview-message' });
  setView('Overview', h('h1', {}, 'Overview'), msg, box);
  const load = async () => {
    try {
      const ov = await api('GET', '/v1/admin/overview');
      msg.replaceChildren();
      drawOverview(box, ov);
    } catch (e) {
      msg.replaceChildren(notice('error', e.describe ? e.describe() : String(e)));
    }
  };
  await load();
  refreshTimer = setInterval(() => { if (!document.hidden) load(); }, 10000);
}
