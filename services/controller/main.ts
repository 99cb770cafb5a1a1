/** Runs the controller. Configuration comes from the environment (see config.ts and docs/configuration.md). */
import '../common/telemetry.js'; // first: it instruments node:http before anything loads it
import { Client, Connection } from '@temporalio/client';
import { atBoot, heavyPoolsOf, loadConfig, servingScalerConfigOf } from '../common/config.js';
import { serve } from '../common/serve.js';
import { startService } from '../common/startup.js';
import { tracingClientInterceptors } from '../common/temporal-tracing.js';
import { buildControllerApp } from './app.js';
import { ControllerConfig } from './config.js';

const config = loadConfig(ControllerConfig);
const { token } = startService(config);
const { scan, memory } = atBoot(() => heavyPoolsOf(config));
const connection = await Connection.connect({ address: config.BERTH_TEMPORAL_ADDRESS });
const client = new Client({
  connection,
  namespace: config.BERTH_TEMPORAL_NAMESPACE,
  interceptors: tracingClientInterceptors(),
});
const app = buildControllerApp({
  client,
  pools: [scan, memory].filter((pool) => pool !== undefined),
  servingScaler: servingScalerConfigOf(config),
  token,
  taskQueue: config.BERTH_TASK_QUEUE,
});
await serve(app, 'controller', {
  host: config.BERTH_CONTROLLER_HOST,
  port: config.BERTH_CONTROLLER_PORT,
  onClose: () => connection.close(),
});
