/**
 * Berth's errors as PostgreSQL's: an SQLSTATE for each (syntax 42601, an unknown table 42P01,
 * admission's 429 and 503 as 53300 and 57P03, the deadline and a cancel as 57014, the result cap
 * as 54000) and the message Berth would have answered over HTTP, DuckDB's own where it is DuckDB's.
 */
import { DomainError, httpAnswerOf } from '../../common/errors.js';
import type { Diagnostic } from './backend-messages.js';

/** The SQLSTATE of a DuckDB error message, by the kind DuckDB names first. */
export function duckdbSqlState(message: string): string {
  if (/^Parser Error/.test(message)) return '42601';
  if (/^Catalog Error: Table/.test(message)) return '42P01';
  if (/^Catalog Error: (Scalar |Table |Aggregate )?Function/.test(message)) return '42883';
  if (/^Binder Error: .*(column|Column).*not found/.test(message)) return '42703';
  if (/^Binder Error/.test(message)) return '42804';
  if (/^(Conversion|Invalid Input) Error/.test(message)) return '22P02';
  if (/^Out of Range Error/.test(message)) return '22003';
  if (/^Interrupt/.test(message)) return '57014';
  if (/^Out of Memory Error/.test(message)) return '53200';
  // The parser's own message names no kind (json_serialize_sql's error_message): a syntax error.
  if (!/^[A-Z][\w ]* Error:/.test(message)) return '42601';
  return '42000';
}

const BY_CODE: Record<string, string> = {
  unknown_table: '42P01',
  forbidden_relation: '42501',
  unsupported_sql: '0A000',
  result_too_large: '54000',
  deadline_exceeded: '57014',
  client_gone: '57014',
};

const BY_STATUS: Record<number, string> = {
  400: '42000',
  404: '42704',
  409: '40001',
  413: '54000',
  429: '53300',
  499: '57014',
  502: '58000',
  503: '57P03',
  504: '57014',
};

/** The ErrorResponse for a failed statement; undefined for a failure that is no client's (logged, answered XX000). */
export function diagnosticOf(error: unknown): Diagnostic | undefined {
  const answer = httpAnswerOf(error);
  if (!answer) return undefined;
  const code =
    answer.code === 'invalid_sql'
      ? duckdbSqlState(answer.message)
      : (BY_CODE[answer.code] ?? BY_STATUS[answer.status] ?? (answer.status < 500 ? '42000' : 'XX000'));
  const retryAfter = answer.headers['retry-after'];
  return {
    severity: 'ERROR',
    code,
    message: answer.message,
    ...(retryAfter ? { hint: `try again in ${retryAfter} s` } : {}),
    ...(error instanceof DomainError && answer.code !== 'invalid_sql' ? { detail: `Berth error ${answer.code}` } : {}),
  };
}
