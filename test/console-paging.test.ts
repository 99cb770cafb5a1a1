/** The console's paging of long lists (console/src/paging.ts): the Cluster view's 100 nodes a page. */
import { describe, expect, it } from 'vitest';
import { pageOf } from '../console/src/paging.js';

const nodes = Array.from({ length: 1_000 }, (_, i) => `node-${i}`);

describe('pageOf', () => {
  it('cuts 1,000 nodes into ten pages of 100, in order', () => {
    const first = pageOf(nodes, 0, 100);
    expect(first).toMatchObject({ page: 0, pages: 10, from: 1, to: 100, total: 1_000 });
    expect(first.items).toEqual(nodes.slice(0, 100));
    const last = pageOf(nodes, 9, 100);
    expect(last).toMatchObject({ page: 9, from: 901, to: 1_000 });
    expect(last.items.at(-1)).toBe('node-999');
    expect(Array.from({ length: 10 }, (_, p) => pageOf(nodes, p, 100).items).flat()).toEqual(nodes);
  });

  it('keeps a short last page, and shows the last page for one past the end or a bad number', () => {
    expect(pageOf(nodes.slice(0, 250), 2, 100)).toMatchObject({ from: 201, to: 250, pages: 3 });
    expect(pageOf(nodes.slice(0, 250), 7, 100).page).toBe(2);
    expect(pageOf(nodes, -3, 100).page).toBe(0);
    expect(pageOf(nodes, Number.NaN, 100).page).toBe(0);
  });

  it('shows one empty page of an empty list, and refuses a page of no items', () => {
    expect(pageOf([], 0, 100)).toEqual({ items: [], page: 0, pages: 1, from: 0, to: 0, total: 0 });
    expect(() => pageOf(nodes, 0, 0)).toThrow(RangeError);
  });
});
