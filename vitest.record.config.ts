// `npm run record-histories`: the replay fixtures' recorder (test/record/), never part of `npm test`.
import { defineConfig } from 'vitest/config';
import base from './vitest.config.js';

// The integration project's settings (the real servers), over the recorder's files alone.
export default defineConfig({
  test: { ...base.test, projects: undefined, globalSetup: ['test/global-setup.ts'], include: ['test/record/**/*.ts'] },
});
