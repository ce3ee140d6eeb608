// The console's shell: sign-in, sign-out, the readiness line and hash routing to the pages.
// Each page is a module exporting render(main, params); a page for another role is one more
// entry in PAGES and one more link in index.html's nav.

import { getJson, explain, readiness, session, ApiError } from './api.js';
import { h, field } from './dom.js';
import { renderReport } from './report.js';
import { renderDeliveries } from './deliveries.js';
import { renderLead } from './lead.js';

// Analyst and admin pages. Still to come, each behind its own hash: a supplier's leads and why
// they were rejected (#/supplier), a buyer's deliveries, pulls and returns (#/buyer), and the
// admin's erasure requests (#/erasure).
const PAGES = [
  { pattern: /^#\/report$/, nav: '#/report', render: renderReport },
  { pattern: /^#\/deliveries$/, nav: '#/deliveries', render: renderDeliveries },
  { pattern: /^#\/leads(?:\/([1-9]\d{0,15}))?$/, nav: '#/leads', render: renderLead },
];

const main = document.getElementById('main');
const nav = document.getElementById('nav');
const signOutButton = document.getElementById('sign-out');
const readinessLine = document.getElementById('readiness');

function signInPage() {
  nav.hidden = true;
  signOutButton.hidden = true;
  const input = h('input', { type: 'password', name: 'key', autocomplete: 'off', required: true, spellcheck: 'false' });
  const message = h('p', { class: 'error', role: 'alert' });
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
      // Any keyed read answers 200 for a valid key of any role, 401 for one that is not.
      await getJson('/functions/deliveries?limit=1');
      if (!PAGES.some((p) => p.pattern.test(location.hash))) location.hash = '#/report';
      else route();
    } catch (error) {
      session.signOut();
      message.textContent = error instanceof ApiError && error.status === 401 ? 'That key was not accepted.' : explain(error);
    }
  });
  main.replaceChildren(form);
  input.focus();
}

async function showReadiness() {
  try {
    const body = await readiness();
    const projections = body.checks?.projections?.items ?? [];
    const lag = Math.max(0, ...projections.map((p) => p.lag_seconds ?? 0));
    const behind = projections.reduce((sum, p) => sum + (p.events_behind ?? 0), 0);
    readinessLine.textContent = `${body.ok ? 'Ready' : 'Not ready'} · projection lag ${lag.toFixed(1)} s, ${behind} events behind`;
    readinessLine.classList.toggle('bad', !body.ok);
    readinessLine.dataset.ready = String(Boolean(body.ok));
  } catch (error) {
    readinessLine.textContent = `Readiness unknown: ${explain(error)}`;
    readinessLine.classList.add('bad');
  }
}

let rendering = 0;
async function route() {
  if (!session.key) return signInPage();
  nav.hidden = false;
  signOutButton.hidden = false;
  const page = PAGES.find((p) => p.pattern.test(location.hash));
  if (!page) {
    location.hash = '#/report';
    return;
  }
  for (const link of nav.querySelectorAll('a')) {
    if (link.getAttribute('href') === page.nav) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  const params = page.pattern.exec(location.hash).slice(1);
  const mine = ++rendering;
  main.replaceChildren();
  main.dataset.page = page.nav.slice(2);
  void showReadiness();
  try {
    await page.render(main, params, () => mine === rendering);
  } catch (error) {
    if (mine === rendering) main.append(h('p', { class: 'error', role: 'alert' }, explain(error)));
  }
}

signOutButton.addEventListener('click', () => {
  session.signOut();
  location.hash = '';
  route();
});
window.addEventListener('hashchange', route);
route();
setInterval(() => session.key && showReadiness(), 30_000);
