/**
 * A session's settings as a PostgreSQL client sees them: what the server reports at startup
 * (ParameterStatus), what SET changes and SHOW reads. Only statement_timeout changes how Berth
 * runs a query (it cuts it, as the query deadline does); answers are in UTC and ISO dates
 * whatever a client asks, and the server says so.
 */

/** The settings reported to the client at startup and again when SET changes them. */
export const REPORTED = [
  'server_version',
  'server_encoding',
  'client_encoding',
  'application_name',
  'DateStyle',
  'IntervalStyle',
  'TimeZone',
  'integer_datetimes',
  'standard_conforming_strings',
  'is_superuser',
  'session_authorization',
  'default_transaction_read_only',
  'in_hot_standby',
];

/** Settings that are what Berth does, whatever a client sets them to. */
const FIXED: Record<string, string> = {
  server_encoding: 'UTF8',
  client_encoding: 'UTF8',
  datestyle: 'ISO, MDY',
  intervalstyle: 'postgres',
  timezone: 'UTC',
  integer_datetimes: 'on',
  standard_conforming_strings: 'on',
  is_superuser: 'off',
  default_transaction_read_only: 'on',
  transaction_read_only: 'on',
  in_hot_standby: 'off',
};

const DEFAULTS: Record<string, string> = {
  application_name: '',
  statement_timeout: '0',
  extra_float_digits: '1',
  search_path: '"$user", public',
  transaction_isolation: 'read committed',
  default_transaction_isolation: 'read committed',
  max_identifier_length: '63',
  lc_collate: 'C.UTF-8',
  lc_ctype: 'C.UTF-8',
  bytea_output: 'hex',
  max_index_keys: '32',
  idle_in_transaction_session_timeout: '0',
  lock_timeout: '0',
};

/** Thrown when a SET or SHOW names a setting PostgreSQL has no such name for. */
export class UnknownSetting extends Error {
  override name = 'UnknownSetting';
}

export class SessionSettings {
  private readonly values = new Map<string, string>();

  constructor(
    private readonly serverVersion: string,
    private readonly user: string,
  ) {}

  /** Every reported setting, for the startup's ParameterStatus messages. */
  reported(): [string, string][] {
    return REPORTED.map((name) => [name, this.get(name)!]);
  }

  get(name: string): string | undefined {
    const key = name.toLowerCase();
    if (key === 'server_version') return this.serverVersion;
    if (key === 'session_authorization') return this.user;
    return FIXED[key] ?? this.values.get(key) ?? DEFAULTS[key];
  }

  /** Sets (or, with undefined, resets) one; answers the ParameterStatus to send, if it is reported, and a notice where Berth keeps its own. */
  set(name: string, value: string | undefined): { status?: [string, string]; notice?: string } {
    const key = name.toLowerCase();
    if (key === 'all' && value === undefined) {
      this.values.clear();
      return {};
    }
    if (!(key in FIXED) && !(key in DEFAULTS) && !key.includes('.'))
      throw new UnknownSetting(`unrecognized configuration parameter "${name}"`);
    if (key === 'statement_timeout' && value !== undefined) this.values.set(key, String(timeoutMs(value)));
    else if (value === undefined) this.values.delete(key);
    else if (!(key in FIXED)) this.values.set(key, value);
    const reported = REPORTED.find((r) => r.toLowerCase() === key);
    const notice =
      key in FIXED && value !== undefined && value.toLowerCase() !== FIXED[key]!.toLowerCase()
        ? `Berth keeps ${name} at "${FIXED[key]}": its answers do not change with it`
        : undefined;
    return { ...(reported ? { status: [reported, this.get(key)!] as [string, string] } : {}), notice };
  }

  /** The statement timeout in ms; 0 for none. */
  get statementTimeoutMs(): number {
    return Number(this.get('statement_timeout'));
  }

  all(): [string, string][] {
    const names = new Set([...Object.keys(FIXED), ...Object.keys(DEFAULTS), ...this.values.keys()]);
    return [...names].sort().map((n) => [n, this.get(n)!]);
  }
}

/** statement_timeout's value in ms: a number of ms, or with a unit (ms, s, min, h, d). */
function timeoutMs(value: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|min|h|d)?\s*$/i.exec(value);
  if (!match) throw new UnknownSetting(`invalid value for parameter "statement_timeout": "${value}"`);
  const unit = { ms: 1, s: 1000, min: 60_000, h: 3_600_000, d: 86_400_000 }[(match[2] ?? 'ms').toLowerCase()]!;
  return Math.round(Number(match[1]) * unit);
}
