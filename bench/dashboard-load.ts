/**
 * What the interactive benchmarks send and how they send it: a dashboard's mix of small queries
 * over an events table, the rows of that table, closed-loop clients, and the CPU the cluster's
 * services use meanwhile. bench/load and bench/isolation share it.
 */
import { readdir, readFile } from 'node:fs/promises';

const SERVICES = ['api', 'web', 'auth', 'search'];

/** The mix: four shapes, each in four variants (another hour, another service), in a fixed order. */
export const DASHBOARD_MIX: string[] = [0, 1, 2, 3].flatMap((v) => [
  `SELECT service, count(*) AS n, avg(latency_ms) AS latency FROM events WHERE ts >= TIMESTAMP '2026-10-01 0${v}:00:00' AND ts < TIMESTAMP '2026-10-01 0${v}:30:00' GROUP BY service ORDER BY service`,
  `SELECT ts, service, status, latency_ms FROM events WHERE service = '${SERVICES[v]}' ORDER BY latency_ms DESC, ts LIMIT 10`,
  `SELECT count(DISTINCT user_id) AS users FROM events WHERE status >= ${500 + 20 * v}`,
  `SELECT status, count(*) AS n, sum(bytes) AS bytes FROM events WHERE service = '${SERVICES[v]}' AND status >= 400 GROUP BY status ORDER BY n DESC, status LIMIT 20`,
]);

/** Minutes the events table spans from 2026-10-01 00:00 (bench/load's 200,000 rows, 50 ms apart). */
const SPAN_MINUTES = 166;

/**
 * A dashboard's queries as its refreshes send them: the same four shapes as DASHBOARD_MIX, but
 * every query with its own literals (a time window that moves and changes width, a service, a
 * status threshold, a top-k's direction stays), drawn from `seed`; few texts repeat. Most read
 * most segments: a window is 10 minutes to 2 hours of a table about 2.8 hours long.
 */
export function movingMix(count: number, seed: number): string[] {
  let state = seed >>> 0 || 1;
  // xorshift32: the same queries for the same seed, on every machine.
  const draw = (n: number): number => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) % n;
  };
  const at = (minute: number): string =>
    `TIMESTAMP '2026-10-01 ${String(Math.floor(minute / 60)).padStart(2, '0')}:${String(minute % 60).padStart(2, '0')}:00'`;
  const window = (): string => {
    const width = [10, 15, 30, 45, 60, 90, 120][draw(7)]!;
    const from = draw(SPAN_MINUTES - width);
    return `ts >= ${at(from)} AND ts < ${at(from + width)}`;
  };
  const services = ['api', 'web', 'auth', 'search', 'billing', 'mail', 'cdn'];
  return Array.from({ length: count }, (_, i) => {
    const service = services[draw(services.length)]!;
    switch (i % 4) {
      case 0:
        return `SELECT service, count(*) AS n, avg(latency_ms) AS latency FROM events WHERE ${window()} GROUP BY service ORDER BY service`;
      case 1:
        return `SELECT ts, service, status, latency_ms FROM events WHERE service = '${service}' AND ${window()} ORDER BY latency_ms DESC, ts LIMIT 10`;
      case 2:
        return `SELECT count(DISTINCT user_id) AS users FROM events WHERE status >= ${400 + draw(200)} AND ${window()}`;
      default:
        return `SELECT status, count(*) AS n, sum(bytes) AS bytes FROM events WHERE service = '${service}' AND status >= ${300 + draw(300)} GROUP BY status ORDER BY n DESC, status LIMIT 20`;
    }
  });
}

/** The events table's rows `from` to `to` (50 ms apart from 2026-10-01, in time order), as DuckDB SQL. */
export const eventRows = (from: number, to: number): string =>
  `SELECT TIMESTAMP '2026-10-01' + to_milliseconds(i * 50) AS ts,
          ['api','web','auth','search','billing','mail','cdn'][1 + (hash(i) % 7)::INT] AS service,
          (hash(i * 3) % 600)::INTEGER AS status, (hash(i * 11) % 100000)::INTEGER AS latency_ms, (hash(i * 5) % 10000000)::BIGINT AS bytes,
          md5((i % 5000)::VARCHAR)[1:16] AS user_id
        FROM range(${from}, ${to}) t(i) ORDER BY ts`;

/** The cluster's service processes (found by the directory each was given), by service. */
export async function servicePids(clusterDir: string): Promise<Map<string, number[]>> {
  const services = new Map<string, number[]>();
  const byVariable: Record<string, string> = {
    BERTH_COORDINATOR_DIR: 'coordinator',
    BERTH_NODE_CACHE_DIR: 'query nodes',
    BERTH_META_DIR: 'meta',
    BERTH_WORKER_DIR: 'worker',
  };
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const environ = await readFile(`/proc/${entry}/environ`, 'utf8').catch(() => '');
    for (const variable of environ.split('\0')) {
      const [name, value] = [variable.slice(0, variable.indexOf('=')), variable.slice(variable.indexOf('=') + 1)];
      if (byVariable[name] && value.startsWith(clusterDir))
        services.set(byVariable[name], [...(services.get(byVariable[name]) ?? []), Number(entry)]);
    }
  }
  return services;
}

/** CPU time (user + system, every thread) each service has used so far, in ms. */
export async function cpuMs(pids: Map<string, number[]>): Promise<Map<string, number>> {
  const ticks = 10; // ms per clock tick (USER_HZ = 100)
  const out = new Map<string, number>();
  for (const [service, list] of pids) {
    let total = 0;
    for (const pid of list) {
      const fields = (await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '')).split(') ')[1]?.split(' ') ?? [];
      total += (Number(fields[11] ?? 0) + Number(fields[12] ?? 0)) * ticks;
    }
    out.set(service, total);
  }
  return out;
}

export interface Level {
  concurrency: number;
  queries: number;
  wallMs: number;
  /** Latencies of answered queries. */
  latencies: number[];
  refused: number;
  errors: string[];
}

/** Runs `count` queries of `mix`, in turn, through `concurrency` closed-loop clients; `send` answers 'ok', 'refused' (with a wait) or throws. */
export async function runLevel(
  concurrency: number,
  count: number,
  send: (client: number, sql: string) => Promise<{ refusedForMs?: number }>,
  mix: readonly string[] = DASHBOARD_MIX,
): Promise<Level> {
  let next = 0;
  const level: Level = { concurrency, queries: count, wallMs: 0, latencies: [], refused: 0, errors: [] };
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, client) => {
      for (let i = next++; i < count; i = next++) {
        const sql = mix[i % mix.length]!;
        const t0 = performance.now();
        try {
          const { refusedForMs } = await send(client, sql);
          if (refusedForMs === undefined) level.latencies.push(performance.now() - t0);
          else {
            level.refused++;
            await new Promise((resolve) => setTimeout(resolve, refusedForMs));
          }
        } catch (error) {
          level.errors.push((error as Error).message.slice(0, 200));
        }
      }
    }),
  );
  level.wallMs = performance.now() - started;
  return level;
}
