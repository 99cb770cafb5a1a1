/** Runs the meta service. Configuration comes from the environment (see README). */
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { startService } from '../common/startup.js';
import { envNumber, envString } from '../common/env.js';
import { serve } from '../common/serve.js';
import { buildMetaApp } from './app.js';
import { openMetaStore } from './open-store.js';
import { isPostgresUrl } from './store.js';

const { token } = startService();

// PostgreSQL makes meta stateless (run as many replicas as you like); SQLite keeps it in one file.
const database = process.env.BERTH_META_DATABASE || path.join(envString('BERTH_META_DIR', path.join(envString('BERTH_DATA_DIR', '.berth'), 'meta')), 'meta.sqlite');
if (!isPostgresUrl(database)) mkdirSync(path.dirname(database), { recursive: true });
const store = await openMetaStore({
  database,
  expiryMs: envNumber('BERTH_NODE_EXPIRY_MS', 30_000),
  heartbeatIntervalMs: envNumber('BERTH_HEARTBEAT_MS', 5_000),
  onIdleError: (error) => app.log.warn({ err: error }, 'an idle database connection failed; the pool replaces it'),
});
const app = buildMetaApp({ store, token, maxVcpus: envNumber('BERTH_MAX_VCPUS', 1024) });
app.addHook('onClose', async () => store.close());
await serve(app, 'meta', { host: envString('BERTH_META_HOST', '127.0.0.1'), port: envNumber('BERTH_META_PORT', 7400) });
