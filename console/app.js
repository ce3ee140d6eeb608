// The console's shell: sign-in, sign-out, the readiness line and hash routing to the pages.
// Each page is a module exporting render(main, params, current, me); which pages a key has comes
// from GET /functions/me (its role, and for a buyer how it takes delivery). That only decides what
// to show: every call the pages make is checked by the service against the key itself.

import { getJson, explain, readiness, session, onConnection, ApiError, KEY_REFUSED, pullsItsLeads } from './api.js';
import { h, field } from './dom.js';
import { renderReport } from './report.js';
import { renderDeliveries } from './deliveries.js';
import { renderLead } from './lead.js';
import { renderLeads } from './leads.js';
import { renderPulls, renderBought } from './buyer.js';
import { renderPersonalData } from './personal.js';

const READERS = ['supplier', 'analyst', 'admin'];
const ALL = ['supplier', 'buyer', 'analyst', 'admin'];
// The pages, in the order of the nav after the role's home page (HOME), which comes first. A page
// with a `label` has a nav link, shown to its roles only; a page for one more role is one more entry here.
const PAGES = [
  { pattern: /^#\/leads$/, nav: '#/leads', label: 'Leads', roles: READERS, render: renderLeads },
  // A report's query may follow its hash (#/report?from=…&to=…&tz=…&group_by=…): a link to it shows it.
  { pattern: /^#\/report(?:\?(.*))?$/, nav: '#/report', label: 'Report', roles: READERS, render: renderReport },
  { pattern: /^#\/bought$/, nav: '#/bought', label: 'Bought', roles: ['buyer'], render: renderBought },
  { pattern: /^#\/pulls$/, nav: '#/pulls', label: 'Pulls', roles: ['buyer'], pullOnly: true, render: renderPulls },
  { pattern: /^#\/deliveries$/, nav: '#/deliveries', label: 'Deliveries', roles: ALL, render: renderDeliveries },
  // A consumer's access and erasure requests; an erasure's record has the page's address plus its id.
  { pattern: /^#\/personal-data(?:\/erasures\/([0-9a-f]{32}))?$/, nav: '#/personal-data', label: 'Personal data', roles: ['admin'], render: renderPersonalData },
  // A lead's page is reached from a list, so it has no link of its own; it lights the list's. Any
  // id: one that is no lead id (too long, not a number) is "not found" there, like one not readable.
  { pattern: /^#\/leads\/([^/?#]+)$/, nav: null, roles: ALL, render: renderLead },
];
const HOME = { supplier: '#/leads', buyer: '#/bought', analyst: '#/report', admin: '#/report' };

/** Who the key is (GET /functions/me), asked once per sign-in. */
let me = null;
const has = (page) => page.roles.includes(me.role) && (!page.pullOnly || pullsItsLeads(me));
const homeless = () => ['', '#', '#/'].includes(location.hash);

const main = document.getElementById('main');
const nav = document.getElementById('nav');
const signOutButton = document.getElementById('sign-out');
const readinessLine = document.getElementById('readiness');
const readinessState = document.getElementById('readiness-state');
const readinessDetail = document.getElementById('readiness-detail');
const who = document.getElementById('who');

function signInPage(notice = '') {
  // What the pages still await is for a session that ended: a lead's page loading as its user
  // signed out must not draw the consumer under the sign-in form once its answers come.
  rendering++;
  nav.hidden = true;
  signOutButton.hidden = true;
  who.textContent = '';
  const input = h('input', { type: 'password', name: 'key', autocomplete: 'off', required: true, spellcheck: 'false' });
  const message = h('p', { class: 'error', role: 'alert', id: 'signin-message' });
  const form = h(
    'form',
    { class: 'card signin', 'aria-labelledby': 'signin-title' },
    h('h1', { id: 'signin-title' }, 'Sign in'),
    h('p', { class: 'muted' }, 'Paste an API key. It is kept in this tab only and sent as X-API-KEY to the service; closing the tab or signing out forgets it.'),
    field('API key', input),
    h('p', {}, h('button', { type: 'submit' }, 'Sign in')),
    message,
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    session.signIn(input.value.trim());
    try {
      // 200 for a valid key of any role, 401 for one that is not.
      me = await getJson('/functions/me');
      // Back to the page the session was on (a key refused mid-session keeps its address), or home;
      // one this key does not have says so.
      if (homeless()) location.hash = HOME[me.role];
      else route();
    } catch (error) {
      session.signOut();
      me = null;
      message.textContent = error instanceof ApiError && error.status === 401 ? 'That key was not accepted.' : explain(error);
    }
  });
  main.replaceChildren(form);
  main.dataset.page = 'sign-in';
  // Written once the alert is in the page, so that it is announced.
  message.textContent = notice;
  input.focus();
}

/** The key was refused (revoked or expired since sign-in): the session ends, whatever was shown. */
function keyRefused() {
  if (!me) return; // signing in, or already ended: the sign-in form says so itself
  session.signOut();
  me = null;
  signInPage(KEY_REFUSED);
}

/** The readiness line: its state is announced only when it changes, its detail never. */
function showState(state, detail, ok) {
  if (readinessState.textContent !== state) readinessState.textContent = state;
  readinessDetail.textContent = detail;
  readinessLine.classList.toggle('bad', !ok);
  readinessLine.dataset.ready = String(ok);
}

let unreachable = false;
onConnection({
  unauthorized: keyRefused,
  unreachable() {
    unreachable = true;
    // Whatever the page shows came before the failure: marked as such (console.css) until an answer comes.
    main.classList.add('stale');
    showState('Service unreachable', ' · the console cannot reach it', false);
  },
  reachable() {
    main.classList.remove('stale');
    if (!unreachable) return;
    unreachable = false;
    void showReadiness();
  },
});

async function showReadiness() {
  try {
    const body = await readiness();
    const projections = body.checks?.projections?.items ?? [];
    const lag = Math.max(0, ...projections.map((p) => p.lag_seconds ?? 0));
    const behind = projections.reduce((sum, p) => sum + (p.events_behind ?? 0), 0);
    showState(body.ok ? 'Ready' : 'Not ready', ` · projection lag ${lag.toFixed(1)} s, ${behind} events behind`, Boolean(body.ok));
  } catch (error) {
    if (!unreachable) showState('Readiness unknown', `: ${explain(error)}`, false);
  }
}

/** An address that names no page: said so, with the way home (the address is left as it was). */
function notFound(home) {
  main.append(
    h('h1', {}, 'Page not found'),
    h('p', {}, 'The console has no page at this address.'),
    h('p', {}, h('a', { href: home }, 'Go to the home page')),
  );
}

/** Who a page is for, in words: "admin keys", "supplier, analyst and admin keys". */
const forWhom = (page) => (page.pullOnly ? 'buyers that pull their leads (a webhook buyer has its leads sent to it)' : `${page.roles.join(', ').replace(/, ([^,]+)$/, ' and $1')} keys`);

/**
 * An address of a page this key's role does not have (a link sent by someone else, a bookmark of
 * another key's): said so, naming whom it is for and who is signed in, with the way home. The
 * address is left as it was, so that signing in with the right key shows the page.
 */
function notForThisKey(page, home) {
  main.append(
    h('h1', {}, 'Not a page for this key'),
    h('p', { id: 'not-for-this-key' }, `${page.label} is for ${forWhom(page)}; you are signed in as ${me.name} (${me.role}).`),
    h('p', {}, h('a', { href: home }, 'Go to the home page')),
  );
}

let rendering = 0;
async function route() {
  if (!session.key) return signInPage();
  if (!me) {
    try {
      me = await getJson('/functions/me');
    } catch (error) {
      // A key revoked since this tab signed in: back to the sign-in page, saying why.
      if (error instanceof ApiError && error.status === 401) {
        session.signOut();
        signInPage(KEY_REFUSED);
      } else {
        // Whose key this is could not be asked (the service unreachable or not ready): say so, with
        // the two ways on, trying again or signing out (the header's button, shown for it).
        const again = h('button', { type: 'button' }, 'Try again');
        again.addEventListener('click', () => void route());
        main.replaceChildren(h('p', { class: 'error', role: 'alert', id: 'me-failed' }, explain(error)), h('p', {}, again));
        signOutButton.hidden = false;
        again.focus();
      }
      return;
    }
  }
  const page = PAGES.find((p) => p.pattern.test(location.hash));
  // No page asked for: the role's home page.
  if (homeless()) {
    location.hash = HOME[me.role];
    return;
  }
  nav.hidden = false;
  signOutButton.hidden = false;
  who.textContent = `${me.name} (${me.role})`;
  const current = page ? (page.nav ?? (me.role === 'buyer' ? '#/bought' : '#/leads')) : null;
  // The role's home page first (an analyst's and an admin's is the report), then the others in PAGES' order.
  const links = PAGES.filter((p) => p.label && has(p));
  links.sort((a, b) => Number(b.nav === HOME[me.role]) - Number(a.nav === HOME[me.role]));
  nav.replaceChildren(...links.map((p) => h('a', { href: p.nav, 'aria-current': p.nav === current ? 'page' : undefined }, p.label)));
  const mine = ++rendering;
  main.replaceChildren();
  main.classList.remove('stale');
  main.dataset.page = !page ? 'not-found' : !has(page) ? 'not-for-this-key' : page.nav ? page.nav.slice(2) : 'lead';
  // A new page starts the keyboard at its content: the next Tab is its first control, not the
  // header's links again, and a screen reader reads from the page's heading.
  main.focus({ preventScroll: true });
  void showReadiness();
  if (!page) return notFound(HOME[me.role]);
  if (!has(page)) return notForThisKey(page, HOME[me.role]);
  const params = page.pattern.exec(location.hash).slice(1);
  try {
    await page.render(main, params, () => mine === rendering, me);
  } catch (error) {
    if (mine === rendering) pageFailed(error);
  }
}

/**
 * A page whose data could not be had (too many requests, the service not ready): said in words,
 * under what the page drew already, with a button that asks again; it takes the keyboard, so that
 * Enter is the retry. A list page with a form says so in its status line instead: its Show asks again.
 */
function pageFailed(error) {
  const again = h('button', { type: 'button', id: 'page-retry' }, 'Try again');
  again.addEventListener('click', () => void route());
  main.append(h('p', { class: 'error', role: 'alert', id: 'page-failed' }, explain(error)), h('p', {}, again));
  again.focus();
}

signOutButton.addEventListener('click', () => {
  session.signOut();
  me = null;
  location.hash = '';
  route();
});
// The skip link's target is an element, not a page: followed as a link it would change the hash
// and so the page. It moves the focus to the content instead.
document.querySelector('.skip').addEventListener('click', (event) => {
  event.preventDefault();
  main.focus();
});
// Every form submits with Enter, from a list as from a text field: the browser does it from an
// <input> only, so a form whose only field is a list (the deliveries' status, a buyer's return
// reason) could be sent by its button alone. Validation runs as for any submit.
document.addEventListener('keydown', (event) => {
  const list = event.target;
  if (event.key !== 'Enter' || event.defaultPrevented || event.isComposing || event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) return;
  if (!(list instanceof HTMLSelectElement) || list.multiple || !list.form) return;
  event.preventDefault();
  list.form.requestSubmit();
});
window.addEventListener('hashchange', route);
route();
setInterval(() => session.key && showReadiness(), 30_000);
