/**
 * The last step of `npm run build`: bundles the compiled workflows (dist/workflows), with the
 * tracing interceptors, into the file production workers load (see workflow-bundle.ts).
 */
import { writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode } from '@temporalio/worker';
import { WORKFLOW_INTERCEPTOR_MODULES } from './tracing.js';
import { WORKFLOW_BUNDLE_FILE } from './workflow-bundle.js';

const quiet = { trace() {}, debug() {}, info() {}, log() {}, warn: console.warn, error: console.error };
const started = Date.now();
const { code } = await bundleWorkflowCode({
  workflowsPath: fileURLToPath(new URL('../workflows/index.js', import.meta.url)),
  workflowInterceptorModules: WORKFLOW_INTERCEPTOR_MODULES,
  logger: quiet,
});
await writeFile(WORKFLOW_BUNDLE_FILE, code);
console.log(
  `workflow bundle: ${WORKFLOW_BUNDLE_FILE} (${Math.round(code.length / 1024)} KiB, ${Date.now() - started} ms)`,
);
