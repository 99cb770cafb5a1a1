/** A result as CSV (RFC 4180), offered as a download made in the page: the rows never go back to a server. */
import type { QueryResult } from './types.js';

const field = (value: unknown) => {
  const text =
    value === null || value === undefined ? '' : typeof value === 'object' ? JSON.stringify(value) : String(value);
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
};

export const toCsv = (result: QueryResult) =>
  [result.columns, ...result.rows].map((row) => row.map(field).join(',')).join('\r\n') + '\r\n';

export const download = (result: QueryResult, name = 'result.csv') =>
  save(new Blob([toCsv(result)], { type: 'text/csv' }), name);

/** Offers a file made or fetched by the page as a download. */
export function save(blob: Blob, name: string): void {
  const url = URL.createObjectURL(blob);
  const link = document.createElement('a');
  link.href = url;
  link.download = name;
  link.click();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
