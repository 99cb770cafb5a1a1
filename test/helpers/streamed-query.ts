/** POST /v1/query with `Accept: application/x-ndjson`, read as a client would: line by line, to the end. */
import type { JsonValue, QueryStats } from '../../services/coordinator/api.js';

export interface StreamedAnswer {
  status: number;
  contentType: string | null;
  /** The first line: the columns and their types. */
  head?: { columns: string[]; types: string[] };
  rows: JsonValue[][];
  /** The last line: the stats, or what went wrong after the first line. */
  end?: { stats?: QueryStats; error?: string; status?: number; message?: string };
  /** A non-200 answer's JSON body. */
  error?: { error: string; message: string };
}

export async function streamedQuery(
  coordinatorUrl: string,
  sql: string,
  signal?: AbortSignal,
): Promise<StreamedAnswer> {
  const response = await fetch(`${coordinatorUrl}/v1/query`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/x-ndjson' },
    body: JSON.stringify({ sql }),
    signal,
  });
  const answer: StreamedAnswer = {
    status: response.status,
    contentType: response.headers.get('content-type'),
    rows: [],
  };
  const text = await response.text();
  if (response.status !== 200) return { ...answer, error: JSON.parse(text) as StreamedAnswer['error'] };
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  answer.head = JSON.parse(lines.shift()!) as StreamedAnswer['head'];
  answer.end = JSON.parse(lines.pop()!) as StreamedAnswer['end'];
  answer.rows = lines.map((line) => JSON.parse(line) as JsonValue[]);
  return answer;
}
