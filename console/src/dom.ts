/** A small element builder: the console is plain DOM, with text always set as text (never HTML). */
export type Child = Node | string | number | null | undefined | false;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attributes: Record<string, string | boolean | undefined> = {},
  ...children: (Child | Child[])[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === false) continue;
    element.setAttribute(name, value === true ? '' : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : String(child));
  }
  return element;
}

/** A table with a caption (screen readers announce it) and header cells per column. */
export function table(caption: string, head: string[], rows: Child[][], attributes: Record<string, string> = {}) {
  return h(
    'table',
    attributes,
    h('caption', {}, caption),
    h('thead', {}, h('tr', {}, ...head.map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', {}, ...rows.map((row) => h('tr', {}, ...row.map((cell) => h('td', {}, cell))))),
  );
}

/** A share as a labelled bar: the number is in the text, the bar only draws it. */
export function bar(fraction: number, label: string, testId?: string) {
  const pct = `${(fraction * 100).toFixed(1)}%`;
  const fill = h('span', { class: 'fill' });
  fill.style.width = pct;
  return h(
    'span',
    { class: 'bar', role: 'img', 'aria-label': `${label}: ${pct}` },
    h('span', { class: 'track' }, fill),
    h('span', { class: 'value', 'data-testid': testId }, pct),
  );
}

export const formatBytes = (bytes: number) => {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(unit === 0 ? 0 : 1)} ${units[unit]}`;
};

export const formatTime = (ms: number | null | undefined) => (ms == null ? '-' : new Date(ms).toISOString());

/** Node-hours to the thousandth: a short launch is a few thousandths. */
export const formatHours = (hours: number) => hours.toFixed(3);

/** Dollars as `berth cost` prints them: cents, grouped thousands. */
export const formatDollars = (dollars: number) =>
  `$${dollars.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;
