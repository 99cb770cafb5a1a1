import { describe, expect, it } from 'vitest';
import { SPLITS } from '../core/query-plan/decompose.js';
import { routingVerdict } from '../core/routing-verdict.js';

const thresholds = { scanBytes: 1000, memoryBytes: 100 };

describe('the routing verdict', () => {
  it('keeps small queries of every shape on the serving group', () => {
    for (const split of SPLITS) {
      expect(routingVerdict({ split, scanBytes: 99 }, thresholds)).toEqual({ class: 'light' });
    }
  });

  it('sends a query whose final stage takes rows over enough data to the heavy pool as memory-bound', () => {
    expect(routingVerdict({ split: 'rows', scanBytes: 100 }, thresholds)).toMatchObject({
      class: 'heavy',
      bottleneck: 'memory',
    });
    // Past the scan threshold too, memory still bounds it: more backends would not help its final stage.
    expect(routingVerdict({ split: 'rows', scanBytes: 5000 }, thresholds)).toMatchObject({
      class: 'heavy',
      bottleneck: 'memory',
    });
  });

  it('leaves a query light until it has many bytes to scan, then calls it scan-bound', () => {
    expect(routingVerdict({ split: 'aggregate', scanBytes: 999 }, thresholds)).toEqual({ class: 'light' });
    expect(routingVerdict({ split: 'select', scanBytes: 1000 }, thresholds)).toMatchObject({
      class: 'heavy',
      bottleneck: 'scan',
    });
  });
});
