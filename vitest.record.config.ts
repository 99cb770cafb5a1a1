// `npm run record-histories`: the replay fixtures' recorder (test/record/), never part of `npm test`.
import { defineConfig } from 'vitest/config';
import base from './vitest.config.js';

export default defineConfig({ test: { ...base.test, include: ['test/record/**/*.ts'] } });
