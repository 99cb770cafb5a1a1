/**
 * A query's plan as planning hands it to execution: the scan stage of each read of a table, and
 * the final stage that runs over what the scans send. Both folders read these types, and neither
 * imports the other (planning/planner.ts makes a plan, query-service.ts runs it).
 */
import type { TableInfo } from '../meta/client.js';
import type { ExchangeColumn, ExchangeInput } from '../common/final-stage/contract.js';
import type { Split } from './api.js';
import type { SqlParameter } from '../common/sql-parameters.js';

/** How a read is split between its owners and the final stage, and so a query's route: api.ts. */
export type { Split };

/** A column of a bound query, as DuckDB names and types it. */
export interface BoundColumn {
  name: string;
  type: string;
}

export interface TimeWindow {
  from?: number;
  to?: number;
}

/** A query that gives a read's time bounds as epoch milliseconds (planning/sql-binder.ts). */
export interface WindowSql {
  sql: string;
  /** The same with the query's lifted literals as parameters. */
  template: string;
  /** How many of its columns are lower bounds (the first); the rest are upper bounds. */
  lower: number;
}

/** What the scan stage sends each input of the final stage: common/final-stage/contract.ts. */
export type { ExchangeColumn, ExchangeInput };

/** The scan stage of one read of a table. */
export interface ScanInput {
  /** The name the final SQL reads this input by. */
  name: string;
  table: TableInfo;
  split: Split;
  /** What each owner runs over its segments; its columns are `c0`, `c1`, … */
  sql: string;
  /** The table's columns the scan reads. */
  columns: string[];
  exchange: ExchangeColumn[];
  /** For pruning segments by the manifest's min/max: this query's. */
  window: TimeWindow;
  /** Where the window depends on the query's parameters: the query that gives it from them. */
  bounds?: { sql: string; lower: number };
  /** Tables every owner reads whole beside its segments of `table`: a broadcast join's small sides. */
  whole?: WholeRead[];
}

/** A table each owner of a broadcast join reads whole, from its cache or S3 (core/query-plan/broadcast.ts). */
export interface WholeRead {
  table: TableInfo;
  /** The table's columns the owners read. */
  columns: string[];
}

/** A join run on the owners of one of its tables, the others broadcast: its one input and final stage. */
export interface BroadcastPlan {
  route: Split;
  /** The SELECT's partial over the join, on the owners of `input.table`, who read `input.whole` too. */
  input: ScanInput;
  finalSql: string;
}

export interface ExecutablePlan {
  /** The one read's split when the final stage only finishes its partials, else `rows`. */
  route: Split;
  /** Why the query is not one aggregate or select over one table. */
  reason?: string;
  tables: TableInfo[];
  inputs: ScanInput[];
  /** What the final stage runs over the inputs. */
  finalSql: string;
  columns: BoundColumn[];
  /**
   * A join's other ways to run: one per table that may be the partitioned side of a broadcast
   * join. Run instead of `inputs` when its other tables are small after pruning (query-service.ts).
   */
  broadcastPlans?: BroadcastPlan[];
  /** The values of the query's lifted literals (core/query-plan/literals.ts), which its SQL names `$p1`, … */
  parameters: SqlParameter[];
  /**
   * True when the plan depends only on the SQL and the tables' schemas: no function whose value
   * may change between queries (now(), random()...), since the time windows are evaluated at plan
   * time. Only such a plan may be reused (planning/plan-cache.ts).
   */
  reusable: boolean;
}
