/**
 * Each process's configuration schema: values that do not fit are refused at boot naming the
 * variable, defaults are filled in, and docs/configuration.md's table says what the schemas
 * say (every variable, the processes that read it, its default).
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Type, type TObject, type TSchema } from 'typebox';
import { describe, expect, it } from 'vitest';
import { ConfigError, heavyPoolsOf, parseConfig, servingScalerConfigOf } from '../services/common/config.js';
import { availableMemoryBytes, memoryLimitOf } from '../services/common/duckdb.js';
import { ControllerConfig } from '../services/controller/config.js';
import { CoordinatorConfig } from '../services/coordinator/config.js';
import { MetaConfig } from '../services/meta/config.js';
import { QueryNodeConfig } from '../services/query-node/config.js';
import { WorkerConfig } from '../workers/config.js';
import { POOL_DEFAULTS } from '../workflows/contracts/heavy-pool.js';
import { spawnOwned } from './helpers/process-groups.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const TOKEN = 'config-test-token-0123456789abcdef';
const BASE = { BERTH_TOKEN: TOKEN, BERTH_META_URL: 'http://127.0.0.1:1' };

/** The name docs/configuration.md's service column gives each process. */
const PROCESSES: Record<string, TObject> = {
  meta: MetaConfig,
  node: QueryNodeConfig,
  coordinator: CoordinatorConfig,
  controller: ControllerConfig,
  worker: WorkerConfig,
};

