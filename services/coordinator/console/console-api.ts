/**
 * The console's API under /console/api: each route reads what the CLI reads, through the same
 * clients (the coordinator's own HTTP API, called with the cluster token, and the controller's),
 * so the page shows exactly what `berth nodes`, `berth table show`, `berth query`,
 * `berth pool status`, `berth cost`, `berth preflight` and `berth placement simulate` print. Only
 * a session reaches it (guard.ts).
 */
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { poolBill } from '../../../core/node-hours.js';
import { poolWorkflowId } from '../../../workflows/contracts/heavy-pool.js';
import { HttpError } from '../../common/errors.js';
import { ServiceCallError } from '../../common/http-client.js';
import { GroupParams } from '../../controller/api.js';
import { IngestParams, QueryRequest } from '../api.js';
import { CoordinatorClient } from '../client.js';
import { ControllerClient } from '../../controller/client.js';
import { MetaClient } from '../../meta/client.js';
import { requireSession } from './guard.js';
import { answerAsParquet } from './parquet-answer.js';
import { placementWhatIfOffThread } from './placement-what-if.js';
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
  /** The meta replicas this coordinator calls (BERTH_META_URL), each probed for the Cluster view. */
  metaUrls?: readonly string[];
}

/** The window of the pools' bill: `berth cost`'s default, --since 30d. */
const COST_DAYS = 30;

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
  // With the token: a preflight starts a workflow, and the controller asks for it.
  const controller = options.controllerUrl ? new ControllerClient(options.controllerUrl, options.token) : undefined;

  app.get('/nodes', async () => ({ nodes: await coordinator().nodes().catch(relayed) }));
  // Each meta replica on its own (no failover to the others), as its readiness probe answers.
  app.get('/meta', async () => ({
    replicas: await Promise.all(
      (options.metaUrls ?? []).map((url) =>
        new MetaClient([url], options.token).ping().then(
          () => ({ url, ready: true }),
          (error: Error) => ({ url, ready: false, error: error.message }),
        ),
      ),
    ),
  }));
  app.get('/tables', async () => ({ tables: await coordinator().tables().catch(relayed) }));
  app.get('/tables/:table', { schema: { params: IngestParams } }, async (request) =>
    coordinator().table(request.params.table).catch(relayed),
  );
  app.get('/tables/:table/days', { schema: { params: IngestParams } }, async (request) =>
    coordinator().tableDays(request.params.table).catch(relayed),
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

  // The editor's Parquet download: the query run again, its answer written as Parquet here.
  app.post('/query.parquet', { schema: { body: QueryRequest } }, async (request, reply) => {
    const answer = await coordinator().query(request.body.sql).catch(relayed);
    return reply
      .type('application/vnd.apache.parquet')
      .header('content-disposition', 'attachment; filename="result.parquet"')
      .send(await answerAsParquet(answer));
  });

  // The pools as `berth pool status` shows them, with the bill `berth cost` prints for the last
  // 30 days (its defaults), and the admission figures of every workload group.
  app.get('/pools', async () => ({
    temporalUi: options.temporalUi,
    groups: await coordinator()
      .workloadGroups()
      .catch(() => []),
    pools: await Promise.all(
      options.heavyGroups.map(async (group) => {
        const workflowId = poolWorkflowId(group);
        const link = options.temporalUi
          ? `${options.temporalUi}/namespaces/${encodeURIComponent(options.namespace)}/workflows/${encodeURIComponent(workflowId)}`
          : undefined;
        if (!controller) return { group, workflowId, link, error: 'no controller configured (BERTH_CONTROLLER_URL)' };
        try {
          const [status, usage] = await Promise.all([controller.poolStatus(group), controller.poolUsage(group)]);
          return { group, workflowId, link, status, cost: poolBill(usage, Date.now(), COST_DAYS) };
        } catch (error) {
          return { group, workflowId, link, error: (error as Error).message };
        }
      }),
    ),
  }));

  // A POST, not a GET: each run starts a workflow, so it needs the page's CSRF proof (guard.ts).
  app.post('/pools/:group/preflight', { schema: { params: GroupParams } }, async (request) => {
    if (!controller) throw new HttpError(503, 'no_controller', 'no controller configured (BERTH_CONTROLLER_URL)');
    return controller.preflight(request.params.group).catch(relayed);
  });

  app.get(
    '/placement',
    {
      schema: { querystring: Type.Object({ add: Type.Optional(Type.String()), remove: Type.Optional(Type.String()) }) },
    },
    async (request) => {
      // The coordinator's members: the nodes with a share of the segments.
      const nodes = await coordinator().nodes().catch(relayed);
      const members = nodes.filter((n) => n.share > 0).map((n) => ({ id: n.id, weight: n.weight }));
      return placementWhatIfOffThread(members, request.query);
    },
  );

  // Who is logged in: the page asks before drawing anything.
  app.get('/session', { schema: { response: { 200: Type.Object({ ok: Type.Literal(true) }) } } }, async () => ({
    ok: true as const,
  }));
}
