/**
 * One PostgreSQL client connection: startup and SCRAM authentication, then the simple query
 * protocol and the extended one (Parse, Bind, Describe, Execute, Close, Sync, Flush), one message
 * at a time. Berth's queries run through the same QueryService as `/v1/query` (planner, sandbox,
 * admission, deadline), streamed with backpressure; catalog statements go to the catalog's DuckDB;
 * SET, SHOW and transaction statements are answered here; writes are refused.
 */
import type { Socket } from 'node:net';
import { TLSSocket, type SecureContext } from 'node:tls';
import type { JsonValue } from '../api.js';
import * as out from './backend-messages.js';
import type { Diagnostic, FieldDescription } from './backend-messages.js';
import type { BoundParameter, ParameterBinder } from './bind-parameters.js';
import type { PgCatalog } from './catalog.js';
import {
  decodeMessage,
  decodeStartup,
  MessageReader,
  ProtocolViolation,
  type FrontendMessage,
} from './frontend-messages.js';
import { parameterText, pgColumnType, OID, type PgColumnType } from './pg-types.js';
import { RowStream, type AnswerSink } from './row-stream.js';
import { saslInitialResponse, SCRAM_SHA_256, ScramExchange, type ScramSecret } from './scram.js';
import { SessionSettings, UnknownSetting } from './session-settings.js';
import { copyHeader, copyLine, type CopyOut } from './copy-out.js';
import { classify, splitStatements, tokenize, withoutSchema, type StatementKind } from './sql-text.js';
import { diagnosticOf, duckdbSqlState } from './sqlstate.js';

/** What a session needs of the coordinator. */
export interface QueryRunner {
  /** Runs a query as /v1/query does, its rows streamed into `sink`; `signal` stops it everywhere. */
  query(sql: string, signal: AbortSignal, sink: AnswerSink): Promise<unknown>;
  /** A query's output columns, as planning binds them, without running it. */
  describe(sql: string): Promise<{ name: string; type: string }[]>;
}

export interface SessionContext {
  queries: QueryRunner;
  binder: ParameterBinder;
  catalog: () => Promise<PgCatalog>;
  secret: ScramSecret;
  serverVersion: string;
  /** Registers the session's cancel key; the returned function forgets it. */
  register(cancel: () => void): { processId: number; secretKey: number; forget(): void };
  /** Largest message a client may send. */
  maxMessageBytes: number;
  /** A session with nothing running for this long is closed. */
  idleTimeoutMs: number;
  /** How long a client may take to start up and authenticate. */
  startupTimeoutMs: number;
  /** The query deadline: a catalog statement is cut by it too (Berth's queries by the QueryService's own). */
  deadlineMs: number;
  log: { warn(object: object, message: string): void };
  /** Where set, an SSLRequest is answered with TLS under this certificate. */
  tls?: SecureContext;
}

/** The startup packet is small in every client; past this, it is not a startup packet. */
const MAX_STARTUP_BYTES = 10_000;
/** Bytes a client may send ahead of what the session has read before the socket is paused. */
const MAX_BUFFERED_BYTES = 1 << 20;
/** Prepared statements, and portals, one session may keep open: each holds memory until closed. */
const MAX_PREPARED = 1_000;

interface Statement {
  sql: string;
  kind: StatementKind;
  parameterTypes: number[];
  /** How many parameters the statement has ($1 … $n). */
  parameters: number;
}

interface Portal {
  statement: Statement;
  /** The statement with its parameters bound (a Berth query), or the values (a catalog statement). */
  sql: string;
  values: (string | null)[];
  resultFormats: number[];
  /** Set by the first Execute. */
  run?: PortalRun;
  /** Its rows have all been sent: a further Execute sends none. */
  done?: boolean;
}

interface PortalRun {
  rows: { next(): Promise<JsonValue[] | undefined> };
  columns: string[];
  types: PgColumnType[];
  stop: AbortController;
  sent: number;
}

