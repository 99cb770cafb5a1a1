/**
 * A statement found from a text's template (literal-template.ts) must be the statement DuckDB's
 * parse gives that text: the same shape, the same lifted literals with the same types and values.
 * Differential: texts of many templates, each with values at the edges of what DuckDB reads one
 * way (32- and 64-bit integers, leading zeros, quotes, comment and parameter marks inside
 * strings), every text's template statement compared with its own parse.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { liftLiterals, parameterized } from '../core/query-plan/literals.js';
import { statementOf, templateStatement, textTemplate } from '../services/coordinator/planning/literal-template.js';
import { writeParseTree } from '../services/coordinator/planning/parse-tree-json.js';
import { SqlEngine } from '../services/coordinator/sql-engine.js';
import { movingMix } from '../bench/dashboard-load.js';

const INTEGERS = ['0', '7', '10', '2147483647', '2147483648', '9223372036854775807', '9223372036854775808', '007'];
const STRINGS = [
  "''",
  "'a'",
  "'it''s'",
  "'a\\b'",
  "' x '",
  "'2026-10-01 00:00:00'",
  "'--'",
  "'/*'",
  `'"'`,
  "'$1'",
  "'?'",
];

/** Templates, `#` an integer's place and `@` a string's. */
const TEMPLATES = [
  'SELECT count(*) FROM events WHERE status = #',
  'SELECT count(*) FROM events WHERE status >= # AND status < #',
  'SELECT count(*) FROM events WHERE service = @ AND status <> #',
  'SELECT count(*) FROM events WHERE status IN (#, #, #)',
  'SELECT count(*) FROM events WHERE status NOT IN (#)',
  'SELECT count(*) FROM events WHERE status BETWEEN # AND #',
  'SELECT count(*) FROM events WHERE ts >= TIMESTAMP @ AND ts < TIMESTAMP @',
  'SELECT count(*) FROM events WHERE ts >= @::TIMESTAMP',
  'SELECT * FROM events WHERE status = # ORDER BY ts LIMIT #',
  'SELECT # AS c, @ AS s FROM events WHERE status = #',
  'SELECT status, count(*) FROM events WHERE status > # GROUP BY status HAVING count(*) > # ORDER BY 1',
  'SELECT substr(service, #) FROM events WHERE service = @',
  'SELECT count(*) FROM events WHERE status = -#',
  'SELECT count(*) FROM events WHERE status - # > #',
  'SELECT count(*) FROM events WHERE # = #',
  'SELECT count(*) FROM events WHERE status = # OR service = @',
  'SELECT count(*) FROM (SELECT * FROM events WHERE status = #) AS "t 1" WHERE "t 1".service = @',
  'SELECT count(*) FROM events WHERE status IN (SELECT status FROM events WHERE bytes > #)',
  'SELECT CASE WHEN status = # THEN @ ELSE @ END AS k FROM events WHERE service <> @',
  `SELECT "quoted 'name' 5" FROM events WHERE status = #`,
  'SELECT count(*) FROM events\nWHERE service = @\n  AND status >= #',
  'SELECT count(*) FROM events WHERE service = @ || @',
  'SELECT count(*) FROM events WHERE status = #::BIGINT',
  'SELECT count(*) FROM events WHERE status=#AND service=@',
  // A simple CASE is a WHEN per value, each comparing a copy of its operand.
  'SELECT count(*) FROM events WHERE CASE # WHEN status THEN false WHEN # THEN true ELSE false END',
  'SELECT count(*) FROM events WHERE CASE @ WHEN service THEN 1 WHEN @ THEN 2 END = #',
  'SELECT count(*) FROM events WHERE CASE TIMESTAMP @ WHEN ts THEN 1 END = #',
];

/**
 * Texts of `template`: every place given values in turn from its list (rotated apart), and each
 * place alone given every value while the others keep their first.
 */
