/**
 * Opens a SQLite database with better-sqlite3 so that none of its objects is ever garbage.
 * better-sqlite3 12, the last line that runs on Node 20, is built on node::ObjectWrap, whose
 * destructor on Node 24 asks for the Node environment; when the garbage collector destroys a
 * Statement or a Database outside any context there is none, and the process aborts. So every
 * database opened here stays reachable until the process exits (where Node's own cleanup hooks
 * destroy it safely), and so does every statement: `prepare` keeps one statement per SQL text and
 * `pragma` goes through it. Callers prepare a small fixed set of SQL texts, so this stays small;
 * they must not change a statement's mode (pluck, raw, expand), since the next caller of the same
 * SQL gets the same statement.
 */
import Database from 'better-sqlite3';

const retained: Database.Database[] = [];

export function openSqlite(file: string, options?: Database.Options): Database.Database {
  const db = new Database(file, options);
  retained.push(db);
  const prepare = db.prepare.bind(db);
  const statements = new Map<string, Database.Statement>();
  db.prepare = ((sql: string) => {
    let statement = statements.get(sql);
    if (!statement) {
      statement = prepare(sql);
      statements.set(sql, statement);
    }
    return statement;
  }) as typeof db.prepare;
  db.pragma = ((source: string, pragmaOptions: { simple?: boolean } = {}) => {
    const statement = db.prepare(`PRAGMA ${source}`);
    if (!statement.reader) {
      statement.run();
      return pragmaOptions.simple ? undefined : [];
    }
    return pragmaOptions.simple ? statement.pluck(true).get() : statement.pluck(false).all();
  }) as typeof db.pragma;
  return db;
}