/** Thrown for a statement that fails with a given SQLSTATE. */
class StatementError extends Error {
  constructor(readonly diagnostic: Diagnostic) {
    super(diagnostic.message);
  }
}

const fail = (code: string, message: string, hint?: string) =>
  new StatementError({ severity: 'ERROR', code, message, ...(hint ? { hint } : {}) });

export class Session {
  private readonly reader: MessageReader;
  private phase: 'startup' | 'auth' | 'ready' | 'closed' = 'startup';
  private scram?: ScramExchange;
  private settings = new SessionSettings('', '');
  private key?: { processId: number; secretKey: number; forget(): void };
  private readonly statements = new Map<string, Statement>();
  private readonly portals = new Map<string, Portal>();
  private inTransaction = false;
  /** After an error in the extended protocol, messages are skipped until Sync. */
  private skipping = false;
  private pumping = false;
  /** The running statement's stop, and why it was stopped when it was. */
  private current?: { stop: AbortController; why?: Diagnostic };
  private idleTimer?: NodeJS.Timeout;

  constructor(
    private socket: Socket,
    private readonly context: SessionContext,
  ) {
    this.reader = new MessageReader(MAX_STARTUP_BYTES);
    socket.setNoDelay(true);
    socket.on('error', () => this.close());
    socket.on('close', () => this.close());
    this.listen(socket);
    this.armIdle(context.startupTimeoutMs);
  }

  /** Reads the client's bytes from `socket` (the TCP socket, then the TLS one over it). */
  private listen(socket: Socket): void {
    socket.on('data', (chunk: Buffer) => {
      this.reader.push(chunk);
      if (this.reader.buffered > MAX_BUFFERED_BYTES) socket.pause();
      void this.pump();
    });
  }

  /** Answers an SSLRequest: TLS from the next byte on when configured, else 'N' and the clear. */
  private startTls(): void {
    const { tls } = this.context;
    if (!tls || this.socket instanceof TLSSocket) {
      this.send(Buffer.from('N'));
      return;
    }
    // Bytes sent after the SSLRequest, before the handshake, would be read as if they came over
    // TLS: a client never sends them, an attacker in the middle would (CVE-2021-23214).
    if (this.reader.buffered > 0) throw new ProtocolViolation('bytes after an SSLRequest, before TLS began');
    this.send(Buffer.from('S'));
    const raw = this.socket;
    raw.removeAllListeners('data');
    const secure = new TLSSocket(raw, { isServer: true, secureContext: tls });
    secure.on('error', () => this.close());
    this.socket = secure;
    this.listen(secure);
  }

  /** Stops what the session runs (CancelRequest): the query stops on every node, as on an HTTP disconnect. */
  cancel(): void {
    if (this.current && !this.current.why) {
      this.current.why = { severity: 'ERROR', code: '57014', message: 'canceling statement due to user request' };
      this.current.stop.abort(new Error(this.current.why.message));
    }
  }

  close(): void {
    if (this.phase === 'closed') return;
    this.phase = 'closed';
    clearTimeout(this.idleTimer);
    this.key?.forget();
    this.current?.stop.abort(new Error('the client went away'));
    for (const portal of this.portals.values()) portal.run?.stop.abort(new Error('the client went away'));
    this.socket.destroy();
  }

  private isClosed(): boolean {
    return this.phase === 'closed';
  }

  private armIdle(ms: number): void {
    clearTimeout(this.idleTimer);
    if (ms <= 0) return;
    this.idleTimer = setTimeout(() => {
      if (this.current) return this.armIdle(ms);
      this.send(
        out.errorResponse({
          severity: 'FATAL',
          code: this.phase === 'ready' ? '57P05' : '08006',
          message:
            this.phase === 'ready'
              ? 'terminating connection due to idle-session timeout'
              : 'the connection did not start up and authenticate in time',
        }),
      );
      this.socket.end();
      this.close();
    }, ms).unref();
  }

  private send(message: Buffer): boolean {
    if (this.phase === 'closed' && !this.socket.writable) return false;
    return this.socket.write(message);
  }

