/**
 * The workflow bundle production workers load: `npm run build` writes it next to the compiled
 * code (dist/workflow-bundle.js), so a worker starts without webpack and every worker of a build
 * runs the same workflow code. BERTH_WORKFLOW_BUNDLE points a worker at another file.
 */
import { access } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

/** Where `npm run build` writes the bundle. */
export const WORKFLOW_BUNDLE_FILE = fileURLToPath(new URL('../workflow-bundle.js', import.meta.url));

/** The bundle for Worker.create's `workflowBundle`; a clear error when it was never built. */
export async function prebuiltWorkflowBundle(file = WORKFLOW_BUNDLE_FILE): Promise<{ codePath: string }> {
  try {
    await access(file);
  } catch {
    throw new Error(`the workflow bundle ${file} is missing: \`npm run build\` writes it`);
  }
  return { codePath: file };
}
