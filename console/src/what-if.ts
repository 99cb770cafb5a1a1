/**
 * The Cluster view's placement what-if: what adding a node (ID:vCPU) or removing one would move,
 * as `berth placement simulate` computes it over the live members (the server runs the same
 * module). The form's values and the last answer are kept while the view redraws itself.
 */
import { api, ApiError } from './api.js';
import { h, table } from './dom.js';
import type { WhatIf } from './types.js';

const change = { add: '', remove: '' };
let last: WhatIf | { error: string } | undefined;

const percent = (fraction: number) => `${(fraction * 100).toFixed(1)}%`;

export function whatIfForm(members: string[]): HTMLElement {
  const add = h('input', { id: 'what-if-add', placeholder: 'node-4:4', 'aria-describedby': 'what-if-hint' });
  add.value = change.add;
  add.addEventListener('input', () => (change.add = add.value.trim()));
  const remove = h(
    'select',
    { id: 'what-if-remove' },
    h('option', { value: '' }, '(none)'),
    members.map((id) => h('option', { value: id, selected: id === change.remove }, id)),
  );
  remove.addEventListener('change', () => (change.remove = remove.value));
  const result = h('div', { id: 'what-if-result', 'aria-live': 'polite' }, last ? answer(last) : null);
  const form = h(
    'form',
    { 'aria-labelledby': 'what-if-title' },
    h('h3', { id: 'what-if-title' }, 'What if: placement'),
    h(
      'p',
      { id: 'what-if-hint', class: 'hint' },
      'Which segments would move if a node joined or left, by weighted ownership over a sample of segment ids.',
    ),
    h('label', { for: 'what-if-add' }, 'Add a node (ID:vCPU) '),
    add,
    h('label', { for: 'what-if-remove' }, ' Remove a node '),
    remove,
    ' ',
    h('button', { type: 'submit' }, 'Simulate'),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    void simulate(result);
  });
  return h('div', {}, form, result);
}

async function simulate(result: HTMLElement): Promise<void> {
  const query = new URLSearchParams(Object.entries(change).filter(([, v]) => v !== ''));
  try {
    last = await api<WhatIf>(`/placement?${query}`);
  } catch (error) {
    last = { error: error instanceof ApiError ? error.message : String(error) };
  }
  // The view may have been redrawn meanwhile: draw into the current one.
  (document.getElementById('what-if-result') ?? result).replaceChildren(answer(last));
}

function answer(what: WhatIf | { error: string }): HTMLElement {
  if ('error' in what) return h('p', { class: 'bad', role: 'alert' }, what.error);
  const { before, after, moved, segments } = what.result;
  const ids = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
  const command = [
    `berth placement simulate --nodes ${what.nodes}`,
    what.add ? `--add ${what.add}` : '',
    what.remove ? `--remove ${what.remove}` : '',
    `--segments ${segments}`,
  ];
  return h(
    'div',
    { 'data-testid': 'what-if' },
    h(
      'p',
      {},
      'Moved: ',
      h('span', { 'data-testid': 'what-if-moved' }, moved.segments.toLocaleString('en')),
      ` of ${segments.toLocaleString('en')} segments (${percent(moved.fraction)}).`,
    ),
    table(
      'Segments per node, before and after',
      ['node', 'vCPU', 'before', 'after', 'change'],
      ids.map((id) => {
        const was = before[id]?.segments ?? 0;
        const now = after[id]?.segments ?? 0;
        return [
          id,
          (after[id] ?? before[id])!.weight,
          `${was} (${percent(before[id]?.share ?? 0)})`,
          h('span', { 'data-testid': 'what-if-after' }, now),
          `${now - was > 0 ? '+' : ''}${now - was}`,
        ];
      }),
      { 'data-testid': 'what-if-nodes' },
    ),
    h('p', { class: 'hint' }, 'The same as ', h('code', {}, command.filter(Boolean).join(' '))),
  );
}
