/**
 * The console's API under /console/api: each route reads what the CLI reads, through the same
 * clients (the coordinator's own HTTP API, called with the cluster token, and the controller's),
 * so the page shows exactly what `berth nodes`, `berth table show`, `berth query` and
 * `berth pool status` print. Only a session reaches it (guard.ts).
 */
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { poolWorkflowId } from '../../../workflows/contracts/heavy-pool.js';
import { HttpError } from '../../common/errors.js';
import { ServiceCallError } from '../../common/http-client.js';
import { IngestParams, QueryRequest } from '../api.js';
import { CoordinatorClient } from '../client.js';
import { ControllerClient } from '../../controller/client.js';
import { requireSession } from './guard.js';
import type { Sessions } from './session.js';

export interface ConsoleApiOptions {
  sessions: Sessions;
  token: string;
  /** This coordinator's own URL, known once it listens. */
  selfUrl: () => string;
  /** The heavy pools' controller; without it the Heavy pools view says so. */
  controllerUrl?: string;
  /** The Temporal Web UI and namespace, for links to the pools' workflows. */
  temporalUi?: string;
  namespace: string;
  /** The heavy pools' groups, scan class first. */
  heavyGroups: string[];
}

/** A refusal from the API is passed on as it is; a service that does not answer is a 502. */
function relayed(error: unknown): never {
  if (error instanceof ServiceCallError)
    throw new HttpError(error.status, error.code ?? 'refused', error.body?.message ?? error.message);
  throw new HttpError(502, 'unreachable', (error as Error).message);
}

export async function consoleApi(scope: FastifyInstance, options: ConsoleApiOptions): Promise<void> {
  const app = scope.withTypeProvider<TypeBoxTypeProvider>();
  app.addHook('onRequest', requireSession(options.sessions));
  app.addHook('onSend', async (_request, reply) => {
    reply.header('cache-control', 'no-store');
  });
  const coordinator = () => new CoordinatorClient(options.selfUrl(), options.token);
  const controller = options.controllerUrl ? new ControllerClient(options.controllerUrl) : undefined;

  app.get('/nodes', async () => ({ nodes: await coordinator().nodes().catch(relayed) }));
  app.get('/tables', async () => ({ tables: await coordinator().tables().catch(relayed) }));
  app.get('/tables/:table', { schema: { params: IngestParams } }, async (request) =>
    coordinator().table(request.params.table).catch(relayed),
  );
  app.get('/queries', async () => coordinator().recentQueries().catch(relayed));

  // The editor's query: closing the request (the Cancel button aborts its fetch) stops it everywhere.
  app.post('/query', { schema: { body: QueryRequest } }, async (request, reply) => {
    const gone = new AbortController();
    reply.raw.once('close', () => {
      if (!reply.raw.writableFinished) gone.abort();
    });
    return coordinator().query(request.body.sql, gone.signal).catch(relayed);
  });

  app.get('/pools', async () => ({
    temporalUi: options.temporalUi,
    pools: await Promise.all(
      options.heavyGroups.map(async (group) => {
        const workflowId = poolWorkflowId(group);
        const link = options.temporalUi
          ? `${options.temporalUi}/namespaces/${encodeURIComponent(options.namespace)}/workflows/${encodeURIComponent(workflowId)}`
          : undefined;
        if (!controller) return { group, workflowId, link, error: 'no controller configured (BERTH_CONTROLLER_URL)' };
        try {
          return { group, workflowId, link, status: await controller.poolStatus(group) };
        } catch (error) {
          return { group, workflowId, link, error: (error as Error).message };
        }
      }),
    ),
  }));

  // Who is logged in: the page asks before drawing anything.
  app.get('/session', { schema: { response: { 200: Type.Object({ ok: Type.Literal(true) }) } } }, async () => ({
    ok: true as const,
  }));
}