describe('a process’s configuration', () => {
  it('refuses a heavy increment of 0 and a fractional query limit, naming each variable', () => {
    expect(() =>
      parseConfig(CoordinatorConfig, { ...BASE, BERTH_HEAVY_GROUP: 'heavy', BERTH_HEAVY_INCREMENT: '0' }),
    ).toThrow(new ConfigError('BERTH_HEAVY_INCREMENT must be at least 1, not "0"'));
    expect(() => parseConfig(CoordinatorConfig, { ...BASE, BERTH_MAX_CONCURRENT_QUERIES: '2.5' })).toThrow(
      new ConfigError('BERTH_MAX_CONCURRENT_QUERIES must be a whole number, not "2.5"'),
    );
  });

  it('names every variable that is wrong or missing at once', () => {
    const attempt = () =>
      parseConfig(QueryNodeConfig, {
        BERTH_NODE_PORT: '70000',
        BERTH_NODE_GROUP: 'a/b',
        BERTH_WARM_INTERVAL_MS: 'soon',
      });
    expect(attempt).toThrow(ConfigError);
    const message = (() => {
      try {
        attempt();
      } catch (error) {
        return (error as Error).message;
      }
    })();
    expect(message).toContain('BERTH_TOKEN must be set');
    expect(message).toContain('BERTH_META_URL must be set');
    expect(message).toContain('BERTH_NODE_PORT must be at most 65535, not "70000"');
    expect(message).toContain('BERTH_NODE_GROUP must match');
    expect(message).toContain('BERTH_WARM_INTERVAL_MS must be a whole number, not "soon"');
  });

  it('refuses a switch that is neither on nor off, and a platform it does not know', () => {
    expect(() => parseConfig(ControllerConfig, { ...BASE, BERTH_SERVING_AUTOSCALE: 'yes' })).toThrow(
      'BERTH_SERVING_AUTOSCALE must be 1, 0, true or false, not "yes"',
    );
    expect(() => parseConfig(WorkerConfig, { ...BASE, BERTH_PLATFORM: 'nomad' })).toThrow(
      'BERTH_PLATFORM must be one of local, kubernetes, not "nomad"',
    );
  });

  it('fills in the defaults, treats empty variables as unset, and builds the pool and autoscaler settings from them', () => {
    const config = parseConfig(CoordinatorConfig, {
      ...BASE,
      BERTH_HEAVY_GROUP: 'heavy',
      BERTH_HEAVY_MAX_REPLICAS: '6',
      BERTH_COORDINATOR_PORT: '',
      BERTH_SERVING_AUTOSCALE: 'true',
    });
    expect(config.BERTH_COORDINATOR_PORT).toBe(7401);
    expect(config.BERTH_MAX_CONCURRENT_QUERIES).toBe(16);
    expect(heavyPoolsOf(config)).toEqual({ scan: { group: 'heavy', ...POOL_DEFAULTS, maxReplicas: 6 } });
    expect(servingScalerConfigOf(config)).toMatchObject({ group: 'serving', floor: 1, max: 8 });
    expect(heavyPoolsOf(parseConfig(CoordinatorConfig, BASE))).toEqual({});
    expect(servingScalerConfigOf(parseConfig(CoordinatorConfig, BASE))).toBeUndefined();
  });

  it('builds the memory class as a second heavy group of one backend per launch, beside the scan group only', () => {
    const env = {
      ...BASE,
      BERTH_HEAVY_GROUP: 'heavy',
      BERTH_HEAVY_INCREMENT: '4',
      BERTH_HEAVY_IDLE_TIMEOUT_MS: '9000',
    };
    const { scan, memory } = heavyPoolsOf(
      parseConfig(CoordinatorConfig, { ...env, BERTH_HEAVY_MEMORY_GROUP: 'heavy-memory' }),
    );
    expect(scan).toMatchObject({ group: 'heavy', increment: 4, idleTimeoutMs: 9000 });
    expect(memory).toEqual({
      ...scan,
      group: 'heavy-memory',
      increment: 1,
      maxReplicas: 1,
      maxConcurrency: 2,
      bottleneck: 'memory',
    });
    const wider = parseConfig(CoordinatorConfig, {
      ...env,
      BERTH_HEAVY_MEMORY_GROUP: 'heavy-memory',
      BERTH_HEAVY_MEMORY_MAX_REPLICAS: '3',
    });
    expect(heavyPoolsOf(wider).memory).toMatchObject({ increment: 1, maxReplicas: 3 });
    const alone = parseConfig(CoordinatorConfig, { ...BASE, BERTH_HEAVY_MEMORY_GROUP: 'heavy-memory' });
    expect(() => heavyPoolsOf(alone)).toThrow('BERTH_HEAVY_MEMORY_GROUP needs BERTH_HEAVY_GROUP set too');
    const same = parseConfig(CoordinatorConfig, { ...env, BERTH_HEAVY_MEMORY_GROUP: 'heavy' });
    expect(() => heavyPoolsOf(same)).toThrow(ConfigError);
  });

  it('reads a DuckDB memory limit as a size or as a share of the memory available, and refuses anything else at boot', () => {
    const mib = (share: number) => `${Math.floor((availableMemoryBytes() * share) / 1024 ** 2)}MiB`;
    expect(memoryLimitOf('60%')).toBe(mib(0.6));
    expect(memoryLimitOf(undefined)).toBe(mib(0.25));
    expect(memoryLimitOf('2GB')).toBe('2GB');
    expect(() => memoryLimitOf('150%')).toThrow('at most 100 %');
    for (const limit of ['40%', '512 MiB', '2GB', '1.5GiB', '4G'])
      expect(parseConfig(QueryNodeConfig, { ...BASE, BERTH_FINAL_STAGE_MEMORY_LIMIT: limit })).toBeDefined();
    expect(() => parseConfig(QueryNodeConfig, { ...BASE, BERTH_DUCKDB_MEMORY_LIMIT: 'lots' })).toThrow(
      'BERTH_DUCKDB_MEMORY_LIMIT must match',
    );
  });

  it('stops a service at boot with EX_CONFIG and the variable named, before it starts anything', async () => {
    for (const [script, env] of [
      ['dist/services/coordinator/main.js', { BERTH_HEAVY_GROUP: 'heavy', BERTH_HEAVY_INCREMENT: '0' }],
      ['dist/workers/main.js', { BERTH_MERGE_CONCURRENCY: '2.5' }],
      ['dist/services/controller/main.js', { BERTH_HEAVY_MEMORY_GROUP: 'heavy-memory' }],
      ['dist/workers/main.js', { BERTH_HEAVY_GROUP: 'heavy', BERTH_HEAVY_MEMORY_GROUP: 'heavy' }],
    ] as const) {
      const child = spawnOwned(process.execPath, [path.join(ROOT, script)], {
        env: { PATH: process.env.PATH, ...BASE, ...env },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let stderr = '';
      child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      const code = await new Promise((resolve) => child.once('exit', resolve));
      expect({ script, code }).toEqual({ script, code: 78 });
      expect(stderr).toContain(Object.keys(env).at(-1)!);
    }
  });
});

/** A default as docs/configuration.md writes it: sizes in GiB or MiB, switches as off/on, the rest as code. */
function readmeDefault(value: unknown): string {
  if (typeof value === 'boolean') return value ? 'on' : 'off';
  if (typeof value === 'number' && value >= 1024 ** 2) {
    if (value % 1024 ** 3 === 0) return `${value / 1024 ** 3} GiB`;
    if (value % 1024 ** 2 === 0) return `${value / 1024 ** 2} MiB`;
  }
  return `\`${String(value)}\``;
}

/** Drops parenthesised asides, nested ones included. */
const withoutAsides = (cell: string) => {
  let text = cell;
  for (let before = ''; before !== text;) [before, text] = [text, text.replace(/\([^()]*\)/g, '')];
  return text.trim();
};

type Setting = TSchema & { default?: unknown };

interface ReadmeRow {
  variables: string[];
  processes: Set<string>;
  defaults: string;
}

async function readmeConfigurationTable(): Promise<ReadmeRow[]> {
  const readme = await readFile(path.join(ROOT, 'docs', 'configuration.md'), 'utf8');
  const lines = readme.split('\n');
  const start = lines.indexOf('| variable | service | default | meaning |');
  expect(start).toBeGreaterThan(0);
  const rows: ReadmeRow[] = [];
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith('|')) break;
    const [names, service, defaults] = line.split(' | ').map((cell) => cell.replace(/^\| /, ''));
    const variables = [...names!.matchAll(/`(BERTH_[A-Z0-9_]+)`/g)].map((m) => m[1]!);
    if (variables.length === 0) continue; // OTEL_*: read by the OpenTelemetry setup, by its own conventions
    const named = withoutAsides(service!);
    const processes =
      named === 'same'
        ? rows.at(-1)!.processes
        : named === 'all'
          ? new Set(Object.keys(PROCESSES))
          : new Set(named.split(', ').map((p) => p.trim()));
    rows.push({ variables, processes, defaults: defaults! });
  }
  return rows;
}