  /** Waits until the client has taken what was written: a slow reader slows the query down. */
  private async drained(): Promise<void> {
    if (!this.socket.writableNeedDrain) return;
    await new Promise<void>((resolve) => {
      const done = () => {
        this.socket.off('drain', done);
        this.socket.off('close', done);
        resolve();
      };
      this.socket.on('drain', done);
      this.socket.on('close', done);
    });
    if (this.phase === 'closed') throw new Error('the client went away');
  }

  private async pump(): Promise<void> {
    if (this.pumping || this.phase === 'closed') return;
    this.pumping = true;
    try {
      for (;;) {
        const packet = this.reader.next();
        if (!packet) break;
        if (this.phase === 'startup') await this.startup(packet.body);
        else await this.handle(decodeMessage(packet.type, packet.body));
        if (this.isClosed()) return;
      }
    } catch (error) {
      const violation = error instanceof ProtocolViolation;
      if (!violation) this.context.log.warn({ err: error }, 'a PostgreSQL session failed');
      this.send(
        out.errorResponse({
          severity: 'FATAL',
          code: violation ? '08P01' : 'XX000',
          message: violation ? error.message : 'internal error; see the coordinator log',
        }),
      );
      this.socket.end();
      this.close();
      return;
    } finally {
      this.pumping = false;
    }
    if (this.socket.isPaused() && this.reader.buffered <= MAX_BUFFERED_BYTES) this.socket.resume();
  }

  private async startup(body: Buffer): Promise<void> {
    const packet = decodeStartup(body);
    if (packet.kind === 'ssl') return this.startTls();
    if (packet.kind === 'gssenc') {
      this.send(Buffer.from('N')); // no GSSAPI: the client goes on in the clear or gives up
      return;
    }
    if (packet.kind === 'cancel') {
      this.socket.end();
      this.close();
      this.onCancelRequest?.(packet.processId, packet.secretKey);
      return;
    }
    const user = packet.parameters.get('user') ?? '';
    const database = packet.parameters.get('database') ?? user;
    this.settings = new SessionSettings(this.context.serverVersion, user);
    for (const [name, value] of packet.parameters) {
      if (['user', 'database', 'options', 'replication'].includes(name)) continue;
      try {
        this.settings.set(name, value);
      } catch {
        // PostgreSQL refuses an unknown startup setting; clients send only known ones, and a driver's
        // extra one (JDBC's, psycopg's) is no reason to refuse the connection.
      }
    }
    if (database !== 'berth') {
      this.send(
        out.errorResponse({
          severity: 'FATAL',
          code: '3D000',
          message: `database "${database}" does not exist`,
          hint: 'connect to database "berth"',
        }),
      );
      this.socket.end();
      this.close();
      return;
    }
    this.reader.startup = false;
    this.reader.maxBytes = this.context.maxMessageBytes;
    this.phase = 'auth';
    this.send(out.authenticationSasl([SCRAM_SHA_256]));
  }

  /** Set by the server: how a CancelRequest reaches the session it names. */
  onCancelRequest?: (processId: number, secretKey: number) => void;

  private async authenticate(data: Buffer): Promise<void> {
    if (!this.scram) {
      const { mechanism, message } = saslInitialResponse(data);
      if (mechanism !== SCRAM_SHA_256) throw new ProtocolViolation(`SASL mechanism ${mechanism} is not offered`);
      this.scram = new ScramExchange(this.context.secret);
      this.send(out.authenticationSaslContinue(this.scram.first(message)));
      return;
    }
    const final = this.scram.final(data.toString('utf8'));
    if (!final) {
      this.send(
        out.errorResponse({
          severity: 'FATAL',
          code: '28P01',
          message: `password authentication failed for user "${this.settings.get('session_authorization')}"`,
          hint: "the password is the cluster's token (BERTH_TOKEN)",
        }),
      );
      this.socket.end();
      this.close();
      return;
    }
    this.send(out.authenticationSaslFinal(final));
    this.send(out.authenticationOk());
    for (const [name, value] of this.settings.reported()) this.send(out.parameterStatus(name, value));
    this.key = this.context.register(() => this.cancel());
    this.send(out.backendKeyData(this.key.processId, this.key.secretKey));
    this.phase = 'ready';
    this.ready();
  }

