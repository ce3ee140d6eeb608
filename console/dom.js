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

export function select(name, options, value) {
  return h('select', { name }, options.map(([v, text]) => h('option', { value: v, selected: v === value }, text)));
}

export const money = (n) => (typeof n === 'number' ? n.toFixed(2) : '');
export const count = (n) => (typeof n === 'number' ? n.toLocaleString('en-US') : '');
export const rate = (n) => (typeof n === 'number' ? `${(n * 100).toFixed(1)}%` : '');
export const time = (iso) => (iso ? new Date(iso).toLocaleString('en-US', { dateStyle: 'medium', timeStyle: 'medium' }) : '');
