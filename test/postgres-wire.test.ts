/**
 * The coordinator's PostgreSQL front door, spoken to by real clients: psql (the corpus exact
 * against one DuckDB, values and types; \dt and \d; a syntax error; Ctrl-C), node-postgres over
 * the extended protocol with parameters, psycopg 3 with server-side binding, and the PostgreSQL
 * JDBC driver (DatabaseMetaData and a prepared statement); then a fuzzer's garbage, after which a
 * valid connection works as before.
 */
import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import forge from 'node-forge';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { DASHBOARD_MIX } from '../bench/dashboard-load.js';
import { QUERY_CORPUS } from './fixtures/query-corpus.js';
import { resultDifference } from './helpers/compare-results.js';
import { startCluster, TOKEN, type TestCluster } from './helpers/cluster.js';
import { startCoordinator } from '../services/coordinator/coordinator.js';
import { pgjdbcJar, psql, psycopgPath, runClient } from './helpers/pg-clients.js';
import { referenceFor, type Reference } from './helpers/reference.js';
import type { JsonValue } from '../services/common/final-stage/result-json.js';

/** PostgreSQL's name (psql's \gdesc) for each DuckDB type the corpus answers with: the type contract. */
function pgTypeName(duckdb: string): string {
  const decimal = /^DECIMAL\((\d+),(\d+)\)$/.exec(duckdb);
  if (decimal) return `numeric(${decimal[1]},${decimal[2]})`;
  if (/^(STRUCT|MAP)\(/.test(duckdb)) return 'json';
  const list = /^(.*)\[\]$/.exec(duckdb);
  if (list) return `${pgTypeName(list[1]!)}[]`;
  const names: Record<string, string> = {
    BOOLEAN: 'boolean',
    TINYINT: 'smallint',
    SMALLINT: 'smallint',
    INTEGER: 'integer',
    BIGINT: 'bigint',
    HUGEINT: 'numeric',
    UBIGINT: 'numeric',
    UHUGEINT: 'numeric',
    DOUBLE: 'double precision',
    FLOAT: 'real',
    VARCHAR: 'text',
    DATE: 'date',
    UTINYINT: 'smallint',
    USMALLINT: 'integer',
    UINTEGER: 'bigint',
    TIMESTAMP: 'timestamp without time zone',
    TIMESTAMP_S: 'timestamp without time zone',
    TIMESTAMP_MS: 'timestamp without time zone',
    // PostgreSQL keeps microseconds: nanoseconds go out as text, every digit kept.
    TIMESTAMP_NS: 'text',
    TIME: 'time without time zone',
    BLOB: 'bytea',
    UUID: 'uuid',
    'TIMESTAMP WITH TIME ZONE': 'timestamp with time zone',
    INTERVAL: 'interval',
  };
  return names[duckdb] ?? `(no PostgreSQL type for ${duckdb})`;
}

/** A psql value (CSV, NULL as \N) read back as the JSON value of its DuckDB type, as the reference gives it. */
function jsonOf(text: string, duckdb: string): JsonValue {
  if (text === '\\N') return null;
  if (duckdb.endsWith('[]')) {
    const inner = text.slice(1, -1);
    if (inner === '') return [];
    return inner
      .split(',')
      .map((item) => jsonOf(item === 'NULL' ? '\\N' : item.replace(/^"|"$/g, ''), duckdb.slice(0, -2)));
  }
  if (/^(STRUCT|MAP)\(/.test(duckdb)) return JSON.parse(text) as JsonValue;
  if (duckdb === 'BOOLEAN') return text === 't';
  if (/^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UBIGINT|DECIMAL\(\d+,0\))$/.test(duckdb)) {
    return Number.isSafeInteger(Number(text)) ? Number(text) : text;
  }
  if (/^DECIMAL/.test(duckdb)) {
    const digits = text.replace(/^-/, '').replace('.', '').replace(/^0+/, '').replace(/0+$/, '');
    return digits.length <= 15 ? Number(text) : text;
  }
  if (duckdb === 'DOUBLE' || duckdb === 'FLOAT') {
    if (['NaN', 'Infinity', '-Infinity'].includes(text)) return text;
    // A real is written in the fewest digits that read back as the same float.
    return duckdb === 'FLOAT' ? Math.fround(Number(text)) : Number(text);
  }
  return text;
}

/** Parses psql's --csv output (quoted fields, doubled quotes). */
function csvRows(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        field += '"';
        i++;
      } else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') {
      row.push(field);
      field = '';
    } else if (c === '\n') {
      row.push(field);
      rows.push(row);
      row = [];
      field = '';
    } else field += c;
  }
  if (field !== '' || row.length > 0) rows.push([...row, field]);
  return rows;
}

