/** Runs the controller. Configuration comes from the environment (see README). */
import '../common/telemetry.js'; // first: it instruments node:http before anything loads it
import { Client, Connection } from '@temporalio/client';
import { envNumber, envString } from '../common/env.js';
import { poolConfigFromEnv } from '../common/pool-config.js';
import { servingScalerConfigFromEnv } from '../common/serving-scaler-config.js';
import { serve } from '../common/serve.js';
import { startService } from '../common/startup.js';
import { tracingClientInterceptors } from '../common/temporal-tracing.js';
import { TASK_QUEUE } from '../../workflows/api.js';
import { buildControllerApp } from './app.js';

startService();
const pool = poolConfigFromEnv();
const connection = await Connection.connect({ address: envString('BERTH_TEMPORAL_ADDRESS', '127.0.0.1:7233') });
const client = new Client({ connection, namespace: envString('BERTH_TEMPORAL_NAMESPACE', 'default'), interceptors: tracingClientInterceptors() });
const app = buildControllerApp({ client, pools: pool ? [pool] : [], servingScaler: servingScalerConfigFromEnv(), token: envString('BERTH_TOKEN'), taskQueue: envString('BERTH_TASK_QUEUE', TASK_QUEUE) });
await serve(app, 'controller', {
  host: envString('BERTH_CONTROLLER_HOST', '127.0.0.1'),
  port: envNumber('BERTH_CONTROLLER_PORT', 7402),
  onClose: () => connection.close(),
});
