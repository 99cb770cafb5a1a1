/**
 * The part of Elasticsearch's HTTP API that log shippers need to write to Berth: `_bulk`, and the
 * handshake their Elasticsearch outputs make before it (what each answer is and why:
 * docs/concepts.md "Log shippers"). A fastify plugin of its own: its routes take any body as a
 * stream, answer errors in Elasticsearch's shape, and say they are Elasticsearch's API (the header
 * the official clients, Logstash and Filebeat check) without touching the rest of the coordinator.
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Readable } from 'node:stream';
import { carriesToken } from '../../common/auth.js';
import { wholeBody } from '../../common/body-limit.js';
import { httpAnswerOf } from '../../common/errors.js';
import type { MetaClient } from '../../meta/client.js';
import { ingestBulk, parseBulk } from './elastic-bulk.js';
import type { Ingestor } from './ingest.js';
import type { IngestMetrics } from './ingest-metrics.js';

/**
 * The Elasticsearch version Berth answers as: the last 8.x, which Vector, Fluent Bit, Logstash 8
 * and Filebeat 8 all write to with the bulk API as Berth serves it.
 */
export const ELASTICSEARCH_VERSION = '8.19.0';

/** The metrics label of this path. */
export const BULK_PATH = 'bulk';

/** Largest shipper request, as sent and decompressed: Elasticsearch's own default (http.max_content_length), which shippers size their batches to. */
export const DEFAULT_SHIPPER_MAX_BYTES = 100 * 1024 * 1024;

export interface ElasticApiOptions {
  ingestor: Ingestor;
  meta: MetaClient;
  token: string;
  /** Largest bulk body, as sent and once decompressed (BERTH_SHIPPER_MAX_BYTES). */
  maxBodyBytes: number;
  /** Deepest nesting a document may have (BERTH_INGEST_MAX_DEPTH). */
  maxDepth: number;
  metrics: IngestMetrics;
}

/** Elasticsearch's error body: what its clients read a failed request's reason from. */
const esError = (status: number, type: string, reason: string) => ({
  error: { root_cause: [{ type, reason }], type, reason },
  status,
});

const ROOT = {
  name: 'berth-coordinator',
  cluster_name: 'berth',
  cluster_uuid: 'berth',
  version: {
    number: ELASTICSEARCH_VERSION,
    build_flavor: 'default',
    build_type: 'berth',
    build_snapshot: false,
    minimum_wire_compatibility_version: '7.17.0',
    minimum_index_compatibility_version: '7.0.0',
  },
  tagline: 'You Know, for Search',
};

/** An active basic license: Logstash marks a connection dead without one. */
const LICENSE = { uid: 'berth', type: 'basic', mode: 'basic', status: 'active', issued_to: 'berth', issuer: 'berth' };

export async function elasticApi(app: FastifyInstance, options: ElasticApiOptions): Promise<void> {
  // Any media type (NDJSON, JSON, Elasticsearch's vendor types, none): the handlers read the stream.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, payload, done) => done(null, payload));

  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-elastic-product', 'Elasticsearch');
    if (carriesToken(request.headers.authorization, options.token)) return;
    await reply
      .code(401)
      .header('www-authenticate', 'Basic realm="berth", Bearer realm="berth"')
      .send(
        esError(
          401,
          'security_exception',
          "the cluster's token is required: as a bearer token, or as the basic-auth password",
        ),
      );
  });
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const answer = httpAnswerOf(error);
    const status = answer?.status ?? (error.statusCode && error.statusCode < 500 ? error.statusCode : 500);
    if (status >= 500 && !answer) request.log.error({ err: error }, 'request failed');
    return reply
      .code(status)
      .send(
        esError(
          status,
          answer?.code ?? (status >= 500 ? 'internal' : (error.code ?? 'bad_request').toLowerCase()),
          answer?.message ?? (status >= 500 ? 'internal error; see the coordinator log' : error.message),
        ),
      );
  });

  // The handshake: who answers, its license and features, its health.
  app.get('/', async () => ROOT);
  app.get('/_license', async () => ({ license: LICENSE }));
  // No index lifecycle management (Berth's retention is its own): Logstash's `ilm_enabled => auto` turns ILM off.
  app.get('/_xpack', async () => ({
    build: { hash: 'berth', date: '' },
    license: LICENSE,
    features: { ilm: { available: false, enabled: false }, security: { available: true, enabled: true } },
  }));
  app.get('/_cluster/health', async () => ({
    cluster_name: 'berth',
    status: 'green',
    timed_out: false,
    number_of_nodes: 1,
    number_of_data_nodes: 1,
  }));

  // Templates and lifecycle policies: Berth keeps none; a table takes its columns from its
  // documents. Each is answered as there and accepted, so that a shipper set to install one goes on.
  const drain = (request: FastifyRequest) => (request.body as Readable | undefined)?.resume();
  for (const kind of ['_index_template', '_template', '_component_template', '_ilm/policy']) {
    app.head(`/${kind}/:name`, async (_request, reply) => reply.code(200).send());
    app.put(`/${kind}/:name`, async (request) => {
      drain(request);
      return { acknowledged: true };
    });
  }
  // An index is a table, made by its first documents: PUT acknowledges, HEAD says whether it exists.
  app.put<{ Params: { index: string } }>('/:index', async (request) => {
    drain(request);
    return { acknowledged: true, shards_acknowledged: true, index: request.params.index };
  });
  app.head<{ Params: { index: string } }>('/:index', async (request, reply) =>
    reply.code((await options.meta.findTable(request.params.index)) ? 200 : 404).send(),
  );

  const bulk = async (request: FastifyRequest<{ Params: { index?: string } }>, reply: FastifyReply) => {
    const arrived = performance.now();
    const body = await wholeBody(request, options.maxBodyBytes).catch((error: unknown) => {
      reply.header('connection', 'close'); // the rest of a refused body is left unread
      throw error;
    });
    options.metrics.received(BULK_PATH, body.length);
    const items = await parseBulk(body, request.params.index);
    const { answers, counts } = await ingestBulk(items, {
      ingestor: options.ingestor,
      meta: options.meta,
      maxDepth: options.maxDepth,
      onInternalError: (error) => request.log.error({ err: error }, 'a bulk batch failed'),
    });
    if (counts.committed > 0) options.metrics.committed(BULK_PATH, counts.committed, arrived);
    options.metrics.notCommitted(BULK_PATH, 'invalid', counts.refused);
    options.metrics.notCommitted(BULK_PATH, 'retryable', counts.failed);
    return {
      took: Math.round(performance.now() - arrived),
      errors: answers.some((a) => a.status >= 300),
      items: answers.map((answer, i) => ({ [items[i]!.action]: answer })),
    };
  };
  for (const url of ['/_bulk', '/:index/_bulk']) {
    app.post(url, bulk);
    app.put(url, bulk);
  }
}
