/**
 * A pool's preflight, run on demand (each run is a workflow on a worker) and kept here, so that
 * the Heavy pools view, redrawn every 2 s, shows the last report until another is asked for.
 */
import { api, ApiError } from './api.js';
import { h } from './dom.js';
import type { PreflightReport } from './types.js';

type State = 'running' | PreflightReport | { error: string };
const reports = new Map<string, State>();

export function preflightBlock(group: string): HTMLElement {
  const state = reports.get(group);
  const button = h(
    'button',
    { type: 'button', id: `preflight-run-${group}`, disabled: state === 'running' },
    `Run preflight of ${group}`,
  );
  button.addEventListener('click', () => void run(group));
  return h(
    'div',
    { id: `preflight-${group}`, 'aria-live': 'polite' },
    button,
    state === undefined ? null : state === 'running' ? h('p', {}, 'preflight running…') : report(state),
  );
}

function report(state: PreflightReport | { error: string }): HTMLElement {
  if ('error' in state) return h('p', { class: 'bad', role: 'alert' }, `preflight failed: ${state.error}`);
  return h(
    'div',
    { 'data-testid': 'preflight' },
    h(
      'p',
      { 'data-testid': 'preflight-summary' },
      `preflight of ${state.group} on ${state.platform}: ${state.findings === 0 ? 'no findings' : `${state.findings} finding${state.findings === 1 ? '' : 's'}`}`,
    ),
    h(
      'ul',
      {},
      state.checks.map((c) =>
        h(
          'li',
          { 'data-testid': 'preflight-check' },
          h('span', { class: c.ok ? 'ok' : 'bad' }, c.ok ? 'ok' : 'FAIL'),
          ` ${c.area}: ${c.summary}`,
          c.fix ? h('span', { class: 'hint' }, ` (fix: ${c.fix})`) : null,
        ),
      ),
    ),
  );
}

/** Runs it, redrawing the block in place (the view may have been redrawn meanwhile). */
async function run(group: string): Promise<void> {
  const redraw = () => document.getElementById(`preflight-${group}`)?.replaceWith(preflightBlock(group));
  reports.set(group, 'running');
  redraw();
  try {
    reports.set(group, await api<PreflightReport>(`/pools/${encodeURIComponent(group)}/preflight`, { body: {} }));
  } catch (error) {
    reports.set(group, { error: error instanceof ApiError ? error.message : String(error) });
  }
  redraw();
  document.getElementById(`preflight-run-${group}`)?.focus();
}
