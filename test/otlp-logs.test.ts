/**
 * OTLP/HTTP logs on the coordinator (issue 30, item 3), through OpenTelemetry's own JS SDK and its
 * two OTLP/HTTP log exporters, JSON and protobuf (gzip-compressed): the records are queryable with
 * their attributes, severity, body, trace and span ids, resource and scope, both encodings landing
 * as the same rows; a record without a time comes back as partial_success; the token is required;
 * and the coordinator's /metrics counts each path's rows.
 */
import { ROOT_CONTEXT, trace, TraceFlags } from '@opentelemetry/api';
import { SeverityNumber } from '@opentelemetry/api-logs';
import { CompressionAlgorithm } from '@opentelemetry/otlp-exporter-base';
import { OTLPLogExporter as JsonLogExporter } from '@opentelemetry/exporter-logs-otlp-http';
import { OTLPLogExporter as ProtobufLogExporter } from '@opentelemetry/exporter-logs-otlp-proto';
import { Resource } from '@opentelemetry/resources';
import { LoggerProvider, SimpleLogRecordProcessor, type LogRecordExporter } from '@opentelemetry/sdk-logs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, TOKEN, type TestCluster } from './helpers/cluster.js';
import { resultDifference } from './helpers/compare-results.js';

/** What every record emitted here carries from its resource and scope: service, environment, cpus, scope name and version. */
const FROM_CHECKOUT = ['checkout', 'test', '4', 'payments', '1.4.2'];
const TRACE_ID = '5b8efff798038103d269b633813fc60c';
const SPAN_ID = 'eee19b7ec3c1b174';
/** 2026-11-01T12:00:00.123456789Z, to the nanosecond. */
const SECONDS = Date.parse('2026-11-01T12:00:00Z') / 1000;

/** Emits the same three records through `exporter`, from one service and one scope, and waits for them to be sent. */
async function emitThrough(exporter: LogRecordExporter): Promise<void> {
  const provider = new LoggerProvider({
    resource: new Resource({ 'service.name': 'checkout', 'deployment.environment': 'test', 'host.cpus': 4 }),
  });
  provider.addLogRecordProcessor(new SimpleLogRecordProcessor(exporter));
  const logger = provider.getLogger('payments', '1.4.2');
  const inSpan = trace.setSpanContext(ROOT_CONTEXT, {
    traceId: TRACE_ID,
    spanId: SPAN_ID,
    traceFlags: TraceFlags.SAMPLED,
  });
  logger.emit({
    timestamp: [SECONDS, 123_456_789],
    severityNumber: SeverityNumber.WARN,
    severityText: 'WARN',
    body: 'payment declined',
    attributes: { 'http.route': '/pay', 'retry.count': 3, amount: 12.5, ok: false, tags: ['card', 'eu'] },
    context: inSpan,
  });
  logger.emit({
    timestamp: [SECONDS + 1, 0],
    severityNumber: SeverityNumber.ERROR,
    severityText: 'ERROR',
    body: { code: 402, reason: 'insufficient funds' },
    attributes: { 'http.route': '/pay' },
    context: inSpan,
  });
  logger.emit({ timestamp: [SECONDS + 2, 500], body: 'no severity, no trace', context: ROOT_CONTEXT });
  await provider.forceFlush();
  await provider.shutdown();
}

