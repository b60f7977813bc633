// Outbox operator console. Plain JavaScript, no dependencies, served from
// this origin under a strict Content-Security-Policy. The bearer token lives
// in sessionStorage only: never in a URL, a cookie or a log. Everything shown
// is built with textContent (never innerHTML), so no intent field can inject
// markup.
'use strict';

const TOKEN_KEY = 'outbox.operatorToken';
const view = document.getElementById('view');
const state = { me: null, bulk: null };

// ---------- small helpers ----------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function token() { return sessionStorage.getItem(TOKEN_KEY) || ''; }

function newKey() {
  if (window.crypto && crypto.randomUUID) return 'console-' + crypto.randomUUID();
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  return 'console-' + Array.from(b, x => x.toString(16).padStart(2, '0')).join('');
}

class APIError extends Error {
  constructor(status, code, message, field) {
    super(message);
    this.status = status; this.code = code; this.field = field;
  }
  describe() { return 'Refused (' + this.status + ' ' + (this.code || 'error') + '): ' + this.message; }
}

async function api(method, path, body, headers) {
  const init = { method, headers: Object.assign({ Authorization: 'Bearer ' + token() }, headers || {}),
    cache: 'no-store', credentials: 'omit', referrerPolicy: 'no-referrer' };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let r;
  try {
    r = await fetch(path, init);
  } catch (e) {
    throw new APIError(0, 'network', 'the API could not be reached: ' + e.message);
  }
  let data = null;
  try { data = await r.json(); } catch (e) { data = null; }
  if (!r.ok) {
    const err = (data && data.error) || {};
    throw new APIError(r.status, err.code, err.message || ('HTTP ' + r.status), err.field);
  }
  return data;
}