  private ready(): void {
    this.send(out.readyForQuery(this.inTransaction ? 'T' : 'I'));
    this.armIdle(this.context.idleTimeoutMs);
  }

  private async handle(message: FrontendMessage): Promise<void> {
    if (this.phase === 'auth') {
      if (message.type !== 'password') throw new ProtocolViolation(`expected a password message, got ${message.type}`);
      return await this.authenticate(message.data);
    }
    // Every message starts the idle clock again (a running statement holds it off): a client that
    // sends Parse and never Sync is idle all the same.
    this.armIdle(this.context.idleTimeoutMs);
    switch (message.type) {
      case 'query':
        this.skipping = false;
        await this.simpleQuery(message.sql);
        return this.ready();
      case 'sync':
        this.skipping = false;
        if (!this.inTransaction) this.closePortals();
        return this.ready();
      case 'terminate':
        this.socket.end();
        return this.close();
      case 'flush':
        return;
      case 'copy':
        return; // no COPY is ever started: stray copy data is ignored, as PostgreSQL does
      case 'password':
        throw new ProtocolViolation('a password message after authentication');
    }
    if (this.skipping) return;
    try {
      await this.extended(message);
    } catch (error) {
      this.skipping = true;
      this.sendError(error);
    }
  }

  private sendError(error: unknown): void {
    const diagnostic = this.diagnostic(error);
    this.send(out.errorResponse(diagnostic));
  }

  private diagnostic(error: unknown): Diagnostic {
    if (error instanceof StatementError) return error.diagnostic;
    if (this.current?.why) return this.current.why;
    if (error instanceof UnknownSetting) return { severity: 'ERROR', code: '42704', message: error.message };
    const known = diagnosticOf(error);
    if (known) return known;
    this.context.log.warn({ err: error }, 'a PostgreSQL statement failed');
    return { severity: 'ERROR', code: 'XX000', message: 'internal error; see the coordinator log' };
  }

  private async simpleQuery(sql: string): Promise<void> {
    const statements = splitStatements(sql);
    if (statements.every((s) => classify(s).kind === 'empty')) {
      this.send(out.emptyQueryResponse());
      return;
    }
    for (const text of statements) {
      const kind = classify(text);
      if (kind.kind === 'empty') continue;
      const sql = kind.kind === 'query' ? withoutSchema(text) : text;
      try {
        const portal: Portal = {
          statement: { sql, kind, parameterTypes: [], parameters: 0 },
          sql,
          values: [],
          resultFormats: [],
        };
        const fields = await this.describePortal(portal);
        if (fields) this.send(out.rowDescription(fields));
        await this.execute(portal, 0);
      } catch (error) {
        this.sendError(error);
        return; // the rest of a failed simple query is not run
      }
    }
  }