describe('docs/configuration.md’s configuration table', () => {
  it('lists every variable of every process, with the processes that read it and the default its schema has', async () => {
    const rows = await readmeConfigurationTable();
    const documented = new Map(
      rows.flatMap((row) => row.variables.map((variable, index) => [variable, { row, index }] as const)),
    );
    const readers = new Map<string, string[]>();
    const settings = new Map<string, Setting>();
    const problems: string[] = [];
    for (const [process, schema] of Object.entries(PROCESSES)) {
      for (const [variable, setting] of Object.entries(schema.properties as Record<string, Setting>)) {
        readers.set(variable, [...(readers.get(variable) ?? []), process]);
        // A variable several processes read has one default, written once.
        const other = settings.get(variable);
        if (other && other.default !== setting.default)
          problems.push(
            `${variable}: ${String(other.default)} in one schema, ${String(setting.default)} in ${process}'s`,
          );
        settings.set(variable, setting);
      }
    }
    for (const variable of readers.keys())
      if (!documented.has(variable)) problems.push(`${variable}: not in docs/configuration.md`);
    for (const [variable, { row, index }] of documented) {
      const setting = settings.get(variable);
      if (!setting) {
        problems.push(`${variable}: in docs/configuration.md, read by no process`);
        continue;
      }
      const said = [...row.processes].sort().join(', ');
      const read = readers.get(variable)!.sort().join(', ');
      if (said !== read) problems.push(`${variable}: docs/configuration.md says ${said}, read by ${read}`);
      if (setting.default === undefined) {
        if (!Type.IsOptional(setting) && !row.defaults.includes('(required)'))
          problems.push(`${variable}: required, docs/configuration.md gives "${row.defaults}"`);
        continue;
      }
      const shown =
        row.variables.length === 1
          ? withoutAsides(row.defaults)
          : withoutAsides(row.defaults)
              .split(',')
              .map((cell) => cell.trim())[index];
      if (shown !== readmeDefault(setting.default))
        problems.push(
          `${variable}: docs/configuration.md's default is ${shown}, the schema's ${readmeDefault(setting.default)}`,
        );
    }
    expect(problems).toEqual([]);
  });
});
