/**
 * SQL: run a query as `berth query` does, see its rows and stats, cancel it (the request is
 * abandoned, and the coordinator stops the query on every node), chart it when its first column
 * is a time, and download it as CSV (made in the page) or Parquet (the query run again, the server
 * writing its answer with the columns' types). The text and the last answer stay while other views
 * are open.
 */
import { api, ApiError, apiFile } from './api.js';
import { chartable, drawChart } from './chart.js';
import { download, save } from './csv.js';
import { formatBytes, h, table } from './dom.js';
import type { QueryResult } from './types.js';

/** Rows drawn in the page; the CSV has them all. */
const SHOWN_ROWS = 1_000;

let sqlText = 'SELECT * FROM events LIMIT 100';
let last: (QueryResult & { sql: string }) | undefined;
let running: AbortController | undefined;

export function sqlView(): HTMLElement {
  const editor = h('textarea', { id: 'sql', rows: '6', spellcheck: 'false', 'aria-describedby': 'sql-hint' });
  editor.value = sqlText;
  editor.addEventListener('input', () => (sqlText = editor.value));
  const run = h('button', { type: 'submit', id: 'run' }, 'Run');
  const cancel = h('button', { type: 'button', id: 'cancel', disabled: true }, 'Cancel');
  const csv = h('button', { type: 'button', id: 'csv', disabled: !last }, 'Download CSV');
  const parquet = h('button', { type: 'button', id: 'parquet', disabled: !last }, 'Download Parquet');
  const status = h('p', { id: 'status', role: 'status' });
  const saving = h('p', { id: 'saving', 'aria-live': 'polite' });
  const output = h('div', { id: 'result' });

  const show = (result: QueryResult) => {
    const s = result.stats;
    const verdict = s.verdict.class === 'heavy' ? `heavy (${s.verdict.bottleneck})` : 'light';
    status.textContent = `${result.rows.length.toLocaleString('en')} rows in ${s.elapsedMs.toFixed(1)} ms · ${verdict} · route ${s.route} · ${s.segments.scanned} of ${s.segments.total} segments · ${formatBytes(s.scanBytes)} scanned · ${s.cacheHits} cache hits`;
    const chart = h('div', {
      class: 'chart',
      'data-testid': 'chart',
      role: 'img',
      'aria-label': 'line chart of the result',
    });
    output.replaceChildren(
      ...(chartable(result) ? [chart] : []),
      table(
        result.rows.length > SHOWN_ROWS
          ? `first ${SHOWN_ROWS} of ${result.rows.length} rows`
          : `${result.rows.length} rows`,
        result.columns.map((c, i) => `${c} (${result.types[i]})`),
        result.rows
          .slice(0, SHOWN_ROWS)
          .map((row) =>
            row.map((v) => (v !== null && typeof v === 'object' ? JSON.stringify(v) : v === null ? 'NULL' : String(v))),
          ),
        { 'data-testid': 'rows' },
      ),
    );
    // Drawn once the element is in the page, so it takes its width.
    if (chartable(result)) requestAnimationFrame(() => drawChart(chart, result));
    csv.disabled = false;
    parquet.disabled = false;
  };

  const form = h(
    'form',
    { 'aria-labelledby': 'sql-title' },
    h('label', { for: 'sql' }, 'Query'),
    editor,
    h('p', { id: 'sql-hint', class: 'hint' }, 'Ctrl+Enter runs it; Escape cancels a running query.'),
    h('div', { class: 'buttons' }, run, cancel, csv, parquet),
    saving,
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    void execute();
  });
  editor.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) form.requestSubmit();
    if (event.key === 'Escape') running?.abort();
  });
  cancel.addEventListener('click', () => running?.abort());
  csv.addEventListener('click', () => last && download(last));
  parquet.addEventListener('click', () => {
    if (!last) return;
    const sql = last.sql;
    parquet.disabled = true;
    saving.textContent = 'writing Parquet…';
    apiFile('/query.parquet', { body: { sql } })
      .then((file) => {
        save(file, 'result.parquet');
        saving.textContent = '';
      })
      .catch((error: unknown) => (saving.textContent = `Parquet refused: ${(error as Error).message}`))
      .finally(() => (parquet.disabled = false));
  });

  async function execute() {
    running?.abort();
    const controller = (running = new AbortController());
    run.disabled = true;
    cancel.disabled = false;
    status.textContent = 'running…';
    try {
      const sql = editor.value;
      last = { ...(await api<QueryResult>('/query', { body: { sql }, signal: controller.signal })), sql };
      show(last);
    } catch (error) {
      status.textContent = controller.signal.aborted
        ? 'cancelled'
        : `refused: ${error instanceof ApiError ? error.message : String(error)}`;
    } finally {
      if (running === controller) running = undefined;
      run.disabled = false;
      cancel.disabled = true;
    }
  }

  if (last) show(last);
  return h('section', {}, h('h2', { id: 'sql-title' }, 'SQL'), form, status, output);
}