describe('OTLP/HTTP logs on the coordinator', () => {
  let cluster: TestCluster;
  beforeAll(async () => {
    cluster = await startCluster({ vcpus: [2] });
  });
  afterAll(() => cluster?.close());

  const query = async (sql: string) => {
    const { status, body } = await cluster.query(sql);
    expect(status, body.message).toBe(200);
    return body;
  };
  const ROWS_SQL = (table: string) =>
    `SELECT timestamp, time_unix_nano, observed_time_unix_nano IS NOT NULL AS observed, severity_number, severity_text, body,
       attributes['http.route'] AS route, attributes['retry.count'] AS retries, attributes['amount'] AS amount,
       attributes['ok'] AS ok, attributes['tags'] AS tags, cardinality(attributes) AS attribute_count,
       trace_id, span_id, flags, service_name, resource_attributes['deployment.environment'] AS env,
       resource_attributes['host.cpus'] AS cpus, scope_name, scope_version
     FROM ${table} ORDER BY time_unix_nano`;

  it('stores what the SDK’s JSON exporter sends, queryable by attribute, severity and trace id', async () => {
    await emitThrough(
      new JsonLogExporter({
        url: `${cluster.coordinator.url}/v1/logs`,
        headers: { Authorization: `Bearer ${TOKEN}`, 'X-Berth-Table': 'app_logs' },
        compression: CompressionAlgorithm.GZIP,
      }),
    );
    const { rows, types } = await query(ROWS_SQL('app_logs'));
    expect(types.slice(0, 6)).toEqual(['TIMESTAMP', 'UBIGINT', 'BOOLEAN', 'INTEGER', 'VARCHAR', 'VARCHAR']);
    expect(rows).toEqual([
      [
        '2026-11-01 12:00:00.123456',
        String(BigInt(SECONDS) * 1_000_000_000n + 123_456_789n),
        true,
        SeverityNumber.WARN,
        'WARN',
        'payment declined',
        '/pay',
        '3',
        '12.5',
        'false',
        '["card","eu"]',
        5,
        TRACE_ID,
        SPAN_ID,
        1,
        ...FROM_CHECKOUT,
      ],
      [
        '2026-11-01 12:00:01',
        String(BigInt(SECONDS + 1) * 1_000_000_000n),
        true,
        SeverityNumber.ERROR,
        'ERROR',
        '{"code":402,"reason":"insufficient funds"}',
        '/pay',
        null,
        null,
        null,
        null,
        1,
        TRACE_ID,
        SPAN_ID,
        1,
        ...FROM_CHECKOUT,
      ],
      [
        '2026-11-01 12:00:02',
        String(BigInt(SECONDS + 2) * 1_000_000_000n + 500n),
        true,
        null,
        null,
        'no severity, no trace',
        null,
        null,
        null,
        null,
        null,
        0,
        null,
        null,
        0,
        ...FROM_CHECKOUT,
      ],
    ]);
    // By trace id and attribute, as a user looks a request's logs up; the time prunes like any table's.
    expect(
      (
        await query(
          `SELECT count(*) FROM app_logs WHERE trace_id = '${TRACE_ID}' AND attributes['http.route'] = '/pay'`,
        )
      ).rows,
    ).toEqual([[2]]);
  });

  it('stores what the SDK’s protobuf exporter sends as the same rows as JSON', async () => {
    await emitThrough(
      new ProtobufLogExporter({
        url: `${cluster.coordinator.url}/v1/logs`,
        headers: { Authorization: `Bearer ${TOKEN}` },
        compression: CompressionAlgorithm.GZIP,
      }),
    );
    // No table named: the default one, otel_logs.
    const protobuf = await query(ROWS_SQL('otel_logs'));
    const json = await query(ROWS_SQL('app_logs'));
    expect(protobuf.rows).toHaveLength(3);
    expect(resultDifference(protobuf, json, true)).toBeUndefined();
  });

  it('answers partial_success for a record without a time, and commits the rest', async () => {
    const record = (time: string) => ({ timeUnixNano: time, body: { stringValue: `at ${time}` } });
    const response = await fetch(`${cluster.coordinator.url}/v1/logs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}`, 'x-berth-table': 'partial' },
      body: JSON.stringify({
        resourceLogs: [
          {
            scopeLogs: [
              {
                // The SDK sends no scope attributes; the Collector does.
                scope: { name: 'raw', attributes: [{ key: 'scope.kind', value: { stringValue: 'library' } }] },
                logRecords: [record('1793534400000000000'), record('0'), record('1793534401000000001')],
              },
            ],
          },
        ],
      }),
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({
      partialSuccess: {
        rejectedLogRecords: '1',
        errorMessage: expect.stringMatching(
          /^1 log record\(s\) refused; the first: resourceLogs\[0\]\.scopeLogs\[0\]\.logRecords\[1\]: it has neither timeUnixNano nor observedTimeUnixNano/,
        ) as string,
      },
    });
    expect(
      (await query(`SELECT body, time_unix_nano, scope_attributes['scope.kind'] FROM partial ORDER BY 2`)).rows,
    ).toEqual([
      ['at 1793534400000000000', '1793534400000000000', 'library'],
      ['at 1793534401000000001', '1793534401000000001', 'library'],
    ]);
  });

  it('requires the token, refuses a body that is not OTLP with 400, and counts each path on /metrics', async () => {
    const post = (headers: Record<string, string>, body: string | Buffer) =>
      fetch(`${cluster.coordinator.url}/v1/logs`, { method: 'POST', headers, body });
    const unauthorized = await post({ 'content-type': 'application/json' }, '{}');
    expect(unauthorized.status).toBe(401);
    expect(await unauthorized.json()).toMatchObject({ code: 16 });
    const basic = `Basic ${Buffer.from(`collector:${TOKEN}`).toString('base64')}`;
    const notOtlp = await post({ 'content-type': 'application/json', authorization: basic }, '{"resourceLogs": 7}');
    expect(notOtlp.status).toBe(400);
    expect(await notOtlp.json()).toMatchObject({
      code: 3,
      message: expect.stringMatching(/resourceLogs is not a list/),
    });
    const protobuf = await post(
      { 'content-type': 'application/x-protobuf', authorization: basic },
      Buffer.from([0x0a, 0xff, 0xff]),
    );
    expect(protobuf.status).toBe(400);
    expect(protobuf.headers.get('content-type')).toMatch(/application\/x-protobuf/);
    const text = await post({ 'content-type': 'text/plain', authorization: basic }, 'hello');
    expect(text.status).toBe(415);

    const metrics = await (await fetch(`${cluster.coordinator.url}/metrics`)).text();
    expect(metrics).toMatch(/^berth_ingest_rows_total\{path="otlp"\} 8$/m);
    expect(metrics).toMatch(/^berth_ingest_errors_total\{path="otlp",kind="invalid"\} 1$/m);
    expect(metrics).toMatch(/^berth_ingest_commit_seconds_count\{path="otlp"\} 7$/m);
    expect(metrics).toMatch(/^berth_ingest_rows_total\{path="bulk"\} 0$/m);
  });
});
