/**
 * Plans once per statement shape and table schemas: a dashboard that sends a query again, or the
 * same query with other literals (its window moved, another service), gets the plan it got before,
 * without the dozen round trips through the coordinator's DuckDB that planning takes (parse, bind,
 * split, write back). The literals a WHERE compares (core/query-plan/literals.ts) are lifted out:
 * the key is the statement as DuckDB parses it (its parse tree without positions, so layout and
 * comments do not matter) with those literals as typed parameters, and the plan's SQL names them
 * `$p1`, `$p2`, … which the owners and the final stage bind per query; each read's time window
 * is computed again from the query's values. A shape whose SQL would not bind the same with
 * parameters plans by its whole statement instead, and so does a statement sent again and again
 * once its own plan is made behind it (planOwn: DuckDB plans a prepared scan with parameters anew
 * at every run, one kept without them not at all). The text a key was made from is remembered too,
 * so the same text again needs no parse. An entry holds the schema digest of every table the plan
 * read, and is used only while each of those tables still has that digest (checked at every query,
 * with the table's manifest version, by the TableCatalog), so a schema change plans again. Plans
 * that depend on more than the statement and the schemas (a time bound with now()) are never kept.
 * A new text of a known template (literal-template.ts: the text of an earlier one with other
 * literals) gets its statement without a parse.
 */
import { isDeepStrictEqual } from 'node:util';
import { LRUCache } from 'lru-cache';
import { forgetLiterals, liftLiterals, parameterized, type Literal } from '../../../core/query-plan/literals.js';
import type { QueryNode } from '../../../core/query-plan/parse-tree.js';
import type { TableInfo, TableVersion } from '../../meta/client.js';
import { statementOf, templateStatement, textTemplate, type TemplateStatement } from './literal-template.js';
import { writeParseTree } from './parse-tree-json.js';
import type { ExecutablePlan, ScanInput } from '../stages.js';
import { TemplateMismatch, type Planner } from './planner.js';
import type { SqlBinder } from './sql-binder.js';
import type { TableCatalog } from './table-catalog.js';

export interface CachedPlan {
  /** The plan with this query's parameters bound, and its time windows computed from them. */
  plan: ExecutablePlan;
  /** The statement as DuckDB parses it, literals included: the same for the same query however it is written. */
  statement: string;
  /** Each table the plan reads, as of a version check that began after the query arrived. */
  versions: Map<string, TableVersion>;
  /** Whether the plan came from the cache. */
  cached: boolean;
}

type Entry =
  | {
      /** Keyed by a shape, its SQL names the lifted literals as parameters; by a whole statement, it has them in. */
      plan: ExecutablePlan;
      /** Schema digest per table name. */
      schemas: Map<string, string>;
    }
  /** A shape whose SQL would not bind the same with parameters: its queries plan by their whole statement. */
  | { literal: true };

/** A statement's key, and its lifted literals' values in this text. */
interface Statement {
  /** The shape: the parse tree, positions gone and lifted literals as typed parameters. */
  shape: string;
  literals: Literal[];
  /** How many times the text was sent: from SENT_FOR_OWN_PLAN on, it is planned with its literals in (planOwn). */
  seen: number;
}

/** A text as DuckDB reads it (SqlBinder.statement), its tree and its statement. */
interface Parsed {
  read: string;
  node: QueryNode;
  statement: Statement;
}

export interface PlanCacheOptions {
  planner: Planner;
  /** Parses a statement for its key; evaluates a cached plan's time window for a query's values. */
  engine: Pick<SqlBinder, 'statement' | 'window'>;
  catalog: TableCatalog;
  /** Plans kept; 0 turns the cache off. @default 1000 */
  maxEntries?: number;
}

/**
 * How many times a text is sent before it gets a plan of its own (planOwn): a dashboard's fixed
 * panel soon; a moving window's text that happens to come back once, never (its planning would
 * cost more than it saves).
 */
const SENT_FOR_OWN_PLAN = 3;

/** Statements kept per text template (see PlanCache.templates). */
const STATEMENTS_PER_TEMPLATE = 4;

/** Plans kept unless the coordinator is told otherwise. */
export const DEFAULT_PLAN_CACHE_ENTRIES = 1000;

export class PlanCache {
  private readonly entries: LRUCache<string, Entry> | undefined;
  /** Each SQL text seen, exactly as sent, to its statement. */
  private readonly statements: LRUCache<string, Statement> | undefined;
  /**
   * Each text template parsed, to what its parses say of its texts: one for each value of the
   * tokens that are not lifted (panels that differ by a LIMIT), the latest first.
   */
  private readonly templates: LRUCache<string, TemplateStatement[]> | undefined;
  /** Statements being planned with their literals in (planOwn). */
  private readonly planning = new Set<string>();

  constructor(private readonly options: PlanCacheOptions) {
    const max = options.maxEntries ?? DEFAULT_PLAN_CACHE_ENTRIES;
    this.entries = max > 0 ? new LRUCache({ max }) : undefined;
    this.statements = max > 0 ? new LRUCache({ max: 4 * max }) : undefined;
    this.templates = max > 0 ? new LRUCache({ max }) : undefined;
  }

