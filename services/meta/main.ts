/** Runs the meta service. Configuration comes from the environment (see config.ts and docs/configuration.md). */
import '../common/telemetry.js'; // first: it instruments node:http before anything loads it
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../common/config.js';
import { startService } from '../common/startup.js';
import { serve } from '../common/serve.js';
import { buildMetaApp } from './app.js';
import { MetaConfig } from './config.js';
import { openMetaStore } from './open-store.js';
import { isPostgresUrl } from './store.js';

const config = loadConfig(MetaConfig);
const { token } = startService(config);

// PostgreSQL makes meta stateless (run as many replicas as you like); SQLite keeps it in one file.
const database =
  config.BERTH_META_DATABASE ??
  path.join(config.BERTH_META_DIR ?? path.join(config.BERTH_DATA_DIR, 'meta'), 'meta.sqlite');
if (!isPostgresUrl(database)) mkdirSync(path.dirname(database), { recursive: true });
const store = await openMetaStore({
  database,
  expiryMs: config.BERTH_NODE_EXPIRY_MS,
  heartbeatIntervalMs: config.BERTH_HEARTBEAT_MS,
  dedupWindowMs: config.BERTH_DEDUP_WINDOW_MS,
  onIdleError: (error) => app.log.warn({ err: error }, 'an idle database connection failed; the pool replaces it'),
});
const app = buildMetaApp({ store, token, maxVcpus: config.BERTH_MAX_VCPUS });
app.addHook('onClose', async () => store.close());
await serve(app, 'meta', { host: config.BERTH_META_HOST, port: config.BERTH_META_PORT });