function fmtTime(s) {
  if (!s || s.startsWith('0001-')) return '—';
  const d = new Date(s);
  return d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

function fmtAge(ms) {
  if (!(ms >= 0)) return '—';
  const s = Math.floor(ms / 1000);
  if (s < 60) return s + 's';
  const m = Math.floor(s / 60);
  if (m < 60) return m + 'm ' + (s % 60) + 's';
  const hrs = Math.floor(m / 60);
  if (hrs < 48) return hrs + 'h ' + (m % 60) + 'm';
  return Math.floor(hrs / 24) + 'd ' + (hrs % 24) + 'h';
}

function ageOf(since) { return since ? Date.now() - new Date(since).getTime() : NaN; }

function badge(status) { return h('span', { class: 'badge ' + status, 'data-status': status }, status); }

function notice(kind, text, id) { return h('p', { class: 'notice ' + kind, role: kind === 'error' ? 'alert' : 'status', id }, text); }

function field(labelText, input, hint) {
  return h('div', { class: 'field' }, h('label', { for: input.id }, labelText), input, hint ? h('small', { class: 'muted' }, hint) : null);
}

function setView(title, ...nodes) {
  document.title = title + ' · Outbox console';
  view.replaceChildren(...nodes);
  for (const a of document.querySelectorAll('nav a')) {
    a.toggleAttribute('aria-current', location.hash.startsWith(a.getAttribute('href')));
    if (a.hasAttribute('aria-current')) a.setAttribute('aria-current', 'page');
  }
}

function parseHash() {
  const raw = location.hash.replace(/^#/, '') || '/overview';
  const [path, query] = raw.split('?');
  return { path, params: new URLSearchParams(query || '') };
}

let refreshTimer = null;
function stopRefresh() { if (refreshTimer) { clearInterval(refreshTimer); refreshTimer = null; } }

// ---------- sign in ----------

async function whoami() {
  state.me = await api('GET', '/v1/admin/whoami');
  document.getElementById('whoami').textContent = 'Signed in as ' + state.me.name + ' (' + state.me.kind + ')';
  document.getElementById('signout').hidden = false;
  document.getElementById('nav').hidden = false;
  return state.me;
}

function signOut() {
  sessionStorage.removeItem(TOKEN_KEY);
  state.me = null;
  document.getElementById('whoami').textContent = '';
  document.getElementById('signout').hidden = true;
  document.getElementById('nav').hidden = true;
  location.hash = '#/signin';
}

// signInError says why a token was refused: the gateway's own 403 (no
// error code) means the token is not recognised at all.
function signInError(e) {
  if (!(e instanceof APIError)) return String(e);
  if (e.status === 401 || (e.status === 403 && !e.code)) return 'This token is not recognised (the API answered ' + e.status + '). Use the operator token `make run` printed (OUTBOX_OPERATOR_TOKEN) or one from `outboxctl token --kind operator`.';
  if (e.status === 403) return 'This token is recognised but may not use the console (403 ' + e.code + '): ' + e.message + '. Sign in with an operator or orchestrator token.';
  return e.describe();
}

function renderSignIn(message) {
  stopRefresh();
  const input = h('input', { type: 'password', id: 'token', name: 'token', autocomplete: 'off', required: true, spellcheck: 'false' });
  const out = h('div', { id: 'signin-result' });
  if (message) out.append(message);
  const form = h('form', { id: 'signin-form', onsubmit: async ev => {
    ev.preventDefault();
    const t = input.value.trim();
    if (!t) { out.replaceChildren(notice('error', 'Enter the operator token.', 'signin-error')); return; }
    sessionStorage.setItem(TOKEN_KEY, t);
    input.value = '';
    try {
      await whoami();
      location.hash = '#/overview';
    } catch (e) {
      sessionStorage.removeItem(TOKEN_KEY);
      state.me = null;
      out.replaceChildren(notice('error', signInError(e), 'signin-error'));
    }
  } },
  field('Operator token', input, 'Kept in this tab only (sessionStorage); sent as a bearer token to the admin API.'),
  h('button', { type: 'submit', class: 'primary', id: 'signin' }, 'Sign in'));
  setView('Sign in', h('h1', {}, 'Sign in'), form, out);
  input.focus();
}

// ---------- queue ----------

// Every status GET /v1/admin/intents lists (final intents are read by id).
const STATUSES = ['needs-human', 'unknown-outcome', 'retryable-failure', 'pending', 'in-flight'];

function filterInputs(params, idPrefix) {
  const mk = (name, label, hint) => field(label, h('input', { type: 'text', id: idPrefix + name, name, value: params.get(name) || '' }), hint);
  const age = h('input', { type: 'number', id: idPrefix + 'minAgeMinutes', name: 'minAgeMinutes', min: 0, step: 1, value: params.get('minAgeMinutes') || '' });
  return [mk('provider', 'Provider'), mk('account', 'Account'), mk('bot', 'Bot'), field('Waited at least (minutes)', age)];
}

function filterQuery(params) {
  const q = new URLSearchParams();
  for (const k of ['provider', 'account', 'bot']) if (params.get(k)) q.set(k, params.get(k));
  const m = parseInt(params.get('minAgeMinutes') || '', 10);
  if (m > 0) q.set('minAgeSeconds', String(m * 60));
  return q;
}

async function renderQueue(params) {
  stopRefresh();
  const status = STATUSES.includes(params.get('status')) ? params.get('status') : 'needs-human';
  const sel = h('select', { id: 'f-status', name: 'status' }, STATUSES.map(s => h('option', { value: s, selected: s === status }, s)));
  const form = h('form', { class: 'filters', id: 'queue-filters', onsubmit: ev => {
    ev.preventDefault();
    const q = new URLSearchParams(new FormData(form));
    for (const [k, v] of [...q]) if (!v) q.delete(k);
    location.hash = '#/queue?' + q.toString();
  } }, field('Status', sel), filterInputs(params, 'f-'), h('button', { type: 'submit', id: 'apply-filters' }, 'Apply filters'));

  const stat = h('p', { class: 'stat', id: 'oldest', role: 'status' });
  const tbody = h('tbody', { id: 'queue-rows' });
  const table = h('table', { id: 'queue' },
    h('caption', { class: 'muted' }, status === 'needs-human' ? 'Intents waiting for a decision, oldest first' : status + ' intents, handled by the outbox (read-only)'),
    h('thead', {}, h('tr', {}, ['Waiting', 'Intent', 'Bot', 'Provider / account', 'Action', 'Target', 'Status', 'Reason', 'Attempts', 'Recommendation'].map(c => h('th', { scope: 'col' }, c)))),
    tbody);
  const pager = h('div', { class: 'pager' });
  const msg = h('div', { id: 'queue-message' });
  // Intents that left the queue because a provider's status callback
  // settled them (issue 48): said here, so nobody wonders where they went.
  const settled = h('ul', { id: 'settled-by-callback' });
  let shown = null;
  // Open any intent (whatever its status) by its id.
  const openID = h('input', { type: 'text', id: 'open-id', name: 'id', spellcheck: 'false', placeholder: 'it_…' });
  const open = h('form', { class: 'filters', id: 'open-form', onsubmit: ev => {
    ev.preventDefault();
    if (openID.value.trim()) location.hash = '#/intents/' + encodeURIComponent(openID.value.trim());
  } }, field('Open intent by id', openID), h('button', { type: 'submit', id: 'open-intent' }, 'Open'));
  setView('Queue', h('h1', {}, 'Queue'), open, form, stat, msg, settled, table, pager);

  const cursor = params.get('cursor') || '';
  const q = filterQuery(params);
  q.set('status', status);
  q.set('limit', params.get('limit') || '25');
  if (cursor) q.set('cursor', cursor);

  const load = async () => {
    let page;
    try {
      page = await api('GET', '/v1/admin/intents?' + q.toString());
    } catch (e) {
      msg.replaceChildren(notice('error', e.describe ? e.describe() : String(e)));
      return;
    }
    msg.replaceChildren();
    const items = (page.items || []).slice().sort((a, b) => new Date(a.waitingSince) - new Date(b.waitingSince));
    if (status === 'needs-human') {
      const now = new Set(items.map(it => it.id));
      for (const id of shown ? [...shown].filter(id => !now.has(id)) : []) {
        api('GET', '/v1/admin/intents/' + encodeURIComponent(id)).then(inn => {
          const note = settledByProvider(inn);
          if (note && !settled.querySelector('[data-settled="' + CSS.escape(id) + '"]')) {
            settled.append(h('li', { 'data-settled': id }, h('a', { href: '#/intents/' + encodeURIComponent(id), class: 'mono' }, id), ' left the queue: ' + note.textContent));
          }
        }).catch(() => {});
      }
      shown = now;
    }
    tbody.replaceChildren(...items.map(it => h('tr', { 'data-intent': it.id, 'data-status': it.status },
      h('td', {}, fmtAge(ageOf(it.waitingSince))),
      h('td', { class: 'mono' }, h('a', { href: '#/intents/' + encodeURIComponent(it.id) }, it.id)),
      h('td', {}, it.bot),
      h('td', {}, it.provider + ' / ' + it.account),
      h('td', {}, it.action),
      h('td', { class: 'mono' }, it.target),
      h('td', {}, badge(it.status)),
      h('td', {}, it.statusReason || '', callbackNote(it.lastAttempt)),
      h('td', {}, String(it.attemptCount)),
      h('td', {}, it.recommended ? 'recommended: ' + it.recommended : '—'))));
    if (!items.length) tbody.append(h('tr', {}, h('td', { colspan: 10, class: 'muted' }, 'Nothing on this page matches.')));
    const oldest = items.length ? Math.max(...items.map(it => ageOf(it.waitingSince))) : NaN;
    stat.textContent = items.length ? 'Oldest waiting on this page: ' + fmtAge(oldest) + ' · ' + items.length + ' shown' : 'Nothing waiting here.';
    pager.replaceChildren(...[ // replaceChildren would show a null as the text "null"
      cursor ? h('a', { href: '#/queue?' + withoutCursor(params), id: 'first-page' }, '⟵ First page') : null,
      page.nextCursor ? h('a', { href: '#/queue?' + withCursor(params, page.nextCursor), id: 'next-page' }, 'Next page ⟶') : h('span', { class: 'muted' }, 'End of list'),
      h('button', { type: 'button', id: 'refresh', onclick: load }, 'Refresh')].filter(Boolean));
  };
  await load();
  // The first page refreshes itself, so a new needs-human intent shows up
  // without a click.
  if (!cursor) refreshTimer = setInterval(() => { if (!document.hidden) load(); }, 3000);
}

function withCursor(params, c) { const p = new URLSearchParams(params); p.set('cursor', c); return p.toString(); }
function withoutCursor(params) { const p = new URLSearchParams(params); p.delete('cursor'); return p.toString(); }

// ---------- intent ----------

const DECISIONS = [
  ['reconcile', 'Reconcile', 'Ask the provider again (where it offers a lookup) and route the intent by what it says.'],
  ['retry', 'Retry', 'Send again under the same idempotency key. Where the provider cannot deduplicate this may cause a second effect.'],
  ['accept-success', 'Accept success', 'Record that the effect happened (e.g. the customer saw it); optionally with the provider\'s external id.'],
  ['abandon', 'Abandon', 'Stop: nothing more is sent. The intent ends abandoned.'],
];

function dlOf(pairs) {
  return h('dl', {}, pairs.map(([k, v]) => [h('dt', {}, k), h('dd', { class: typeof v === 'string' && v.length > 24 ? 'mono' : '' }, v === undefined || v === null || v === '' ? '—' : v)]));
}

function attemptRows(list) {
  return list.map(a => {
    const ev = a.evidence || {};
    const ck = a.checks || {};
    const started = new Date(a.startedAt).getTime(), ended = new Date(a.endedAt).getTime();
    const extra = Object.entries(ev.extra || {}).map(([k, v]) => k + '=' + v).join(' ');
    return h('tr', { 'data-attempt': a.n, 'data-trigger': a.trigger },
      h('td', {}, String(a.n)),
      h('td', {}, a.trigger),
      h('td', {}, fmtTime(a.startedAt)),
      h('td', {}, fmtTime(a.endedAt)),
      h('td', {}, ended >= started ? (ended - started) + ' ms' : '—'),
      h('td', {}, h('strong', {}, a.result || '—'), a.externalId ? h('div', { class: 'mono' }, 'external id ' + a.externalId) : null),
      h('td', {}, ck.grantVersion ? 'v' + ck.grantVersion : '—', ck.sourceRevision ? ' · source rev ' + ck.sourceRevision : '', ck.result ? h('div', { class: 'muted' }, ck.result + (ck.reason ? ': ' + ck.reason : '')) : null),
      h('td', { class: 'evidence' }, ev.httpStatus ? 'HTTP ' + ev.httpStatus + ' ' : '', ev.providerCode ? '[' + ev.providerCode + '] ' : '', ev.detail || '', ev.retryAfter ? ' retry-after ' + ev.retryAfter : '', extra ? h('div', { class: 'mono' }, extra) : null));
  });
}

// statusLines: one line per provider callback bound to the intent, in the
// words a person deciding needs: what the provider reported, and when.
function statusLines(list) {
  const lines = list.filter(a => a.trigger === 'webhook').map(a => {
    const code = (a.evidence || {}).providerCode || '';
    const at = fmtTime(a.startedAt);
    if (a.result === 'provider-failure') {
      return h('li', { 'data-callback': 'failure' }, 'failure reported by the provider: ' + code + ' at ' + at + ' (evidence for the person deciding: the provider tried; it does not prove that nothing happened)');
    }
    if (a.result === 'provider-status' || a.result === 'provider-ack') {
      return h('li', { 'data-callback': 'status' }, 'delivery status from the provider: ' + (code || 'sent') + ' at ' + at + (a.externalId ? ' (' + a.externalId + ')' : ''));
    }
    return h('li', { 'data-callback': 'echo' }, 'the provider echoed the message at ' + at);
  });
  return lines.length ? h('ul', { id: 'provider-statuses' }, lines) : null;
}

// callbackNote: a provider's failure report as the latest evidence of a
// waiting intent (the provider tried; it does not prove nothing happened).
function callbackNote(a) {
  if (!a || a.trigger !== 'webhook' || a.result !== 'provider-failure') return null;
  return h('div', { class: 'muted', 'data-callback': 'failure' }, 'provider reported: ' + ((a.evidence || {}).providerCode || 'failure') + ' at ' + fmtTime(a.startedAt));
}

// settledByProvider: the status change a provider callback made (from
// needs-human or unknown-outcome to succeeded), for the status line.
function settledByProvider(inn) {
  if (inn.status !== 'succeeded' || !/webhook .* proves the effect/.test(inn.statusReason || '')) return null;
  const proof = (inn.attempts || []).find(a => a.trigger === 'webhook' && (a.result === 'provider-status' || a.result === 'provider-ack'));
  return h('p', { class: 'notice info', id: 'settled-by-provider', role: 'status' },
    'Settled by a provider status callback' + (proof ? ' (' + ((proof.evidence || {}).providerCode || 'sent') + ' at ' + fmtTime(proof.startedAt) + ')' : '') +
    (/without a human decision/.test(inn.statusReason) ? ' while it waited for a person: no decision was needed.' : '.'));
}

function attemptTable(id, list, empty) {
  if (!list.length) return h('p', { class: 'muted', id }, empty);
  return h('table', { id },
    h('thead', {}, h('tr', {}, ['#', 'Trigger', 'Started', 'Ended', 'Latency', 'Result / classification', 'Grant version · source revision seen', 'Evidence'].map(c => h('th', { scope: 'col' }, c)))),
    h('tbody', {}, attemptRows(list)));
}

async function renderIntent(id) {
  stopRefresh();
  const box = h('div', { id: 'intent' });
  setView('Intent ' + id, h('p', {}, h('a', { href: '#/queue' }, '⟵ Queue')), box);
  let inn;
  try {
    inn = await api('GET', '/v1/admin/intents/' + encodeURIComponent(id));
  } catch (e) {
    box.replaceChildren(notice('error', e.describe ? e.describe() : String(e)));
    return;
  }
  if (inn.pruned) {
    // Issue 27: past its retention window only the tombstone is left; the
    // full record (attempts, decisions, webhook bindings) is in the archive.
    box.replaceChildren(
      h('h1', {}, 'Intent ', h('span', { class: 'mono', id: 'intent-id' }, inn.id)),
      h('p', { id: 'intent-status' }, badge(inn.status), ' pruned after its retention window'),
      h('section', { 'aria-labelledby': 'h-archived' }, h('h2', { id: 'h-archived' }, 'Archived'),
        dlOf([['Bot', inn.bot], ['Final status', inn.status], ['External id', inn.externalId || ''], ['Ended', fmtTime(inn.pruned.endedAt)],
          ['Payload hash', inn.payloadHash || ''], ['Archived record', inn.pruned.archive ? inn.pruned.archive + ' (archive bucket)' : 'not archived (archive off)']])));
    return;
  }
  const attempts = inn.attempts || [];
  const res = inn.resolutions || [];
  const recs = res.filter(r => r.recommendationOnly);
  const decisions = res.filter(r => !r.recommendationOnly);
  // The decide section is held, not looked up: a render whose intent read
  // returned after the operator moved on fills a detached box.
  const section = h('section', { 'aria-labelledby': 'h-decide', id: 'decide-section' }, h('h2', { id: 'h-decide' }, 'Decide'));
  box.replaceChildren(
    h('h1', {}, 'Intent ', h('span', { class: 'mono', id: 'intent-id' }, inn.id)),
    h('p', { id: 'intent-status' }, badge(inn.status), ' ', inn.statusReason || ''),
    settledByProvider(inn) || '', // a null would show as "null"
    h('div', { class: 'cols' },
      h('section', { 'aria-labelledby': 'h-identity' }, h('h2', { id: 'h-identity' }, 'Identity'),
        dlOf([['Bot', botLink(inn.bot)], ['Idempotency key', inn.idempotencyKey], ['Intent id', inn.id], ['Trace id', inn.traceParent ? h('span', { id: 'trace-id' }, inn.traceParent.split('-')[1] || '') : ''], ['Kind', inn.kind], ['Created', fmtTime(inn.createdAt)], ['Updated', fmtTime(inn.updatedAt)], ['Deadline', inn.deadline ? fmtTime(inn.deadline) : '']])),
      h('section', { 'aria-labelledby': 'h-delivery' }, h('h2', { id: 'h-delivery' }, 'Delivery'),
        dlOf([['Provider', inn.provider], ['Account', inn.account], ['Action', inn.action], ['Target', inn.target],
          ['Payload hash', inn.payloadHash], ['Grant', inn.grant ? inn.grant.id + ' v' + inn.grant.version : ''],
          ['Source', inn.source ? inn.source.id + ' rev ' + inn.source.revision : ''], ['External id', inn.externalId || ''], ['Attempts', String(inn.attemptCount)]]))),
    h('section', { 'aria-labelledby': 'h-attempts' }, h('h2', { id: 'h-attempts' }, 'Attempt timeline'),
      attemptTable('attempts', attempts, 'No attempts yet.')),
    h('section', { 'aria-labelledby': 'h-reconcile' }, h('h2', { id: 'h-reconcile' }, 'Reconciliation results'),
      attemptTable('reconciliations', attempts.filter(a => a.trigger === 'reconcile'), 'No reconciliation with the provider yet.')),
    h('section', { 'aria-labelledby': 'h-webhooks' }, h('h2', { id: 'h-webhooks' }, 'Provider callbacks: statuses, failures and echoes'),
      statusLines(attempts),
      attemptTable('webhooks', attempts.filter(a => a.trigger === 'webhook'), 'No provider webhook bound to this intent.')),
    h('section', { 'aria-labelledby': 'h-recs' }, h('h2', { id: 'h-recs' }, 'Recommendations'),
      recs.length ? recs.map(r => h('div', { class: 'recommendation', 'data-recommendation': r.decision },
        h('strong', {}, 'Recommendation (not a decision): ' + r.decision), ' by ' + r.by + ' (' + r.byKind + ') at ' + fmtTime(r.at),
        h('div', {}, r.reason || ''))) : h('p', { class: 'muted' }, 'No recommendation.')),
    h('section', { 'aria-labelledby': 'h-decisions' }, h('h2', { id: 'h-decisions' }, 'Earlier decisions'),
      decisions.length ? h('table', { id: 'decisions' },
        h('thead', {}, h('tr', {}, ['At', 'By', 'Decision', 'Reason', 'Duplicate risk accepted'].map(c => h('th', { scope: 'col' }, c)))),
        h('tbody', {}, decisions.map(r => h('tr', {}, h('td', {}, fmtTime(r.at)), h('td', {}, r.by), h('td', {}, r.decision), h('td', {}, r.reason || ''), h('td', {}, r.duplicateRiskAccepted ? 'yes' : 'no')))))
        : h('p', { class: 'muted' }, 'No decision yet.')),
    section);
  if (!state.me || !state.me.canDecide) {
    section.append(h('p', { class: 'muted', id: 'no-controls' }, 'Only operators decide. Orchestrators can see and make recommendations, not decisions.'));
  } else if (inn.status !== 'needs-human') {
    section.append(h('p', { class: 'muted', id: 'not-waiting' }, 'This intent is ' + inn.status + ': it is not waiting for a decision.'));
    if (['pending', 'in-flight', 'retryable-failure', 'unknown-outcome'].includes(inn.status)) watch(inn.id);
  } else {
    let risk = null;
    try { risk = await api('GET', '/v1/admin/intents/' + encodeURIComponent(inn.id) + '/retry-risk'); } catch (e) { risk = null; }
    section.append(decideForm(inn, risk));
  }
}

// onIntentPage: the operator is still on this intent's page.
function onIntentPage(id) { return parseHash().path === '/intents/' + id; }

// watch refreshes an intent page while a decision is being carried out.
function watch(id) {
  let n = 0;
  refreshTimer = setInterval(async () => {
    if (!onIntentPage(id) || ++n > 120) { stopRefresh(); return; }
    try {
      const inn = await api('GET', '/v1/admin/intents/' + encodeURIComponent(id));
      if (!['pending', 'in-flight', 'retryable-failure', 'unknown-outcome'].includes(inn.status)) { stopRefresh(); renderIntent(id); }
    } catch (e) { /* keep the page as it is */ }
  }, 1000);
}

function decideForm(inn, risk) {
  let key = newKey(); // one key per decision: a double click decides once
  const out = h('div', { id: 'decision-result', 'aria-live': 'polite' });
  const reason = h('textarea', { id: 'reason', name: 'reason', required: true });
  const ext = h('input', { type: 'text', id: 'external-id', name: 'externalId' });
  const extField = field('Provider\'s external id (optional)', ext);
  extField.hidden = true;
  const confirm = h('input', { type: 'checkbox', id: 'confirm-duplicate', name: 'confirmDuplicate' });
  const riskBox = h('div', { id: 'duplicate-risk', class: 'notice warn', hidden: true },
    h('p', {}, h('strong', {}, 'Duplicate risk: '), risk ? risk.why : 'the provider\'s deduplication could not be checked; a retry may cause a second effect.'),
    h('label', { class: 'inline', for: 'confirm-duplicate' }, confirm, ' I understand this retry may cause a second effect at the provider, and I want it.'));
  const hasRisk = !risk || risk.duplicateRisk;
  const radios = DECISIONS.map(([v, label, help]) => h('div', { class: 'choice' },
    h('input', { type: 'radio', name: 'decision', id: 'decision-' + v, value: v, required: true }),
    ' ', h('label', { class: 'inline', for: 'decision-' + v }, label), h('small', {}, help)));
  const submit = h('button', { type: 'submit', class: 'primary', id: 'decide' }, 'Record decision');
  const clearStale = () => { if (out.querySelector('#decision-error')) out.replaceChildren(); };
  const form = h('form', { id: 'decide-form', novalidate: true, oninput: clearStale, onchange: () => {
    clearStale();
    const d = (form.querySelector('input[name=decision]:checked') || {}).value;
    extField.hidden = d !== 'accept-success';
    riskBox.hidden = !(d === 'retry' && hasRisk);
  }, onsubmit: async ev => {
    ev.preventDefault();
    const d = (form.querySelector('input[name=decision]:checked') || {}).value;
    if (!d) { out.replaceChildren(notice('error', 'Choose a decision.', 'decision-error')); return; }
    if (!reason.value.trim()) { out.replaceChildren(notice('error', 'A reason is required for every decision.', 'decision-error')); reason.focus(); return; }
    if (d === 'retry' && hasRisk && !confirm.checked) {
      out.replaceChildren(notice('error', 'Confirm the duplicate risk to retry at a provider that cannot deduplicate.', 'decision-error'));
      confirm.focus();
      return;
    }
    const body = { decision: d, reason: reason.value.trim() };
    if (d === 'accept-success' && ext.value.trim()) body.externalId = ext.value.trim();
    if (d === 'retry') body.acceptDuplicateRisk = hasRisk ? confirm.checked : true;
    submit.disabled = true;
    out.replaceChildren(notice('ok', 'Recording…'));
    try {
      const res = await api('POST', '/v1/admin/intents/' + encodeURIComponent(inn.id) + '/resolution', body, { 'Idempotency-Key': key });
      key = newKey();
      out.replaceChildren(notice('ok', 'Decision recorded: ' + d + '. The intent is now ' + res.status + '.', 'decision-ok'));
      // Re-read the intent shortly, unless the operator has moved on.
      setTimeout(() => { if (onIntentPage(inn.id)) renderIntent(inn.id); }, 800);
    } catch (e) {
      // A refusal changed nothing; a new attempt is a new decision.
      key = newKey();
      submit.disabled = false;
      out.replaceChildren(notice('error', e.describe ? e.describe() : String(e), 'decision-error'));
    }
  } },
  h('fieldset', {}, h('legend', {}, 'Decision'), radios),
  riskBox,
  extField,
  field('Reason (required; recorded with your name)', reason),
  submit);
  return h('div', {}, form, out);
}

// ---------- bulk ----------

async function collectMatches(filter, status, cap) {
  const ids = [];
  let cursor = '';
  for (;;) {
    const q = new URLSearchParams(filter);
    q.set('status', status);
    q.set('limit', '100');
    if (cursor) q.set('cursor', cursor);
    const page = await api('GET', '/v1/admin/intents?' + q.toString());
    for (const it of page.items || []) {
      ids.push(it.id);
      if (ids.length > cap) return { ids: ids.slice(0, cap), more: true };
    }
    if (!page.nextCursor) return { ids, more: false };
    cursor = page.nextCursor;
  }
}

function renderBulk(params) {
  stopRefresh();
  if (!state.me || !state.me.canDecide) {
    setView('Bulk decisions', h('h1', {}, 'Bulk decisions'), h('p', { class: 'muted', id: 'no-controls' }, 'Only operators decide.'));
    return;
  }
  const form = h('form', { id: 'bulk-form', novalidate: true });
  // No default: abandon is final, so the operator always chooses.
  const decision = h('select', { id: 'bulk-decision', name: 'decision', required: true },
    h('option', { value: '', selected: true }, '— choose a decision —'), DECISIONS.map(([v, label]) => h('option', { value: v }, label)));
  const reason = h('textarea', { id: 'bulk-reason', name: 'reason', required: true });
  const cap = h('input', { type: 'number', id: 'bulk-cap', name: 'cap', min: 1, max: 500, value: 100 });
  const confirm = h('input', { type: 'checkbox', id: 'bulk-confirm-duplicate' });
  const out = h('div', { id: 'bulk-result', 'aria-live': 'polite' });
  const preview = h('button', { type: 'button', id: 'bulk-preview' }, 'Preview count');
  const run = h('button', { type: 'submit', class: 'primary', id: 'bulk-run', disabled: true }, 'Run');
  let previewed = null;
  const filterOf = () => filterQuery(new URLSearchParams(new FormData(form)));
  form.append(
    h('fieldset', {}, h('legend', {}, 'Which intents (needs-human)'), h('div', { class: 'filters' }, filterInputs(params, 'b-'))),
    field('Decision', decision),
    h('div', { class: 'notice warn' }, h('label', { class: 'inline', for: 'bulk-confirm-duplicate' }, confirm,
      ' For a retry: also retry intents at providers that cannot deduplicate (each may get a second effect). Without this, those are refused one by one.')),
    field('Reason (required; recorded on every intent)', reason),
    field('Cap (at most this many intents; 500 max)', cap),
    h('div', { class: 'pager' }, preview, run));
  // Changing which intents match (not the decision or the reason) needs a new preview.
  form.addEventListener('input', ev => { if (ev.target === decision || ev.target === reason || ev.target === confirm) return; run.disabled = true; previewed = null; });
  preview.addEventListener('click', async () => {
    const c = Math.min(Math.max(parseInt(cap.value, 10) || 100, 1), 500);
    out.replaceChildren(notice('ok', 'Counting…'));
    try {
      const m = await collectMatches(filterOf(), 'needs-human', c);
      previewed = { filter: filterOf().toString(), cap: c };
      out.replaceChildren(notice(m.more ? 'warn' : 'ok', m.ids.length + (m.more ? '+' : '') + ' intents match' + (m.more ? ' (more than the cap of ' + c + '; only ' + c + ' would be decided)' : '') + '.', 'bulk-count'));
      run.disabled = m.ids.length === 0;
    } catch (e) {
      out.replaceChildren(notice('error', e.describe ? e.describe() : String(e)));
    }
  });
  form.addEventListener('submit', ev => {
    ev.preventDefault();
    if (!previewed) { out.replaceChildren(notice('error', 'Preview the count first.', 'bulk-error')); return; }
    if (!decision.value) { out.replaceChildren(notice('error', 'Choose a decision.', 'bulk-error')); decision.focus(); return; }
    if (!reason.value.trim()) { out.replaceChildren(notice('error', 'A reason is required.', 'bulk-error')); return; }
    if (state.bulk && state.bulk.running) { out.replaceChildren(notice('error', 'A bulk run is already in progress.', 'bulk-error')); return; }
    startBulk({ filter: previewed.filter, cap: previewed.cap, decision: decision.value, reason: reason.value.trim(), confirm: confirm.checked });
    run.disabled = true;
  });
  setView('Bulk decisions', h('h1', {}, 'Bulk decisions'),
    h('p', {}, 'One decision for every needs-human intent that matches the filter, up to the cap. Each intent is decided on its own, by the same rules and refusals as a single decision, under its own Idempotency-Key. The run continues while you use other pages of the console in this tab.'),
    form, out, h('div', { id: 'bulk-progress-box' }));
  drawBulk();
}

// startBulk runs in the background of this tab: collect the matching ids,
// then decide each one (4 at a time), recording every result.
async function startBulk(job) {
  const run = { id: newKey(), job, running: true, total: 0, done: 0, ok: 0, refused: 0, results: [], error: '' };
  state.bulk = run;
  drawBulk();
  try {
    const m = await collectMatches(new URLSearchParams(job.filter), 'needs-human', job.cap);
    run.total = m.ids.length;
    drawBulk();
    const queue = m.ids.slice();
    const worker = async () => {
      for (let id = queue.shift(); id; id = queue.shift()) {
        const body = { decision: job.decision, reason: job.reason };
        if (job.decision === 'retry') body.acceptDuplicateRisk = job.confirm;
        try {
          const res = await api('POST', '/v1/admin/intents/' + encodeURIComponent(id) + '/resolution', body, { 'Idempotency-Key': 'bulk-' + run.id + '-' + id });
          run.ok++;
          run.results.push({ id, ok: true, text: res.status });
        } catch (e) {
          run.refused++;
          run.results.push({ id, ok: false, text: e.describe ? e.describe() : String(e) });
        }
        run.done++;
        drawBulk();
      }
    };
    await Promise.all([worker(), worker(), worker(), worker()]);
  } catch (e) {
    run.error = e.describe ? e.describe() : String(e);
  }
  run.running = false;
  drawBulk();
}

function drawBulk() {
  const run = state.bulk;
  const ind = document.getElementById('bulk-indicator');
  ind.textContent = run ? 'Bulk: ' + run.done + '/' + run.total + (run.running ? ' running' : ' done') : '';
  const box = document.getElementById('bulk-progress-box');
  if (!box || !run) return;
  box.replaceChildren(
    h('h2', {}, 'Progress'),
    h('p', { id: 'bulk-status', role: 'status', 'data-done': run.done, 'data-total': run.total, 'data-running': run.running ? 'yes' : 'no' },
      h('label', { for: 'bulk-progress' }, run.running ? 'Deciding… ' : 'Finished. '),
      h('progress', { id: 'bulk-progress', max: Math.max(run.total, 1), value: run.done }),
      ' ' + run.done + ' of ' + run.total + ' decided: ' + run.ok + ' done, ' + run.refused + ' refused.'),
    ...(run.error ? [notice('error', run.error)] : []),
    h('table', { id: 'bulk-results' },
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Intent'), h('th', { scope: 'col' }, 'Result'))),
      h('tbody', {}, run.results.map(r => h('tr', { 'data-ok': r.ok ? 'yes' : 'no' },
        h('td', { class: 'mono' }, h('a', { href: '#/intents/' + encodeURIComponent(r.id) }, r.id)),
        h('td', {}, r.ok ? 'now ' + r.text : r.text))))));
}

// ---------- grants and capabilities ----------

async function renderGrants() {
  stopRefresh();
  const out = h('div', { id: 'grants-message' });
  const grantsBox = h('div', { id: 'grants' });
  const capsBox = h('div', { id: 'capabilities' });
  const prov = h('input', { type: 'text', id: 'cap-provider', name: 'provider', required: true });
  const acct = h('input', { type: 'text', id: 'cap-account', name: 'account', required: true });
  const lookup = h('form', { class: 'filters', id: 'cap-lookup', onsubmit: ev => {
    ev.preventDefault();
    if (prov.value.trim() && acct.value.trim()) showCapability(capsBox, prov.value.trim(), acct.value.trim(), true);
  } }, field('Provider', prov), field('Account', acct), h('button', { type: 'submit', id: 'cap-show' }, 'Show account'));
  setView('Grants & capabilities', h('h1', {}, 'Grants & capabilities'), out,
    h('h2', {}, 'Grants'), grantsBox,
    h('h2', {}, 'Provider accounts (capability withdrawals)'), lookup, capsBox);
  if (!state.me || !state.me.canDecide) { out.append(notice('warn', 'Only operators manage grants and capabilities.')); return; }
  let grants = [];
  try {
    let cursor = '';
    for (let i = 0; i < 10; i++) {
      const page = await api('GET', '/v1/admin/grants?limit=100' + (cursor ? '&cursor=' + encodeURIComponent(cursor) : ''));
      grants = grants.concat(page.items || []);
      if (!page.nextCursor) break;
      cursor = page.nextCursor;
    }
  } catch (e) {
    out.append(notice('error', e.describe ? e.describe() : String(e)));
    return;
  }
  grantsBox.replaceChildren(grants.length ? h('table', {},
    h('thead', {}, h('tr', {}, ['Grant', 'Version', 'Bot', 'Provider / account', 'Actions', 'Targets', 'Expires', 'Revoked'].map(c => h('th', { scope: 'col' }, c)))),
    h('tbody', {}, grants.map(g => h('tr', {},
      h('td', { class: 'mono' }, g.id), h('td', {}, String(g.version)), h('td', {}, g.bot), h('td', {}, g.provider + ' / ' + g.account),
      h('td', {}, (g.actions || []).join(', ')), h('td', {}, (g.targets || []).join(', ')), h('td', {}, g.expiresAt ? fmtTime(g.expiresAt) : 'never'),
      h('td', {}, g.revokedAt ? fmtTime(g.revokedAt) + ' by ' + g.revokedBy + ': ' + g.revokeReason : 'no')))))
    : h('p', { class: 'muted' }, 'No grants.'));
  const seen = new Set();
  for (const g of grants) {
    if (g.provider && g.account && !g.provider.includes('*') && !g.account.includes('*') && !seen.has(g.provider + '/' + g.account)) {
      seen.add(g.provider + '/' + g.account);
      showCapability(capsBox, g.provider, g.account, false);
    }
  }
}

async function showCapability(box, provider, account, first) {
  const key = provider + '/' + account;
  let row = box.querySelector('[data-account="' + CSS.escape(key) + '"]');
  if (!row) {
    row = h('fieldset', { 'data-account': key });
    if (first) box.prepend(row); else box.append(row);
  }
  const path = '/v1/admin/capabilities/' + encodeURIComponent(provider) + '/' + encodeURIComponent(account);
  let cap;
  try { cap = await api('GET', path); } catch (e) { row.replaceChildren(h('legend', {}, key), notice('error', e.describe ? e.describe() : String(e))); return; }
  const w = cap.accountWithdrawal;
  const actions = Object.entries(cap.withdrawnActions || {});
  const safe = key.replace(/[^A-Za-z0-9_-]/g, '_');
  const reason = h('input', { type: 'text', id: 'cap-reason-' + safe, required: true });
  const msg = h('div', { 'aria-live': 'polite' });
  const change = async withdrawn => {
    if (!reason.value.trim()) { msg.replaceChildren(notice('error', 'A reason is required.')); reason.focus(); return; }
    try {
      await api('PUT', path, { withdrawn, reason: reason.value.trim() });
      showCapability(box, provider, account, false);
    } catch (e) { msg.replaceChildren(notice('error', e.describe ? e.describe() : String(e))); }
  };
  // replaceChildren shows a null as the text "null" ("Available null"): filtered.
  row.replaceChildren(...[h('legend', {}, key),
    h('p', { 'data-withdrawn': w ? 'yes' : 'no' }, w ? h('strong', {}, 'Withdrawn') : 'Available', w ? ' since ' + fmtTime(w.at) + ' by ' + w.by + ': ' + w.reason : ''),
    actions.length ? h('p', {}, 'Actions withdrawn: ' + actions.map(([a, x]) => a + ' (' + x.reason + ')').join(', ')) : null,
    field('Reason for the change', reason),
    h('div', { class: 'pager' },
      w ? h('button', { type: 'button', onclick: () => change(false) }, 'Restore ' + key)
        : h('button', { type: 'button', onclick: () => change(true) }, 'Withdraw ' + key)),
    msg].filter(Boolean));
}

// ---------- bot limits (issue 24) ----------

// renderBots shows each bot's limits as GET /v1/admin/bots/{bot}/limits
// answers them: its rate of new intents and its cap on open intents, how
// many it has used of each now. The bots listed are the owners of bot
// tokens (every principal that can submit); any other name can be looked up.
async function renderBots(params) {
  stopRefresh();
  const out = h('div', { id: 'bots-message' });
  const box = h('div', { id: 'bot-limits' });
  const name = h('input', { type: 'text', id: 'bot-name', name: 'bot', required: true, value: params.get('bot') || '' });
  const lookup = h('form', { class: 'filters', id: 'bot-lookup', onsubmit: ev => {
    ev.preventDefault();
    const b = name.value.trim();
    if (b) location.hash = '#/bots?' + new URLSearchParams({ bot: b }).toString();
  } }, field('Bot', name), h('button', { type: 'submit', id: 'bot-show' }, 'Show limits'));
  setView('Bot limits', h('h1', {}, 'Bot limits'),
    h('p', { class: 'muted' }, 'A bot over its rate of new intents, or with its maximum of open (not yet ended) intents, is answered 429 rate_limited / too_many_open_intents with Retry-After; a replay of a key it already used is never refused. Counts are per counter shard: the open count can run a little high after a lost give-back until the sweeper recounts it, never low.'),
    out, lookup, box);
  if (!state.me || !state.me.canDecide) { out.append(notice('warn', 'Only operators read bot limits.')); return; }
  const bots = [];
  if (params.get('bot')) bots.push(params.get('bot'));
  try {
    let cursor = '';
    for (let i = 0; i < 10; i++) {
      const page = await api('GET', '/v1/admin/tokens?limit=100' + (cursor ? '&cursor=' + encodeURIComponent(cursor) : ''));
      for (const t of page.items || []) if (t.kind === 'bot' && t.status === 'active' && !bots.includes(t.owner)) bots.push(t.owner);
      if (!page.nextCursor) break;
      cursor = page.nextCursor;
    }
  } catch (e) {
    out.append(notice('error', 'Bot tokens could not be listed: ' + (e.describe ? e.describe() : String(e))));
  }
  if (!bots.length) { box.replaceChildren(h('p', { class: 'muted' }, 'No bot token is active: look a bot up by name.')); return; }
  const body = h('tbody', {});
  box.replaceChildren(h('table', { id: 'bot-limits-table' },
    h('thead', {}, h('tr', {}, ['Bot', 'Rate of new intents', 'New intents this window', 'Open intents cap', 'Open intents counted', 'Counter shards'].map(c => h('th', { scope: 'col' }, c)))),
    body));
  for (const bot of bots) {
    const row = h('tr', { 'data-bot': bot }, h('td', { class: 'mono' }, bot), h('td', { colspan: 5, class: 'muted' }, 'loading…'));
    body.append(row);
    let l;
    try { l = await api('GET', '/v1/admin/bots/' + encodeURIComponent(bot) + '/limits'); } catch (e) {
      row.replaceChildren(h('td', { class: 'mono' }, bot), h('td', { colspan: 5 }, notice('error', e.describe ? e.describe() : String(e))));
      continue;
    }
    const limited = l.rate || l.maxOpen;
    row.dataset.rate = l.rate; row.dataset.maxOpen = l.maxOpen; row.dataset.inWindow = l.inWindow;
    row.dataset.open = l.open; row.dataset.shards = l.shards;
    row.replaceChildren(h('td', { class: 'mono' }, bot),
      h('td', { class: 'bl-rate' }, l.rate ? l.rate.replace('/', ' per ') : 'no limit'),
      h('td', { class: 'bl-in-window' }, l.rate ? String(l.inWindow) + ' (admits up to ' + (l.rateQuotaPerShard * l.shards) + ')' : '—'),
      h('td', { class: 'bl-max-open' }, l.maxOpen ? String(l.maxOpen) : 'no cap'),
      h('td', { class: 'bl-open' }, l.maxOpen ? String(l.open) + ' (admits up to ' + (l.openQuotaPerShard * l.shards) + ')' : '—'),
      h('td', { class: 'bl-shards' }, limited ? String(l.shards) + ' (rate ' + l.rateQuotaPerShard + ', open ' + l.openQuotaPerShard + ' each)' : '—'));
  }
}

function botLink(bot) { return h('a', { href: '#/bots?' + new URLSearchParams({ bot }).toString(), class: 'bot-link' }, bot); }

// ---------- router ----------

async function route() {
  const { path, params } = parseHash();
  if (path === '/signin' || !token()) { renderSignIn(); return; }
  if (!state.me) {
    try { await whoami(); } catch (e) { sessionStorage.removeItem(TOKEN_KEY); renderSignIn(notice('error', signInError(e), 'signin-error')); return; }
  }
  if (path.startsWith('/intents/')) return renderIntent(decodeURIComponent(path.slice('/intents/'.length)));
  if (path === '/overview') return renderOverview(); // overview.js
  if (path === '/bulk') return renderBulk(params);
  if (path === '/grants') return renderGrants();
  if (path === '/bots') return renderBots(params);
  return renderQueue(params);
}

document.getElementById('signout').addEventListener('click', signOut);
window.addEventListener('hashchange', () => { route(); view.focus(); });
route();