  private async extended(message: FrontendMessage): Promise<void> {
    switch (message.type) {
      case 'parse': {
        if (message.name !== '' && this.statements.has(message.name))
          throw fail('42P05', `prepared statement "${message.name}" already exists`);
        if (!this.statements.has(message.name) && this.statements.size >= MAX_PREPARED)
          throw fail('53400', `a session keeps at most ${MAX_PREPARED} prepared statements: close some`);
        const parts = splitStatements(message.sql).filter((s) => classify(s).kind !== 'empty');
        if (parts.length > 1) throw fail('42601', 'cannot insert multiple commands into a prepared statement');
        const text = parts[0] ?? '';
        const sql = classify(text).kind === 'query' ? withoutSchema(text) : text;
        const parameters = Math.max(
          message.parameterTypes.length,
          ...tokenize(sql)
            .filter((t) => t.kind === 'param')
            .map((t) => Number(t.text.slice(1))),
        );
        this.statements.set(message.name, {
          sql,
          kind: classify(sql),
          parameterTypes: message.parameterTypes,
          parameters,
        });
        this.send(out.parseComplete());
        return;
      }
      case 'bind': {
        const statement = this.statements.get(message.statement);
        if (!statement) throw fail('26000', `prepared statement "${message.statement}" does not exist`);
        if (message.parameters.length !== statement.parameters)
          throw fail(
            '08P01',
            `bind message supplies ${message.parameters.length} parameters, but prepared statement "${message.statement}" requires ${statement.parameters}`,
          );
        if (message.portal !== '' && this.portals.has(message.portal))
          throw fail('42P03', `portal "${message.portal}" already exists`);
        if (!this.portals.has(message.portal) && this.portals.size >= MAX_PREPARED)
          throw fail('53400', `a session keeps at most ${MAX_PREPARED} portals: close some`);
        const values = message.parameters.map((bytes, i) => {
          if (bytes === null) return null;
          const format =
            message.parameterFormats.length === 1 ? message.parameterFormats[0] : message.parameterFormats[i];
          const oid = statement.parameterTypes[i] ?? 0;
          return format === 1 ? parameterText(oid, bytes) : bytes.toString('utf8');
        });
        const sql =
          statement.kind.kind === 'query' && statement.parameters > 0
            ? await this.bindQuery(statement, values)
            : statement.sql;
        this.closePortal(message.portal);
        this.portals.set(message.portal, { statement, sql, values, resultFormats: message.resultFormats });
        this.send(out.bindComplete());
        return;
      }
      case 'describe': {
        if (message.target === 'S') {
          const statement = this.statements.get(message.name);
          if (!statement) throw fail('26000', `prepared statement "${message.name}" does not exist`);
          this.send(
            out.parameterDescription(
              Array.from({ length: statement.parameters }, (_, i) => statement.parameterTypes[i] || OID.text),
            ),
          );
          const unbound = Array.from({ length: statement.parameters }, () => null);
          const sql =
            statement.kind.kind === 'query' && statement.parameters > 0
              ? await this.bindQuery(statement, unbound)
              : statement.sql;
          const fields = await this.describePortal({ statement, sql, values: unbound, resultFormats: [] });
          this.send(fields ? out.rowDescription(fields) : out.noData());
          return;
        }
        const portal = this.portals.get(message.name);
        if (!portal) throw fail('34000', `portal "${message.name}" does not exist`);
        const fields = await this.describePortal(portal);
        this.send(fields ? out.rowDescription(fields) : out.noData());
        return;
      }
      case 'execute': {
        const portal = this.portals.get(message.portal);
        if (!portal) throw fail('34000', `portal "${message.portal}" does not exist`);
        await this.execute(portal, message.maxRows);
        return;
      }
      case 'close': {
        if (message.target === 'S') this.statements.delete(message.name);
        else this.closePortal(message.name);
        this.send(out.closeComplete());
        return;
      }
    }
  }

  private async bindQuery(statement: Statement, values: (string | null)[]): Promise<string> {
    const parameters: BoundParameter[] = values.map((text, i) => ({ oid: statement.parameterTypes[i] ?? 0, text }));
    try {
      return await this.context.binder.bind(statement.sql, parameters);
    } catch (error) {
      if (error instanceof RangeError) throw fail('08P01', error.message);
      throw error;
    }
  }

  private closePortal(name: string): void {
    this.portals.get(name)?.run?.stop.abort(new Error('the portal was closed'));
    this.portals.delete(name);
  }

  private closePortals(): void {
    for (const name of [...this.portals.keys()]) this.closePortal(name);
  }