function texts(template: string): string[] {
  const fill = (value: (place: string, k: number) => string) => {
    let k = 0;
    return template.replace(/[#@]/g, (place) => value(place, k++));
  };
  const list = (place: string) => (place === '#' ? INTEGERS : STRINGS);
  const places = template.match(/[#@]/g)!.length;
  const rotated = Array.from({ length: Math.max(INTEGERS.length, STRINGS.length) }, (_, v) =>
    fill((place, k) => list(place)[(v + 3 * k) % list(place).length]!),
  );
  const alone = Array.from({ length: places }, (_, moved) =>
    Array.from({ length: Math.max(INTEGERS.length, STRINGS.length) }, (_, v) =>
      fill((place, k) => list(place)[k === moved ? v % list(place).length : 0]!),
    ),
  ).flat();
  return [...new Set([...rotated, ...alone])];
}

describe('statements from text templates', () => {
  let dir: string;
  let engine: SqlEngine;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'berth-literal-template-'));
    engine = await SqlEngine.open(path.join(dir, 'scratch'));
  });
  afterAll(async () => {
    engine.close();
    await rm(dir, { recursive: true, force: true });
  });

  /** The statement DuckDB's parse gives `sql`, and what that parse says of its template; undefined where it does not parse. */
  const parse = async (sql: string) => {
    let node;
    try {
      ({ node } = await engine.statement(sql));
    } catch {
      return undefined;
    }
    const literals = liftLiterals(node);
    const shape = writeParseTree(parameterized(node, true));
    const template = textTemplate(sql);
    return { shape, literals, known: template && templateStatement(template, node, shape, literals) };
  };

  it('gives every text of a parsed template the statement its own parse gives, or none', async () => {
    let compared = 0;
    let found = 0;
    for (const template of TEMPLATES) {
      const all = texts(template);
      const parsed = await Promise.all(all.map(parse));
      for (const [i, seed] of parsed.entries()) {
        if (!seed?.known) continue;
        for (const [j, sql] of all.entries()) {
          const fromTemplate = statementOf(textTemplate(sql)!, seed.known);
          compared++;
          if (!fromTemplate) continue;
          found++;
          const own = parsed[j];
          expect(own, `${all[i]} made a statement for ${sql}, which does not parse`).toBeDefined();
          expect(fromTemplate, `${sql} from the template of ${all[i]}`).toEqual({
            shape: own!.shape,
            literals: own!.literals,
          });
        }
      }
    }
    // Most pairs share their statement's types; the rest go to DuckDB's parser.
    expect(compared).toBeGreaterThan(10_000);
    expect(found / compared).toBeGreaterThan(0.2);
  });

  it('takes a dashboard’s moving texts without a parse after the first of each shape', async () => {
    const known = new Map<string, NonNullable<Awaited<ReturnType<typeof parse>>>['known']>();
    let parses = 0;
    for (const sql of movingMix(200, 7)) {
      const template = textTemplate(sql)!;
      expect(template, sql).toBeDefined();
      const seen = known.get(template.key);
      const statement = seen && statementOf(template, seen);
      const own = await parse(sql);
      if (statement) expect(statement).toEqual({ shape: own!.shape, literals: own!.literals });
      else {
        parses++;
        known.set(template.key, own!.known);
      }
    }
    // Four shapes; a LIMIT and an ORDER BY are the same text in each, so no other parse.
    expect(parses).toBe(4);
  });

  it('leaves to DuckDB every text its lexer may read otherwise', () => {
    for (const sql of [
      'SELECT 1 -- a comment',
      'SELECT /* a comment */ 1',
      "SELECT E'a\\nb'",
      "SELECT X'00'",
      "SELECT U&'d\\0061t'",
      "SELECT 'a'\n'b'",
      "SELECT 'a' 'b'",
      'SELECT 1.5',
      'SELECT 1e5',
      'SELECT 1_000',
      'SELECT 0x1F',
      'SELECT .5',
      'SELECT $1',
      'SELECT ?',
      'SELECT $$a$$',
      "SELECT 'é'",
      'SELECT\u00a01',
      "SELECT 'unterminated",
      'SELECT "unterminated',
      'SELECT 1\u000b+ 1',
    ])
      expect(textTemplate(sql), sql).toBeUndefined();
    expect(textTemplate('  SELECT 1  \n')).toEqual({
      key: 'SELECT \u0001i',
      tokens: [{ start: 7, kind: 'integer', text: '1' }],
    });
  });
});
