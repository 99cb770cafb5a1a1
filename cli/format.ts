/** Plain-text output helpers for the `berth` command. */

export const percent = (fraction: number, digits = 1) => `${(fraction * 100).toFixed(digits)}%`;
export const count = (n: number) => n.toLocaleString('en-US');

/**
 * A table a person reads at a glance: the first row is the header, columns are padded, and
 * columns whose cells are all numeric-looking are right-aligned.
 */
export function table(rows: readonly (readonly string[])[], indent = '  '): string {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => (r[c] ?? '').length)));
  const numeric = widths.map((_, c) => rows.slice(1).every((r) => /^[-+]?[\d,.]+%?$|^$/.test(r[c] ?? '')));
  return rows
    .map(
      (r) =>
        indent +
        r
          .map((cell, c) => (numeric[c] ? cell.padStart(widths[c]!) : cell.padEnd(widths[c]!)))
          .join('  ')
          .trimEnd(),
    )
    .join('\n');
}
