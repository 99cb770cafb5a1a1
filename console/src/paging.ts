/**
 * One page of a long list, so a view of 1,000 nodes draws 100 rows: pages count from 0, a page
 * past the end shows the last one (the list may have shrunk since it was chosen).
 */
export interface Page<T> {
  items: T[];
  /** The page shown, from 0. */
  page: number;
  pages: number;
  /** The first and last item shown, counting from 1 (0 and 0 for an empty list). */
  from: number;
  to: number;
  total: number;
}

export function pageOf<T>(list: readonly T[], page: number, size: number): Page<T> {
  if (!(size >= 1)) throw new RangeError(`a page holds at least one item, not ${size}`);
  const pages = Math.max(1, Math.ceil(list.length / size));
  const shown = Math.min(Math.max(0, Math.floor(page) || 0), pages - 1);
  const items = list.slice(shown * size, (shown + 1) * size);
  return {
    items,
    page: shown,
    pages,
    from: items.length === 0 ? 0 : shown * size + 1,
    to: shown * size + items.length,
    total: list.length,
  };
}
