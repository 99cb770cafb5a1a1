/**
 * Binds a statement's `$n` parameters as typed values: each PARAMETER node of DuckDB's parse tree
 * becomes a constant (cast to the parameter's type where the client named one, else a string
 * literal that takes its type from where it stands, as PostgreSQL's `unknown` does), and DuckDB
 * writes the tree back as SQL. A value never becomes SQL syntax: it is a string inside the tree.
 */
import type { JsonValue } from '../api.js';
import { parameterDuckDBType } from './pg-types.js';

/** What binding needs of the coordinator's DuckDB: its parser, both ways. */
export interface ParseTrees {
  parse(sql: string): Promise<unknown>;
  deparse(node: never): Promise<string>;
}

/** A parameter as the client bound it: its type (0: unspecified) and its text, or null. */
export interface BoundParameter {
  oid: number;
  text: string | null;
}

type Node = { [key: string]: JsonValue | Node | Node[] };

export class ParameterBinder {
  /** The expression for each DuckDB type, as DuckDB parses `CAST(NULL AS type)`. */
  private readonly casts = new Map<string, Promise<Node>>();

  constructor(private readonly trees: ParseTrees) {}

  /** `sql` with its parameters bound: the SQL DuckDB writes for the tree with constants in their places. */
  async bind(sql: string, parameters: BoundParameter[]): Promise<string> {
    const tree = (await this.trees.parse(sql)) as Node;
    const values = await Promise.all(parameters.map((p) => this.constant(p)));
    const replace = (node: unknown): unknown => {
      if (Array.isArray(node)) return node.map(replace);
      if (node === null || typeof node !== 'object') return node;
      const n = node as Node;
      if (n.class === 'PARAMETER') {
        const index = Number(n.identifier) - 1;
        const value = values[index];
        if (value === undefined) throw new RangeError(`there is no parameter $${index + 1}`);
        return { ...value, alias: n.alias ?? '' };
      }
      return Object.fromEntries(Object.entries(n).map(([k, v]) => [k, replace(v)]));
    };
    return await this.trees.deparse(replace(tree) as never);
  }

  private async constant({ oid, text }: BoundParameter): Promise<Node> {
    const type = text === null ? undefined : parameterDuckDBType(oid, text);
    const literal: Node = {
      class: 'CONSTANT',
      type: 'VALUE_CONSTANT',
      alias: '',
      value:
        text === null
          ? { type: { id: 'NULL', type_info: null }, is_null: true }
          : { type: { id: 'VARCHAR', type_info: null }, is_null: false, value: text },
    };
    if (type === undefined) return literal;
    const cast = structuredClone(await this.castTo(type));
    return { ...cast, child: literal };
  }

  /** The CAST node for `type` (one of pg-types.ts's names, never a client's text). */
  private castTo(type: string): Promise<Node> {
    let cast = this.casts.get(type);
    if (!cast) {
      cast = this.trees.parse(`SELECT CAST(NULL AS ${type})`).then((tree) => {
        const select = (tree as { select_list: Node[] }).select_list[0]!;
        return select;
      });
      this.casts.set(type, cast);
    }
    return cast;
  }
}
