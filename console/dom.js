// A small element builder. Text always goes in as text nodes, never as HTML: lead data and
// API messages cannot inject markup. Attributes only, never inline style (the CSP forbids it).

export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on')) element.addEventListener(name.slice(2), value);
    else element.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

let ids = 0;
/** A form control with its label (joined by id, so the name is the label's text alone). */
export function field(text, control) {
  control.id ||= `f${++ids}`;
  return h('div', { class: 'field' }, h('label', { for: control.id }, text), control);
}

/**
 * Says what is wrong with a control, in words under it (error style), joined to it by
 * aria-describedby and marked aria-invalid; no text takes both away.
 */
export function markField(control, text) {
  const box = control.closest('.field') ?? control.parentElement;
  const id = `${control.id}-error`;
  let note = box.querySelector(`#${CSS.escape(id)}`);
  if (!text) {
    note?.remove();
    control.removeAttribute('aria-invalid');
    control.removeAttribute('aria-describedby');
    return;
  }
  note ??= box.appendChild(h('p', { class: 'error field-error', id }));
  note.textContent = text;
  control.setAttribute('aria-invalid', 'true');
  control.setAttribute('aria-describedby', id);
}

/**
 * A control the browser checks itself (required, a pattern): one that does not pass says what it
 * takes in words under it (markField) and takes the keyboard, rather than leave it to the browser's
 * bubble, which cannot say what the format is and is gone once read. `words(validity)` gives them.
 */
export function sayInvalid(control, words) {
  control.addEventListener('invalid', (event) => {
    event.preventDefault();
    markField(control, words(control.validity));
    control.focus();
  });
  control.addEventListener('input', () => {
    if (control.validity.valid) markField(control, '');
  });
}

export function select(name, options, value) {
  return h('select', { name }, options.map(([v, text]) => h('option', { value: v, selected: v === value }, text)));
}

/** A status line's text and tone: 'muted' for progress and counts, 'error' for a failure, 'ok' for a success. */
export function say(element, text, tone = 'muted') {
  element.classList.remove('muted', 'error', 'ok');
  element.classList.add(tone);
  element.textContent = text;
}

/** An amount to the cent, with its currency when given ("40.00 USD"). */
export const money = (n, currency) => (typeof n === 'number' ? (currency ? `${n.toFixed(2)} ${currency}` : n.toFixed(2)) : '');
/** A heading of money: its currency in brackets when known ("Revenue (USD)"). */
export const withCurrency = (label, currency) => (currency ? `${label} (${currency})` : label);
export const count = (n) => (typeof n === 'number' ? n.toLocaleString('en-US') : '');
/** A number of things in words, the noun plural but for one: "1 lead", "3 pending pulls". */
export const things = (n, one, many = `${one}s`) => `${count(n)} ${n === 1 ? one : many}`;
export const rate = (n) => (typeof n === 'number' ? `${(n * 100).toFixed(1)}%` : '');

/**
 * Every time the console shows, on every page: in UTC, to the second, the zone written
 * ("2026-11-27 03:11:06 UTC"), whatever the browser's own zone. The filters' dates are UTC days too.
 */
export function time(iso) {
  if (!iso) return '';
  const at = new Date(iso);
  return Number.isNaN(at.getTime()) ? String(iso) : `${at.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/**
 * A table whose rows become cards at a phone's width (console.css): each cell is given its column's
 * heading (data-label), which the card shows above it, so that nothing is left out and nothing
 * scrolls sideways. The table's roles are written out: some browsers (not Chromium) stop exposing a
 * table as one once its display is changed, and a screen reader should still read rows, columns
 * and their headings. Call it again once rows are added or a heading changes. Returns the table.
 */
export function cards(table) {
  table.classList.add('cards');
  table.setAttribute('role', 'table');
  const heads = table.tHead ? [...table.tHead.rows[0].cells].map((th) => th.textContent) : [];
  for (const group of [table.tHead, ...table.tBodies, table.tFoot]) {
    if (!group) continue;
    group.setAttribute('role', 'rowgroup');
    for (const tr of group.rows) {
      tr.setAttribute('role', 'row');
      [...tr.cells].forEach((cell, i) => {
        cell.setAttribute('role', cell.tagName === 'TD' ? 'cell' : group === table.tHead ? 'columnheader' : 'rowheader');
        // A footer's first cell names its row ("Total"): no heading over it.
        const label = group === table.tFoot && i === 0 ? '' : heads[i];
        if (cell.tagName === 'TD' && label) cell.dataset.label = label;
        else delete cell.dataset.label;
      });
    }
  }
  return table;
}

/**
 * A list's table is shown only once it has a row: with none, the box around it is hidden, and the
 * list's status line above it says there is nothing, rather than headings over nothing. The page's
 * heading and filters stay, to change what is asked. Call it again once rows are added or cleared.
 */
export function hideEmpty(table) {
  const box = table.closest('.table-wrap');
  if (box) box.hidden = table.tBodies[0].rows.length === 0;
}

/**
 * Marks what a page showed as out of date (console.css: greyed, in a dashed frame, its text as
 * readable as before) once a call for newer failed (no answer, 429, 5xx), or takes the mark off
 * once the newer answer is shown. The page's status line says so in words.
 */
export function outOfDate(element, on) {
  element.classList.toggle('out-of-date', on);
}

/** A word in a row that says what kind of row it is ("test", "erased"): text, never colour alone. */
export const badge = (text, kind = text) => [' ', h('span', { class: `badge ${kind}` }, text)];

/**
 * The currency of some lead rows (each names one: its routing's, or the routing file's for a lead
 * never routed), null when there is none or more than one (the file's currency was changed).
 */
export function currencyOf(rows) {
  const currencies = new Set(rows.map((row) => row.currency).filter(Boolean));
  return currencies.size === 1 ? [...currencies][0] : null;
}

/**
 * After a "More": once the button is hidden (no more rows), the keyboard would be left on the page's
 * body; it goes to the first row just added instead (its link or button).
 */
function focusAfterMore(button, firstNew, hadFocus) {
  if (!button.hidden || !hadFocus || !firstNew) return;
  firstNew.querySelector('a[href], button')?.focus();
}

/**
 * A button's request, one at a time: while `action` is on its way the button says it is busy
 * (aria-disabled, drawn as a disabled one, console.css) and a second press, a double-click's or
 * an Enter's, does nothing, so that the service is asked once, not twice (a More would add its
 * page twice, a Return be refused as already returned by the first). The button keeps the
 * keyboard's focus, as a disabled one would not. Returns the press: a function that gives
 * `action`'s result, or undefined for a press while busy.
 */
export function oneAtATime(button, action) {
  let busy = false;
  return async (...args) => {
    if (busy) return undefined;
    busy = true;
    button.setAttribute('aria-disabled', 'true');
    try {
      return await action(...args);
    } finally {
      busy = false;
      button.removeAttribute('aria-disabled');
    }
  };
}

/**
 * A list's More button: the next page on a click, one at a time (oneAtATime: a double-click asks
 * for it once), the keyboard's focus then on its first row; `fail` says a failure.
 */
export function onMore(button, loadNext, fail) {
  const next = oneAtATime(button, loadNext);
  button.addEventListener('click', async () => {
    const hadFocus = document.activeElement === button;
    try {
      focusAfterMore(button, await next(), hadFocus);
    } catch (error) {
      fail(error);
    }
  });
}
