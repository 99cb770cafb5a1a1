/**
 * Determinism guard: every recorded history in test/fixtures/histories replays against today's
 * workflow code. A change that alters a workflow's command sequence fails here; ship it behind
 * patched() or as a new workflow type (docs/development.md: "Changing a workflow"), then record again.
 */
import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { Worker } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { workflowTracingSinks } from '../workers/tracing.js';
import * as workflows from '../workflows/index.js';
import { workflowBundle } from './helpers/berth-worker.js';

const FIXTURES = fileURLToPath(new URL('./fixtures/histories/', import.meta.url));
const files = (await readdir(FIXTURES)).filter((f) => f.endsWith('.json')).sort();

describe('recorded workflow histories', () => {
  it('cover every workflow type', async () => {
    const types = new Set<string>();
    for (const file of files) {
      const history = JSON.parse(await readFile(`${FIXTURES}${file}`, 'utf8')) as {
        events: { workflowExecutionStartedEventAttributes?: { workflowType: { name: string } } }[];
      };
      types.add(String(history.events[0]?.workflowExecutionStartedEventAttributes?.workflowType.name));
    }
    expect([...types].sort()).toEqual(Object.keys(workflows).sort());
  });

  it.each(files)('%s replays against today’s workflow code', { timeout: 60_000 }, async (file) => {
    const history: unknown = JSON.parse(await readFile(`${FIXTURES}${file}`, 'utf8'));
    // As production replays: the bundle's tracing interceptors and the sink they export to.
    await Worker.runReplayHistory(
      { workflowBundle: await workflowBundle(), sinks: workflowTracingSinks() },
      history,
      file,
    );
  });
});