  /** A portal's columns as RowDescription gives them; undefined for a statement that returns no rows. */
  private async describePortal(portal: Portal): Promise<FieldDescription[] | undefined> {
    const { kind } = portal.statement;
    let columns: { name: string; type: string }[];
    if (kind.kind === 'query') columns = await this.context.queries.describe(portal.sql);
    else if (kind.kind === 'catalog') columns = await this.catalogColumns(portal.sql);
    else if (kind.kind === 'show')
      columns =
        kind.name === 'all'
          ? [
              { name: 'name', type: 'VARCHAR' },
              { name: 'setting', type: 'VARCHAR' },
            ]
          : [{ name: kind.name, type: 'VARCHAR' }];
    else return undefined;
    return columns.map((column, i) => {
      const type = pgColumnType(column.type);
      const format = this.resultFormat(portal, i);
      if (format === 1 && !type.binary)
        throw fail('0A000', `Berth has no binary format for column "${column.name}" (${column.type}): ask for text`);
      return { name: column.name, typeOid: type.oid, typeSize: type.size, typeModifier: type.modifier, format };
    });
  }

  private async catalogColumns(sql: string): Promise<{ name: string; type: string }[]> {
    try {
      return await (await this.context.catalog()).describe(sql);
    } catch (error) {
      throw catalogFailure(error);
    }
  }

  private resultFormat(portal: Portal, column: number): number {
    const formats = portal.resultFormats;
    return formats.length === 1 ? formats[0]! : (formats[column] ?? 0);
  }

  /** Runs (or goes on with) a portal, sending up to `maxRows` rows (0: all), then its completion. */
  private async execute(portal: Portal, maxRows: number): Promise<void> {
    const { kind } = portal.statement;
    switch (kind.kind) {
      case 'empty':
        this.send(out.emptyQueryResponse());
        return;
      case 'begin':
        this.inTransaction = true;
        this.send(out.commandComplete(kind.tag));
        return;
      case 'commit':
      case 'rollback':
        this.inTransaction = false;
        this.send(out.commandComplete(kind.tag));
        return;
      case 'no-op':
        this.send(out.commandComplete(kind.tag));
        return;
      case 'set': {
        const { status, notice } = this.settings.set(kind.name, kind.value);
        if (notice) this.send(out.noticeResponse({ severity: 'NOTICE', code: '01000', message: notice }));
        if (status) this.send(out.parameterStatus(...status));
        this.send(out.commandComplete(kind.value === undefined ? 'RESET' : 'SET'));
        return;
      }
      case 'show': {
        const rows =
          kind.name === 'all'
            ? this.settings.all()
            : [[this.settings.get(kind.name) ?? this.unknownSetting(kind.name)]];
        for (const row of rows) this.send(out.dataRow(row.map((v) => Buffer.from(v))));
        this.send(out.commandComplete('SHOW'));
        return;
      }
      case 'write':
        throw fail(
          '25006',
          `cannot execute ${kind.command} in a read-only transaction`,
          'Berth answers queries over PostgreSQL; rows go in over its HTTP API (berth ingest)',
        );
      case 'unsupported':
        throw fail('0A000', `Berth does not run ${kind.command} statements`);
      case 'refused':
        throw fail(kind.code, kind.message);
      case 'copy':
        return await this.stream(this.copiedQuery(kind.copy), 0, kind.copy);
      case 'query':
      case 'catalog':
        return await this.stream(portal, maxRows);
    }
  }

  /** The query a COPY copies, as a portal of its own. */
  private copiedQuery(copy: CopyOut): Portal {
    const kind = classify(copy.query);
    if (kind.kind !== 'query' && kind.kind !== 'catalog')
      throw fail('42601', 'COPY copies the rows of a query: SELECT, WITH, VALUES, TABLE or a table’s name');
    const sql = kind.kind === 'query' ? withoutSchema(copy.query) : copy.query;
    return { statement: { sql, kind, parameterTypes: [], parameters: 0 }, sql, values: [], resultFormats: [] };
  }

  private unknownSetting(name: string): never {
    throw fail('42704', `unrecognized configuration parameter "${name}"`);
  }

