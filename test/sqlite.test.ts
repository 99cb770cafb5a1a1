/** openSqlite keeps every statement (better-sqlite3 12 aborts on Node 24 when one is garbage-collected) and still behaves as better-sqlite3. */
import { describe, expect, it } from 'vitest';
import { openSqlite } from '../services/common/sqlite.js';

describe('a SQLite database that never makes garbage', () => {
  it('hands out one statement per SQL text, and it still runs with fresh parameters', () => {
    const db = openSqlite(':memory:');
    db.exec('CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER)');
    const insert = db.prepare('INSERT INTO t (k, v) VALUES (?, ?)');
    expect(db.prepare('INSERT INTO t (k, v) VALUES (?, ?)')).toBe(insert);
    db.prepare('INSERT INTO t (k, v) VALUES (?, ?)').run('a', 1);
    db.prepare('INSERT INTO t (k, v) VALUES (?, ?)').run('b', 2);
    expect(db.prepare('SELECT k, v FROM t ORDER BY k').all()).toEqual([
      { k: 'a', v: 1 },
      { k: 'b', v: 2 },
    ]);
    db.transaction(() => db.prepare('INSERT INTO t (k, v) VALUES (?, ?)').run('c', 3))();
    expect(db.prepare('SELECT count(*) AS n FROM t').get()).toEqual({ n: 3 });
    db.close();
  });

  it('answers pragmas as better-sqlite3 does, reads and writes alike', () => {
    const db = openSqlite(':memory:');
    expect(db.pragma('foreign_keys = ON')).toEqual([]);
    expect(db.pragma('foreign_keys', { simple: true })).toBe(1);
    db.exec('CREATE TABLE t (k TEXT, v INTEGER)');
    expect((db.pragma('table_info(t)') as { name: string }[]).map((c) => c.name)).toEqual(['k', 'v']);
    expect(db.pragma('foreign_keys')).toEqual([{ foreign_keys: 1 }]);
    db.close();
  });
});
