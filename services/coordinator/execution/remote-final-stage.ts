/**
 * A heavy query's final stage on a heavy backend (query-node/final-stages.ts), behind the
 * exchange's own interface: the scan stage's streams are relayed to the backend as they arrive,
 * never held here, and the answer streams back. The coordinator's DuckDB never sees the rows.
 */
import type { Readable } from 'node:stream';
import { DomainError, HTTP_STATUS, HttpError, type ErrorKind } from '../../common/errors.js';
import { ServiceCallError } from '../../common/http-client.js';
import type { Exchange, RunOptions, StreamedRows } from '../../common/final-stage/exchange.js';
import { collectJsonRows, type SizedJsonResult } from '../../common/final-stage/result-json.js';
import type { SqlParameter } from '../../common/sql-parameters.js';
import type { QueryNodeClient } from '../../query-node/client.js';
import type { JsonValue } from '../api.js';
import type { ExchangeInput } from '../stages.js';

/** The code of a final stage lost with its backend (or failing there): the query may retry it once elsewhere. */
export const FINAL_STAGE_FAILED = 'final_stage_failed';

/** What runs a query's final stage: the coordinator's exchange, or a backend's through this module. */
export type FinalStage = Pick<Exchange, 'receive' | 'discard' | 'finish' | 'stream' | 'close'>;

const KIND_OF_STATUS = new Map(
  (Object.entries(HTTP_STATUS) as [ErrorKind, number][]).filter(([, status]) => status < 500).map(([k, s]) => [s, k]),
);

export class RemoteFinalStage implements FinalStage {
  private constructor(
    private readonly backend: QueryNodeClient,
    private readonly id: string,
    private readonly signal: AbortSignal,
  ) {}

  /** Opens the final stage on `backend`; it closes there by itself `ttlMs` after the last call. */
  static async open(
    backend: QueryNodeClient,
    inputs: ExchangeInput[],
    ttlMs: number,
    signal: AbortSignal,
  ): Promise<RemoteFinalStage> {
    const id = await backend.openFinalStage(inputs, ttlMs).catch((error) => {
      throw asOurs(error, backend, signal);
    });
    return new RemoteFinalStage(backend, id, signal);
  }

  /** Relays one scan's stream; a failure of the backend's (not of the stream's source) is the query's. */
  async receive(name: string, body: Readable): Promise<{ part: string; rows: number }> {
    return await this.backend.sendFinalStagePart(this.id, name, body, this.signal).catch((error) => {
      throw asOurs(error, this.backend, this.signal);
    });
  }

  async discard(name: string, part: string): Promise<void> {
    await this.backend.discardFinalStagePart(this.id, name, part).catch((error) => {
      throw asOurs(error, this.backend, this.signal);
    });
  }

  /** The whole answer, up to `maxBytes` of JSON rows (counted as the exchange counts them). */
  async finish(finalSql: string, options: RunOptions = {}): Promise<SizedJsonResult> {
    const { columns, types, rows, close } = await this.stream(finalSql, options.signal, options.parameters);
    try {
      return { columns, types, ...(await collectJsonRows(rows, options.maxBytes)) };
    } finally {
      close();
    }
  }

  async stream(
    finalSql: string,
    signal?: AbortSignal,
    parameters: readonly SqlParameter[] = [],
  ): Promise<StreamedRows> {
    const answer = await this.backend
      .finalStageAnswer(this.id, finalSql, signal ?? this.signal, parameters)
      .catch((error) => {
        throw asOurs(error, this.backend, this.signal);
      });
    const ours = (error: unknown) => asOurs(error, this.backend, this.signal);
    async function* rows(): AsyncGenerator<JsonValue[][]> {
      try {
        yield* answer.rows;
      } catch (error) {
        throw ours(error);
      }
    }
    return { ...answer, rows: rows() };
  }

  async close(): Promise<void> {
    // A backend gone closes it by itself: its time to live runs out.
    await this.backend.closeFinalStage(this.id).catch(() => {});
  }
}

/**
 * The backend's answer about the query (DuckDB's reason: a 4xx) as the coordinator's own; a stop
 * asked for here as its reason; anything else a 502 naming the backend, which may be retried.
 */
function asOurs(error: unknown, backend: QueryNodeClient, signal: AbortSignal): unknown {
  if (signal.aborted) return signal.reason;
  if (error instanceof DomainError || error instanceof HttpError) return error;
  if (error instanceof ServiceCallError) {
    const message = error.body?.message ?? error.message;
    // Data that disagrees with itself (a 500 with a code of Berth's) is the answer anywhere.
    if (error.status === 500 && error.code && error.code !== 'internal')
      return new DomainError('inconsistent', error.code, message);
    // A final stage the backend no longer has (it restarted, or it expired) is lost like the backend.
    const kind = error.status < 500 && error.code !== 'unknown_final_stage' && KIND_OF_STATUS.get(error.status);
    if (kind) return new DomainError(kind, error.code ?? 'invalid_sql', message);
  }
  const reason = error instanceof ServiceCallError ? (error.body?.message ?? error.message) : (error as Error).message;
  return new DomainError(
    'upstream_failed',
    FINAL_STAGE_FAILED,
    `the final stage on heavy backend ${backend.url} failed: ${reason}`,
    { cause: error },
  );
}