  /**
   * Streams a query's rows to the client, at most `maxRows` now (0: all); PortalSuspended when cut.
   * With `copy`, as COPY's output: CopyOutResponse, a CopyData per line, CopyDone.
   */
  private async stream(portal: Portal, maxRows: number, copy?: CopyOut): Promise<void> {
    if (portal.done) {
      this.send(out.commandComplete('SELECT 0'));
      return;
    }
    const stop = portal.run?.stop ?? new AbortController();
    const current: { stop: AbortController; why?: Diagnostic } = { stop };
    this.current = current;
    const cut = (ms: number, message: string) =>
      ms > 0
        ? setTimeout(() => {
            if (current.why) return;
            current.why = { severity: 'ERROR', code: '57014', message };
            stop.abort(new Error(message));
          }, ms)
        : undefined;
    const timers = [
      cut(this.settings.statementTimeoutMs, 'canceling statement due to statement timeout'),
      portal.statement.kind.kind === 'catalog'
        ? cut(
            this.context.deadlineMs,
            `the query ran past its deadline of ${this.context.deadlineMs} ms (BERTH_QUERY_DEADLINE_MS)`,
          )
        : undefined,
    ];
    try {
      const run = (portal.run ??= await this.start(portal, stop));
      if (copy) {
        this.send(out.copyOutResponse(run.types.length));
        if (copy.header) this.send(out.copyData(copyHeader(copy, run.columns)));
      }
      let sent = 0;
      for (;;) {
        if (maxRows > 0 && sent === maxRows) {
          this.send(out.portalSuspended());
          return;
        }
        const row = await run.rows.next();
        if (row === undefined) break;
        if (copy) {
          const line = copyLine(
            copy,
            row.map((value, i) => (value === null ? null : run.types[i]!.text(value))),
          );
          if (!this.send(out.copyData(line))) await this.drained();
          run.sent++;
          continue;
        }
        const values = row.map((value, i) => {
          if (value === null) return null;
          const type = run.types[i]!;
          return this.resultFormat(portal, i) === 1 ? type.binary!(value) : Buffer.from(type.text(value));
        });
        if (!this.send(out.dataRow(values))) await this.drained();
        sent++;
        run.sent++;
      }
      if (copy) this.send(out.copyDone());
      this.send(out.commandComplete(`${copy ? 'COPY' : 'SELECT'} ${run.sent}`));
      portal.done = true;
    } catch (error) {
      stop.abort(error);
      portal.run = undefined;
      portal.done = true;
      throw current.why ? new StatementError(current.why) : error;
    } finally {
      for (const timer of timers) clearTimeout(timer);
      this.current = undefined;
    }
  }

  /** Starts a portal's statement: a Berth query through the QueryService, or a catalog statement. */
  private async start(portal: Portal, stop: AbortController): Promise<PortalRun> {
    if (portal.statement.kind.kind === 'catalog') {
      const catalog = await this.context.catalog();
      const result = await catalog.run(portal.sql, portal.values, stop.signal).catch((error: unknown) => {
        throw catalogFailure(error);
      });
      const rows = result.rows[Symbol.iterator]();
      return {
        rows: { next: async () => rows.next().value },
        columns: result.columns,
        types: result.types.map(pgColumnType),
        stop,
        sent: 0,
      };
    }
    // A heavy query waiting for its pool tells the client how the launch goes (NOTICE), as psql shows.
    const stream = new RowStream(
      (sink) => this.context.queries.query(portal.sql, stop.signal, sink),
      (words) => this.send(out.noticeResponse({ severity: 'NOTICE', code: '00000', message: words })),
    );
    const { columns, types } = await stream.columns();
    return { rows: stream, columns, types: types.map(pgColumnType), stop, sent: 0 };
  }
}

/** A catalog statement's failure: DuckDB's message with its SQLSTATE; a Berth table read beside the catalog is named as such. */
function catalogFailure(error: unknown): StatementError {
  const message = (error as Error).message ?? String(error);
  const state = duckdbSqlState(message);
  return new StatementError({
    severity: 'ERROR',
    code: state,
    message: message.split('\n')[0]!,
    ...(state === '42P01'
      ? { hint: "a statement reads either Berth's tables or the catalog (pg_catalog, information_schema), not both" }
      : {}),
  });
}