describe('the PostgreSQL front door', () => {
  let cluster: TestCluster;
  let reference: Reference;
  let url: string;
  let port: number;

  beforeAll(async () => {
    cluster = await startCluster({ vcpus: [2, 2], coordinator: { postgres: { port: 0 } } });
    await cluster.ingestEvents('events', 6, 1_000);
    reference = await referenceFor(cluster, ['events']);
    url = cluster.coordinator.postgresUrl!.replace('postgres://', 'postgres://berth@');
    port = Number(new URL(url).port);
  });
  afterAll(async () => {
    reference?.close();
    await cluster?.close();
  });

  describe('psql', () => {
    it('lists Berth’s tables with \\dt and describes one with \\d', async () => {
      const tables = await psql(url, TOKEN, ['-c', '\\dt']);
      expect(tables.stderr).toBe('');
      expect(tables.stdout).toMatch(/public \| events \| table \| berth/);
      const events = await psql(url, TOKEN, ['-c', '\\d events']);
      expect(events.stderr).toBe('');
      expect(events.stdout).toContain('Table "public.events"');
      for (const line of [
        /ts\s+\| timestamp without time zone/,
        /service\s+\| text/,
        /status\s+\| bigint/,
        /latency_ms\s+\| double precision/,
        /bytes\s+\| bigint/,
      ])
        expect(events.stdout).toMatch(line);
    });

    it('answers the query corpus exactly as one DuckDB, values and types', async () => {
      const script = QUERY_CORPUS.flatMap((q, i) => [
        `\\echo @@desc ${i}`,
        `${q.sql} \\gdesc`,
        `\\echo @@rows ${i}`,
        `${q.sql};`,
      ]).join('\n');
      const { code, stdout, stderr } = await psql(url, TOKEN, ['--csv', '-P', 'null=\\N', '-f', '-'], {
        input: script,
        timeoutMs: 300_000,
      });
      expect(stderr).toBe('');
      expect(code).toBe(0);
      const sections = new Map<string, string>();
      for (const part of stdout.split(/^@@/m).slice(1)) {
        const newline = part.indexOf('\n');
        sections.set(part.slice(0, newline), part.slice(newline + 1));
      }
      for (const [i, q] of QUERY_CORPUS.entries()) {
        const expected = await reference.run(q.sql);
        if (!('result' in expected)) throw new Error(expected.error);
        const described = csvRows(sections.get(`desc ${i}`)!).slice(1);
        expect(
          described.map((r) => r[1]),
          q.name,
        ).toEqual(expected.result.types.map(pgTypeName));
        const [header, ...rows] = csvRows(sections.get(`rows ${i}`)!);
        const actual = {
          columns: header!,
          rows: rows.map((r) => r.map((text, c) => jsonOf(text, expected.result.types[c]!))),
        };
        // The types were checked above; here they only say which values are doubles.
        const typed = { ...actual, types: expected.result.types };
        expect(resultDifference(typed, expected.result, q.ordered), q.name).toBeUndefined();
      }
    });

    it('answers a syntax error with 42601 and DuckDB’s own message', async () => {
      const sql = 'SELECT service FROM events WHERE';
      const expected = await reference.run(sql);
      if (!('error' in expected)) throw new Error('the reference answered');
      const { code, stderr } = await psql(url, TOKEN, ['-v', 'VERBOSITY=verbose', '-c', sql]);
      expect(code).not.toBe(0);
      expect(stderr).toContain('ERROR:  42601: ');
      // DuckDB's message, after the kind it names (the SQLSTATE says that now).
      expect(stderr).toContain(expected.error.split('\n')[0]!.replace(/^.*Parser Error: /, ''));
    });

    it('copies a query’s rows out with COPY … TO STDOUT byte for byte as PostgreSQL does', async () => {
      // Values each format must escape: its delimiter, quotes, a line break, a tab, a backslash, the
      // empty string, a string that reads as text's NULL, and NULL itself.
      const values = `SELECT * FROM (VALUES (1, 'plain'), (2, 'a,b;c'), (3, 'say "hi"'), (4, 'line' || chr(10) || 'break'),
        (5, 'tab' || chr(9) || 'back\\slash'), (6, ''), (7, '\\N'), (8, NULL)) AS t(id, s) ORDER BY id`;
      const postgres = inject('postgresUrl');
      for (const options of ['', 'WITH (FORMAT csv, HEADER)', "WITH CSV HEADER DELIMITER ';'", "(NULL 'nil')"]) {
        const command = `COPY (${values}) TO STDOUT ${options}`;
        const [berth, real] = await Promise.all([
          psql(url, TOKEN, ['-c', command]),
          psql(postgres, '', ['-c', command]),
        ]);
        expect(real.stderr).toBe('');
        expect({ options, stdout: berth.stdout, stderr: berth.stderr }).toEqual({
          options,
          stdout: real.stdout,
          stderr: '',
        });
      }
      // psql's \copy, as users export a table: every row of it.
      const all = await psql(url, TOKEN, ['-c', '\\copy events (service, status) to stdout with csv']);
      expect(all.stderr).toBe('');
      expect(all.stdout.trim().split('\n')).toHaveLength(6_000);
    });

    it('refuses COPY FROM, a file on the server and binary COPY, each with its SQLSTATE', async () => {
      const refusals = {
        'COPY events FROM STDIN': '25006: cannot execute COPY in a read-only transaction',
        "COPY events TO '/tmp/events.csv'": '0A000: Berth copies to STDOUT only',
        'COPY (SELECT 1) TO STDOUT (FORMAT binary)': '0A000: Berth has no binary COPY',
      };
      for (const [sql, expected] of Object.entries(refusals)) {
        const { stderr } = await psql(url, TOKEN, ['-v', 'VERBOSITY=verbose', '-c', sql]);
        expect(stderr).toContain(`ERROR:  ${expected}`);
      }
    });

    it('refuses a wrong password and a write, each with its SQLSTATE', async () => {
      const wrong = await psql(url, 'not-the-token', ['-c', 'SELECT 1']);
      expect(wrong.stderr).toContain('password authentication failed');
      const write = await psql(url, TOKEN, [
        '-v',
        'VERBOSITY=verbose',
        '-c',
        "INSERT INTO events (service) VALUES ('x')",
      ]);
      expect(write.stderr).toContain('ERROR:  25006: cannot execute INSERT in a read-only transaction');
    });

    it('cancels a long query on Ctrl-C, and the coordinator is free again within 2 s', async () => {
      const long = 'SELECT count(*) FROM events a, events b, events c WHERE a.bytes + b.bytes > c.bytes';
      // An earlier test's query still finishing would count as this one running: Ctrl-C would come
      // before this query is the session's, and nothing would cancel it.
      while (cluster.coordinator.queries.servingLoad().running > 0) await new Promise((r) => setTimeout(r, 20));
      const started = performance.now();
      const run = psql(url, TOKEN, ['-v', 'VERBOSITY=verbose', '-c', long], {
        onStart: (child) => {
          // Once the query is running on the coordinator, Ctrl-C: psql sends a CancelRequest.
          const poll = setInterval(() => {
            if (cluster.coordinator.queries.servingLoad().running > 0) {
              clearInterval(poll);
              child.kill('SIGINT');
            }
          }, 50);
          child.on('close', () => clearInterval(poll));
        },
      });
      const { stderr } = await run;
      expect(stderr).toContain('57014: canceling statement due to user request');
      const cancelled = performance.now();
      while (cluster.coordinator.queries.servingLoad().running > 0) await new Promise((r) => setTimeout(r, 20));
      expect(performance.now() - cancelled).toBeLessThan(2_000);
      expect(performance.now() - started).toBeLessThan(60_000);
    });
  });

  describe('node-postgres', () => {
    it('binds parameters over the extended protocol, as values and never as SQL', async () => {
      const client = new pg.Client({ connectionString: url.replace('berth@', `berth:${TOKEN}@`) });
      await client.connect();
      try {
        const sql =
          'SELECT service, count(*) AS n, sum(bytes) AS b FROM events WHERE status = $1 AND level = $2 GROUP BY service ORDER BY service';
        const got = await client.query({ text: sql, values: [500, 'error'], rowMode: 'array' });
        const expected = await reference.run(sql.replace('$1', '500').replace('$2', "'error'"));
        if (!('result' in expected)) throw new Error(expected.error);
        expect(got.fields.map((f) => f.dataTypeID)).toEqual([25, 20, 1700]);
        expect(got.rows).toEqual(expected.result.rows.map((r) => [r[0], String(r[1]), String(r[2])]));
        // As Metabase and Grafana write it: every name qualified by the one schema.
        const qualified = await client.query({
          text: 'SELECT "public"."events"."level", count(*) AS n FROM "public"."events" GROUP BY 1 ORDER BY 1',
          rowMode: 'array',
        });
        const plain = await reference.run('SELECT level, count(*) AS n FROM events GROUP BY 1 ORDER BY 1');
        if (!('result' in plain)) throw new Error(plain.error);
        expect(qualified.rows).toEqual(plain.result.rows.map(([level, n]) => [level, String(n)]));
        const injected = await client.query('SELECT count(*) AS n FROM events WHERE service = $1', ["api' OR '1'='1"]);
        expect(injected.rows).toEqual([{ n: '0' }]);
        // A portal read 100 rows at a time (Execute with a row limit, PortalSuspended between).
        const all = await client.query({ text: 'SELECT ts, bytes FROM events ORDER BY ts', rowMode: 'array' });
        expect(all.rows).toHaveLength(6_000);
      } finally {
        await client.end();
      }
    });

    it('answers SET, SHOW, BEGIN/COMMIT, version() and current_database() as PostgreSQL does', async () => {
      const client = new pg.Client({ connectionString: url.replace('berth@', `berth:${TOKEN}@`) });
      await client.connect();
      try {
        await client.query('BEGIN');
        await client.query("SET application_name = 'grafana'");
        expect((await client.query('SHOW application_name')).rows).toEqual([{ application_name: 'grafana' }]);
        await client.query('COMMIT');
        const session = await client.query('SELECT version() AS v, current_database() AS d, current_schema() AS s');
        expect(session.rows[0]).toMatchObject({ d: 'berth', s: 'public' });
        expect(session.rows[0].v).toMatch(/^PostgreSQL 15\.0/);
        await client.query("SET statement_timeout = '200ms'");
        await expect(
          client.query('SELECT count(*) FROM events a, events b, events c WHERE a.bytes + b.bytes > c.bytes'),
        ).rejects.toMatchObject({ code: '57014', message: 'canceling statement due to statement timeout' });
        expect((await client.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
      } finally {
        await client.end();
      }
    });
  });

  it('serves psycopg 3 with server-side binding', async () => {
    const script = `
import json, sys, psycopg
with psycopg.connect(sys.argv[1], password=sys.argv[2]) as conn:
    with conn.cursor() as cur:
        cur.execute("SELECT level, count(*), max(latency_ms) FROM events WHERE status = %s GROUP BY level ORDER BY level", (404,))
        print(json.dumps({"types": [d.type_code for d in cur.description], "rows": [[r[0], r[1], r[2]] for r in cur.fetchall()]}))
`;
    const { code, stdout, stderr } = await runClient('python3', ['-c', script, url, TOKEN], {
      env: { PYTHONPATH: await psycopgPath() },
    });
    expect(stderr).toBe('');
    expect(code).toBe(0);
    const got = JSON.parse(stdout) as { types: number[]; rows: JsonValue[][] };
    const expected = await reference.run(
      'SELECT level, count(*), max(latency_ms) FROM events WHERE status = 404 GROUP BY level ORDER BY level',
    );
    if (!('result' in expected)) throw new Error(expected.error);
    expect(got.types).toEqual([25, 20, 701]);
    expect(got.rows).toEqual(expected.result.rows);
  }, 300_000);

  it('serves the PostgreSQL JDBC driver: DatabaseMetaData and a prepared statement', async () => {
    const source = path.join(cluster.dir, 'JdbcCheck.java');
    await writeFile(
      source,
      `import java.sql.*;
public class JdbcCheck {
  public static void main(String[] args) throws Exception {
    try (Connection c = DriverManager.getConnection(args[0], "berth", args[1])) {
      DatabaseMetaData meta = c.getMetaData();
      try (ResultSet r = meta.getTables(null, null, "%", new String[] {"TABLE"})) {
        while (r.next()) System.out.println("table " + r.getString("TABLE_SCHEM") + "." + r.getString("TABLE_NAME"));
      }
      try (ResultSet r = meta.getColumns(null, "public", "events", "%")) {
        while (r.next()) System.out.println("column " + r.getString("COLUMN_NAME") + " " + r.getString("TYPE_NAME"));
      }
      try (PreparedStatement p = c.prepareStatement("SELECT count(*), sum(bytes) FROM events WHERE status = ? AND service = ?")) {
        for (int i = 0; i < 6; i++) { // past the driver's prepareThreshold: a named statement, binary results
          p.setInt(1, 200);
          p.setString(2, "api");
          try (ResultSet r = p.executeQuery()) {
            r.next();
            System.out.println("count " + r.getLong(1) + " " + r.getBigDecimal(2));
          }
        }
      }
    }
  }
}
`,
    );
    const jdbcUrl = `jdbc:postgresql://127.0.0.1:${port}/berth`;
    const { code, stdout, stderr } = await runClient('java', ['-cp', await pgjdbcJar(), source, jdbcUrl, TOKEN], {
      timeoutMs: 180_000,
    });
    expect(stderr).toBe('');
    expect(code).toBe(0);
    const lines = stdout.trim().split('\n');
    expect(lines.filter((l) => l.startsWith('table '))).toEqual(['table public.events']);
    expect(lines.filter((l) => l.startsWith('column '))).toEqual([
      'column ts timestamp',
      'column service text',
      'column level text',
      'column status int8',
      'column latency_ms float8',
      'column bytes int8',
      'column user_id text',
      'column region text',
    ]);
    const expected = await reference.run(
      "SELECT count(*), sum(bytes) FROM events WHERE status = 200 AND service = 'api'",
    );
    if (!('result' in expected)) throw new Error(expected.error);
    const [count, sum] = expected.result.rows[0]!;
    expect(lines.filter((l) => l.startsWith('count '))).toEqual(Array(6).fill(`count ${count} ${sum}`));
  }, 300_000);

  it('serves 100 connections at once running the dashboard mix, with no error but admission’s', async () => {
    const clients = Array.from(
      { length: 100 },
      () => new pg.Client({ connectionString: url.replace('berth@', `berth:${TOKEN}@`) }),
    );
    await Promise.all(clients.map((c) => c.connect()));
    try {
      const expected = new Map<string, number>();
      for (const sql of DASHBOARD_MIX) {
        const answer = await reference.run(sql);
        if (!('result' in answer)) throw new Error(answer.error);
        expected.set(sql, answer.result.rows.length);
      }
      const outcomes = await Promise.all(
        clients.flatMap((client, i) =>
          [0, 1, 2, 3].map(async (k) => {
            const sql = DASHBOARD_MIX[(i + k) % DASHBOARD_MIX.length]!;
            try {
              const { rows } = await client.query({ text: sql, rowMode: 'array' });
              return rows.length === expected.get(sql) ? 'answered' : `${rows.length} rows for ${sql}`;
            } catch (error) {
              const { code, message } = error as { code?: string; message: string };
              return code === '53300' ? 'refused' : `${code}: ${message}`;
            }
          }),
        ),
      );
      // Queries on one connection wait for each other (node-postgres queues them); none fails.
      expect(outcomes.filter((o) => o !== 'answered' && o !== 'refused')).toEqual([]);
      expect(outcomes.filter((o) => o === 'answered').length).toBeGreaterThan(0);
    } finally {
      await Promise.all(clients.map((c) => c.end()));
    }
  }, 300_000);

  it('bounds connections per client and closes idle ones, each with its SQLSTATE', async () => {
    const bounded = await startCoordinator({
      workDir: path.join(cluster.dir, 'coordinator-bounded'),
      metaUrl: cluster.metaUrl,
      token: TOKEN,
      s3: cluster.s3,
      bucket: cluster.bucket,
      logger: false,
      postgres: { port: 0, maxConnections: 10, maxConnectionsPerClient: 2, idleTimeoutMs: 1_000 },
    });
    const { port: boundedPort } = new URL(bounded.postgresUrl!);
    const connect = async () => {
      const client = new pg.Client({
        host: '127.0.0.1',
        port: Number(boundedPort),
        database: 'berth',
        user: 'berth',
        password: TOKEN,
      });
      const errors: { code?: string }[] = [];
      client.on('error', (error) => errors.push(error as { code?: string }));
      await client.connect();
      return { client, errors };
    };
    try {
      const [first, second] = [await connect(), await connect()];
      await expect(connect()).rejects.toMatchObject({ code: '53300' });
      // Idle past the timeout: the server says why and closes; a busy one is not idle.
      await second.client.query('SELECT 1');
      // (then node-postgres' own "Connection terminated unexpectedly", with no code)
      await expect.poll(() => first.errors[0]?.code, { timeout: 10_000 }).toBe('57P05');
      await connect(); // the closed connection's place is free again
    } finally {
      await bounded.close();
    }
  }, 60_000);

  it('answers an SSLRequest with TLS when it has a certificate, and with N when it has none', async () => {
    const keys = forge.pki.rsa.generateKeyPair(2048);
    const cert = forge.pki.createCertificate();
    cert.publicKey = keys.publicKey;
    cert.serialNumber = '01';
    cert.validity.notBefore = new Date(Date.now() - 60_000);
    cert.validity.notAfter = new Date(Date.now() + 86_400_000);
    cert.setSubject([{ name: 'commonName', value: '127.0.0.1' }]);
    cert.setIssuer([{ name: 'commonName', value: '127.0.0.1' }]);
    cert.sign(keys.privateKey, forge.md.sha256.create());
    const tls = { cert: forge.pki.certificateToPem(cert), key: forge.pki.privateKeyToPem(keys.privateKey) };
    const secured = await startCoordinator({
      workDir: path.join(cluster.dir, 'coordinator-tls'),
      metaUrl: cluster.metaUrl,
      token: TOKEN,
      s3: cluster.s3,
      bucket: cluster.bucket,
      logger: false,
      postgres: { port: 0, tls },
    });
    try {
      const over = secured.postgresUrl!.replace('postgres://', 'postgres://berth@') + '?sslmode=require';
      const { stdout, stderr } = await psql(over, TOKEN, ['-c', '\\conninfo', '-c', 'SELECT 41 + 1 AS answer']);
      expect(stderr).toBe('');
      expect(stdout).toMatch(/SSL connection \(protocol: TLSv1\.[23]/);
      expect(stdout).toMatch(/answer\s*\n-+\s*\n\s*42/);
      const refused = await psql(`${url}?sslmode=require`, TOKEN, ['-c', 'SELECT 1']);
      expect(refused.stderr).toContain('server does not support SSL, but SSL was required');
    } finally {
      await secured.close();
    }
  }, 60_000);

  it('stays up through 10,000 malformed and truncated messages, and then answers a valid connection', async () => {
    const send = (bytes: Buffer) =>
      new Promise<void>((resolve) => {
        const socket = net.connect(port, '127.0.0.1');
        socket.on('error', () => resolve());
        socket.on('close', () => resolve());
        socket.on('data', () => {});
        socket.end(bytes);
        setTimeout(() => socket.destroy(), 2_000).unref();
      });
    const startup = Buffer.from('\0\0\0\0\0\x03\0\0user\0berth\0database\0berth\0\0');
    startup.writeInt32BE(startup.length);
    const shapes = [
      () => randomBytes(1 + Math.floor(Math.random() * 64)), // garbage from the first byte
      () => startup.subarray(0, 1 + Math.floor(Math.random() * (startup.length - 1))), // a truncated startup
      () => Buffer.concat([Buffer.from([0x7f, 0xff, 0xff, 0xff]), randomBytes(16)]), // a 2 GiB length
      () => Buffer.concat([startup, randomBytes(1 + Math.floor(Math.random() * 64))]), // garbage after startup
      () => Buffer.concat([startup, Buffer.from('Q\0\0\0\x10SELECT'), randomBytes(4)]), // a truncated query
    ];
    // A connection open before the flood, which must go on as if nothing happened.
    const bystander = new pg.Client({ connectionString: url.replace('berth@', `berth:${TOKEN}@`) });
    await bystander.connect();
    const rssBefore = process.memoryUsage().rss;
    const MESSAGES = 10_000;
    const PER_CONNECTION = 20;
    for (let c = 0; c < MESSAGES / PER_CONNECTION; c += 50) {
      await Promise.all(
        Array.from({ length: 50 }, () =>
          send(
            Buffer.concat(
              Array.from({ length: PER_CONNECTION }, () => shapes[Math.floor(Math.random() * shapes.length)]!()),
            ),
          ),
        ),
      );
    }
    expect(process.memoryUsage().rss - rssBefore).toBeLessThan(256 * 1024 * 1024);
    expect((await bystander.query('SELECT count(*) AS n FROM events')).rows).toEqual([{ n: '6000' }]);
    await bystander.end();
    const client = new pg.Client({ connectionString: url.replace('berth@', `berth:${TOKEN}@`) });
    await client.connect();
    try {
      expect((await client.query('SELECT count(*) AS n FROM events')).rows).toEqual([{ n: '6000' }]);
    } finally {
      await client.end();
    }
  }, 300_000);
});
