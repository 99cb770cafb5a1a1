/** Runs the meta service. Configuration comes from the environment (see README). */
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { startService } from '../common/startup.js';
import { envNumber, envString } from '../common/env.js';
import { serve } from '../common/serve.js';
import { buildMetaApp } from './app.js';
import { MetaStore } from './store.js';

const { token } = startService();

const dataDir = envString('BERTH_META_DIR', path.join(envString('BERTH_DATA_DIR', '.berth'), 'meta'));
mkdirSync(dataDir, { recursive: true });
const store = new MetaStore({
  file: path.join(dataDir, 'meta.sqlite'),
  expiryMs: envNumber('BERTH_NODE_EXPIRY_MS', 30_000),
  heartbeatIntervalMs: envNumber('BERTH_HEARTBEAT_MS', 5_000),
});
const app = buildMetaApp({ store, token, maxVcpus: envNumber('BERTH_MAX_VCPUS', 1024) });
app.addHook('onClose', async () => store.close());
await serve(app, 'meta', { host: envString('BERTH_META_HOST', '127.0.0.1'), port: envNumber('BERTH_META_PORT', 7400) });
