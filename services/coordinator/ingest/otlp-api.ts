/**
 * OTLP/HTTP's logs endpoint, POST /v1/logs, as OpenTelemetry's exporters and the Collector's
 * otlphttp exporter send to it: protobuf or JSON, gzip or not, the token as a bearer token or the
 * basic-auth password. Answered only once the rows are committed: 200 with an
 * ExportLogsServiceResponse (partial_success naming the records refused), or a status the
 * exporters retry (503) when nothing was committed and sending again may, each error with a
 * google.rpc.Status in the request's encoding. A fastify plugin, so that its routes read any body
 * as a stream.
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Readable } from 'node:stream';
import temporalProto from '@temporalio/proto';
import { TABLE_NAME } from '../../../core/identifiers.js';
import { carriesToken } from '../../common/auth.js';
import { wholeBody } from '../../common/body-limit.js';
import { badRequest, DomainError, httpAnswerOf } from '../../common/errors.js';
import { passOnRefusal } from '../../common/http-client.js';
import type { MetaClient, TableInfo } from '../../meta/client.js';
import { ALREADY_COMMITTED, type Ingestor } from './ingest.js';
import type { IngestMetrics } from './ingest-metrics.js';
import {
  decodeExportRequest,
  DEFAULT_LOGS_TABLE,
  encodeExportResponse,
  LOGS_COLUMNS,
  LOGS_TIMESTAMP_COLUMN,
  logRows,
  type OtlpEncoding,
} from './otlp-logs.js';

const { google } = temporalProto;

/** The metrics label of this path. */
export const OTLP_PATH = 'otlp';

/** The header that names the table an export lands in. */
export const TABLE_HEADER = 'x-berth-table';

export interface OtlpApiOptions {
  ingestor: Ingestor;
  meta: MetaClient;
  token: string;
  /** Largest export, as sent and once decompressed (BERTH_SHIPPER_MAX_BYTES). */
  maxBodyBytes: number;
  metrics: IngestMetrics;
}

const MEDIA_TYPES: Record<string, OtlpEncoding> = { 'application/x-protobuf': 'protobuf', 'application/json': 'json' };
const encodingOf = (request: FastifyRequest): OtlpEncoding | undefined =>
  MEDIA_TYPES[(request.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase()];

/** gRPC's codes for the statuses answered here. */
const GRPC_CODE: Record<number, number> = { 400: 3, 401: 16, 413: 8, 415: 3, 500: 13, 503: 14 };

/** An error answer: its status, and a google.rpc.Status saying why, in the request's encoding (JSON for an unknown one). */
function sendStatus(request: FastifyRequest, reply: FastifyReply, status: number, message: string) {
  const code = GRPC_CODE[status] ?? 2;
  if (encodingOf(request) === 'protobuf')
    return reply
      .code(status)
      .type('application/x-protobuf')
      .send(Buffer.from(google.rpc.Status.encode({ code, message }).finish()));
  return reply.code(status).type('application/json').send({ code, message });
}

/**
 * The logs table, made with the logs columns if it does not exist yet; one that exists must have
 * them with their types (a column a later Berth adds is added to it), or the export is a 400.
 */
async function logsTable(meta: MetaClient, table: string): Promise<TableInfo> {
  let info =
    (await meta.findTable(table)) ??
    (await meta
      .ensureTable({ name: table, timestampColumn: LOGS_TIMESTAMP_COLUMN, columns: LOGS_COLUMNS })
      .catch(passOnRefusal));
  const notLogs = (why: string) =>
    badRequest('not_a_logs_table', `table "${table}" is not an OTLP logs table: ${why} (see docs/concepts.md)`);
  if (info.timestampColumn !== LOGS_TIMESTAMP_COLUMN)
    throw notLogs(`its timestamp column is ${JSON.stringify(info.timestampColumn)}, not "${LOGS_TIMESTAMP_COLUMN}"`);
  for (const column of LOGS_COLUMNS) {
    const had = info.columns.find((c) => c.name.toLowerCase() === column.name.toLowerCase());
    if (had && (had.name !== column.name || had.type !== column.type))
      throw notLogs(`its column ${had.name} is ${had.type}, not ${column.name} ${column.type}`);
  }
  const missing = LOGS_COLUMNS.filter((column) => !info.columns.some((c) => c.name === column.name));
  if (missing.length > 0) info = await meta.addColumns(table, missing).catch(passOnRefusal);
  return info;
}

export async function otlpApi(app: FastifyInstance, options: OtlpApiOptions): Promise<void> {
  // Protobuf and JSON alike arrive as a stream: the handler bounds, decompresses and decodes them.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, payload, done) => done(null, payload));

  app.addHook('onRequest', async (request, reply) => {
    if (carriesToken(request.headers.authorization, options.token)) return;
    await sendStatus(
      request,
      reply,
      401,
      "the cluster's token is required: as a bearer token, or as the basic-auth password",
    );
  });
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const answer = httpAnswerOf(error);
    // Nothing committed, and sending again may commit (S3 or meta back, a dropped table made anew): 503, which exporters retry.
    const retryable =
      error instanceof DomainError && !['invalid', 'too_large', 'unsupported', 'inconsistent'].includes(error.kind);
    const status = retryable
      ? 503
      : (answer?.status ?? (error.statusCode && error.statusCode < 500 ? error.statusCode : 500));
    if (status === 500) request.log.error({ err: error }, 'an OTLP export failed');
    return sendStatus(
      request,
      reply,
      status,
      status === 500 ? 'internal error; see the coordinator log' : error.message,
    );
  });

  app.post('/v1/logs', async (request, reply) => {
    const arrived = performance.now();
    const encoding = encodingOf(request);
    if (!encoding)
      throw new DomainError(
        'unsupported',
        'unsupported_media_type',
        `Content-Type must be application/x-protobuf or application/json, not "${request.headers['content-type'] ?? ''}"`,
      );
    const named = request.headers[TABLE_HEADER];
    const table = typeof named === 'string' ? named : DEFAULT_LOGS_TABLE;
    if (!TABLE_NAME.test(table))
      throw badRequest('invalid_table_name', `${TABLE_HEADER} "${table.slice(0, 80)}" is not a table name`);
    const body = await wholeBody(request, options.maxBodyBytes).catch((error: unknown) => {
      reply.header('connection', 'close'); // the rest of a refused body is left unread
      throw error;
    });
    options.metrics.received(OTLP_PATH, body.length);
    const { request: exported, hexIds } = decodeExportRequest(body, encoding);
    const { ndjson, rows, rejected, firstRejection } = logRows(exported, hexIds);
    options.metrics.notCommitted(OTLP_PATH, 'invalid', rejected);
    if (rows > 0) {
      try {
        await logsTable(options.meta, table);
        const { push } = await options.ingestor.ingest(table, Readable.from([ndjson]));
        options.metrics.committed(OTLP_PATH, push.reason === ALREADY_COMMITTED ? 0 : rows, arrived);
      } catch (error) {
        options.metrics.notCommitted(
          OTLP_PATH,
          error instanceof DomainError && error.kind === 'invalid' ? 'invalid' : 'retryable',
          rows,
        );
        throw error;
      }
    }
    const message = rejected > 0 ? `${rejected} log record(s) refused; the first: ${firstRejection}` : '';
    const response = encodeExportResponse(encoding, rejected, message);
    return reply
      .code(200)
      .type(encoding === 'json' ? 'application/json' : 'application/x-protobuf')
      .send(response);
  });
}