  async plan(sql: string): Promise<CachedPlan> {
    let parsed: Parsed | undefined;
    let statement = this.statements?.get(sql);
    if (!statement) {
      statement = this.fromTemplate(sql) ?? (parsed = await this.parse(sql)).statement;
      this.statements?.set(sql, statement);
    }
    statement.seen++;
    const identity = literalKey(statement);
    const own = statement.literals.length > 0 ? this.entries?.get(identity) : undefined;
    const shaped = this.entries?.get(statement.shape);
    const byStatement = (own && 'plan' in own) || (shaped && 'literal' in shaped);
    const [key, literals] = byStatement ? [identity, []] : [statement.shape, statement.literals];
    const entry = this.entries?.get(key);
    if (entry && 'plan' in entry) {
      const names = [...entry.schemas.keys()];
      const tables = await Promise.all(names.map((name) => this.options.catalog.table(name)));
      if (tables.every((t, i) => t && t.version.schema === entry.schemas.get(names[i]!))) {
        const versions = new Map(tables.map((t, i) => [names[i]!, t!.version]));
        if (!byStatement && statement.seen >= SENT_FOR_OWN_PLAN) this.planOwn(sql, identity);
        return { plan: await this.bind(entry.plan, literals), statement: identity, versions, cached: true };
      }
    }
    parsed ??= await this.parse(sql);
    if (literals.length === 0) forgetLiterals(parsed.node);
    try {
      return await this.planFresh(key, parsed, literals, identity);
    } catch (error) {
      if (!(error instanceof TemplateMismatch)) throw error;
      this.entries?.set(key, { literal: true });
      forgetLiterals(parsed.node);
      return await this.planFresh(identity, parsed, [], identity);
    }
  }

  /**
   * Plans a statement sent again and again with its literals in, behind its answers, for the next
   * time it comes: DuckDB plans a prepared scan with parameters anew at every run, where an owner
   * runs a scan it keeps prepared without parameters as it was planned. A dashboard's fixed panels
   * keep that speed; its moving ones are planned once by shape.
   */
  private planOwn(sql: string, identity: string): void {
    if (this.planning.has(identity)) return;
    this.planning.add(identity);
    void this.parse(sql)
      .then((parsed) => {
        forgetLiterals(parsed.node);
        return this.planFresh(identity, parsed, [], identity);
      })
      .catch(() => {}) // the shape's plan goes on serving it
      .finally(() => this.planning.delete(identity));
  }

  private async planFresh(
    key: string,
    { read, node }: Parsed,
    literals: Literal[],
    statement: string,
  ): Promise<CachedPlan> {
    const versions = new Map<string, TableVersion>();
    const schemas = new Map<string, string>();
    const lookup = async (name: string): Promise<TableInfo | undefined> => {
      const table = await this.options.catalog.table(name);
      if (table) {
        versions.set(name, table.version);
        schemas.set(name, table.version.schema);
      }
      return table?.info;
    };
    const plan = await this.options.planner.plan(read, lookup, { sql: read, node, literals });
    if (plan.reusable) this.entries?.set(key, { plan, schemas });
    else this.entries?.delete(key);
    return { plan, statement, versions, cached: false };
  }

  /** A cached plan for a query of its shape: this query's values, and the windows they bound. */
  private async bind(plan: ExecutablePlan, literals: Literal[]): Promise<ExecutablePlan> {
    if (literals.length === 0) return plan;
    const windowed = async (input: ScanInput): Promise<ScanInput> =>
      input.bounds
        ? { ...input, window: await this.options.engine.window(input.bounds.sql, input.bounds.lower, literals) }
        : input;
    const [inputs, broadcastPlans] = await Promise.all([
      Promise.all(plan.inputs.map(windowed)),
      plan.broadcastPlans &&
        Promise.all(plan.broadcastPlans.map(async (b) => ({ ...b, input: await windowed(b.input) }))),
    ]);
    return { ...plan, inputs, ...(broadcastPlans ? { broadcastPlans } : {}), parameters: literals };
  }

  /**
   * `sql` as DuckDB reads it, its parse tree with its liftable literals marked, and its statement;
   * what the parse says of its template is kept for the texts of that template to come.
   */
  private async parse(sql: string): Promise<Parsed> {
    const { sql: read, node } = await this.options.engine.statement(sql);
    const literals = liftLiterals(node);
    const shape = writeParseTree(parameterized(node, true));
    const template = this.templates && textTemplate(read);
    const known = template && templateStatement(template, node, shape, literals);
    if (known) {
      const others = (this.templates!.get(template.key) ?? []).filter((t) => !isDeepStrictEqual(t.slots, known.slots));
      this.templates!.set(template.key, [known, ...others].slice(0, STATEMENTS_PER_TEMPLATE));
    }
    return { read, node, statement: { shape, literals, seen: 0 } };
  }

  /** The statement of a text of a template parsed before, without a parse. */
  private fromTemplate(sql: string): Statement | undefined {
    const template = this.templates && textTemplate(sql);
    for (const known of (template && this.templates!.get(template.key)) ?? []) {
      const statement = statementOf(template!, known);
      if (statement) return { ...statement, seen: 0 };
    }
    return undefined;
  }
}

/** The key of the whole statement, literals included. */
const literalKey = ({ shape, literals }: Pick<Statement, 'shape' | 'literals'>): string =>
  literals.length === 0 ? shape : JSON.stringify([shape, literals.map((l) => [l.type, l.value])]);
