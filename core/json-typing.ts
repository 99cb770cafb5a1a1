/**
 * The typing rule: the column type each field of a table's first NDJSON batch gets, from every
 * value of the batch. docs/types.md says it in words and test/json-typing.test.ts holds the two
 * together.
 *
 * Berth types its tables itself instead of taking DuckDB's inference, because every type chosen
 * here must be one a Parquet segment holds exactly: DuckDB infers HUGEINT for integers of both
 * signs, and its Parquet writer stores HUGEINT as DOUBLE.
 */

/** A column as meta keeps it: a name and a DuckDB type. */
export interface Column {
  name: string;
  type: string;
}

/** A JSON number whose text a double would not keep as it was written (`1.0`, `2e3`, 2^64). */
export class NumberText {
  constructor(readonly digits: string) {}
}

/** A JSON number as the NDJSON reader hands it over: a double that prints as its text, or the text. */
export type JsonNumber = number | NumberText;

/** Thrown when a batch's values fit no type the rule allows; `field` is the field's path (`a.b[]`). */
export class TypingRefusal extends Error {
  override name = 'TypingRefusal';
  constructor(
    readonly field: string,
    readonly why: string,
  ) {
    super(`field "${field}": ${why}`);
  }
}

/** Digits a DECIMAL holds at most; DECIMAL(38,0) is stored exactly in Parquet. */
export const MAX_DECIMAL_DIGITS = 38;

const BIGINT_MIN = -(2n ** 63n);
const BIGINT_MAX = 2n ** 63n - 1n;
const UBIGINT_MAX = 2n ** 64n - 1n;

/** ISO 8601 date-times DuckDB reads: a date, a time to the second or finer, an optional offset. */
export const TIMESTAMP_TEXT = /^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}(:?\d{2})?)?$/;
/** ISO 8601 calendar dates. */
export const DATE_TEXT = /^\d{4}-\d{2}-\d{2}$/;
/** The instants past every other, which DuckDB keeps in a TIMESTAMP. */
export const INFINITE_TEXT = /^-?infinity$/;

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/**
 * Whether a string the patterns above call a date or a date-time names a real one, as DuckDB reads
 * it: a month of 1 to 12, a day the month has (leap years Gregorian), an hour below 24 or 24:00:00
 * exactly, minutes and seconds below 60. `2026-02-30` has the shape of a date and is none.
 */
export function onTheCalendar(text: string): boolean {
  const [, year, month, day, hour, minute, second, fraction] =
    /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?)?/.exec(text) ?? [];
  const y = Number(year);
  const m = Number(month);
  const leap = y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0);
  const days = m === 2 && leap ? 29 : DAYS_IN_MONTH[m - 1];
  if (days === undefined || Number(day) < 1 || Number(day) > days) return false;
  if (hour === undefined) return true;
  const midnight = hour === '24' && minute === '00' && second === '00' && !/[1-9]/.test(fraction ?? '');
  return (Number(hour) < 24 || midnight) && Number(minute) < 60 && Number(second) < 60;
}

export const isDigits = (value: unknown): value is NumberText => value instanceof NumberText;

/** A number's text as the batch spelled it (a double from the fast parser prints as its text). */
const numberText = (value: JsonNumber): string => (typeof value === 'number' ? String(value) : value.digits);

/** Whether a number's text is written as an integer (no fraction, no exponent). */
export const isIntegerText = (text: string): boolean => /^-?\d+$/.test(text);

/** A decimal's value in one spelling (`-0.123e5` for -12300 however written), to compare two spellings. */
function decimalKey(text: string): string {
  const match = /^(-?)(\d+)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/.exec(text);
  if (!match) return text;
  const [, sign, whole = '', fraction = '', exponent = '0'] = match;
  let digits = whole + fraction;
  let point = whole.length + Number(exponent);
  const lead = /^0*/.exec(digits)![0].length;
  digits = digits.slice(lead).replace(/0+$/, '');
  point -= lead;
  return digits === '' ? '0' : `${sign}0.${digits}e${point}`;
}

/**
 * Whether a DOUBLE keeps a number's value: the double nearest it prints as the same number
 * (0.1, 1e300), or it is an integer the double is exactly (2^64).
 */
export function exactInDouble(text: string): boolean {
  const double = Number(text);
  if (!Number.isFinite(double)) return false;
  const key = decimalKey(text);
  return (
    key === decimalKey(String(double)) || (Number.isInteger(double) && key === decimalKey(BigInt(double).toString()))
  );
}

/**
 * Whether a JSON column keeps a number as it was written: DuckDB keeps an integer's every digit,
 * and writes any other number back as the shortest text of its double (2.50 as 2.5, but
 * 18446744073709551616.0 as 18446744073709552000.0), so that text must be the same number.
 */
export function keptInJson(text: string): boolean {
  if (isIntegerText(text)) return true;
  const double = Number(text);
  return Number.isFinite(double) && decimalKey(text) === decimalKey(String(double));
}

/** Everything one field's values were, across the batch. */
class FieldValues {
  booleans = false;
  /** Integers: their range, and the first one a DOUBLE cannot keep. */
  integers?: { min: bigint; max: bigint; inexact?: string };
  /** Numbers with a fraction or an exponent, and the first one a DOUBLE cannot keep. */
  fractions?: { inexact?: string };
  /** Strings: whether each is a timestamp or a date, whether one had a time, the first that is neither. */
  strings?: { times: boolean; dates: boolean; other?: string };
  objects?: FieldMap;
  arrays?: FieldValues;
  /** The first number a JSON column would not keep as written (keptInJson). */
  unkeptInJson?: string;

  clone(): FieldValues {
    const copy = new FieldValues();
    copy.booleans = this.booleans;
    if (this.integers) copy.integers = { ...this.integers };
    if (this.fractions) copy.fractions = { ...this.fractions };
    if (this.strings) copy.strings = { ...this.strings };
    copy.objects = this.objects?.clone();
    copy.arrays = this.arrays?.clone();
    copy.unkeptInJson = this.unkeptInJson;
    return copy;
  }

  add(value: unknown, path: string): void {
    if (value === null || value === undefined) return;
    if (typeof value === 'boolean') this.booleans = true;
    else if (typeof value === 'number' || isDigits(value)) this.addNumber(numberText(value));
    else if (typeof value === 'string') this.addString(value);
    else if (Array.isArray(value)) {
      this.arrays ??= new FieldValues();
      for (const item of value) this.arrays.add(item, `${path}[]`);
    } else if (typeof value === 'object') {
      this.objects ??= new FieldMap(`${path}.`);
      this.objects.add(value as Record<string, unknown>);
    }
  }

  private addNumber(text: string): void {
    if (isIntegerText(text)) {
      const n = BigInt(text);
      const inexact = exactInDouble(text) ? undefined : text;
      if (!this.integers) this.integers = { min: n, max: n, inexact };
      else {
        if (n < this.integers.min) this.integers.min = n;
        if (n > this.integers.max) this.integers.max = n;
        this.integers.inexact ??= inexact;
      }
    } else {
      this.fractions ??= {};
      if (!exactInDouble(text)) this.fractions.inexact ??= text;
      if (!keptInJson(text)) this.unkeptInJson ??= text;
    }
  }

  private addString(text: string): void {
    this.strings ??= { times: false, dates: false };
    if (TIMESTAMP_TEXT.test(text)) this.strings.times = true;
    else if (DATE_TEXT.test(text)) this.strings.dates = true;
    else if (!INFINITE_TEXT.test(text)) this.strings.other ??= text;
  }

  /** The column type these values get (see docs/types.md); `timestamp`: the table's timestamp column. */
  type(path: string, timestamp = false): string {
    const kinds = [this.booleans, this.integers || this.fractions, this.strings, this.objects, this.arrays].filter(
      Boolean,
    ).length;
    if (timestamp) return this.timestampType(path, kinds);
    if (kinds === 0) return 'VARCHAR';
    if (kinds > 1) return this.jsonType(path);
    if (this.booleans) return 'BOOLEAN';
    if (this.integers || this.fractions) return this.numberType(path);
    if (this.strings) {
      const { times, dates, other } = this.strings;
      if (other !== undefined || !(times || dates)) return 'VARCHAR';
      return times ? 'TIMESTAMP' : 'DATE';
    }
    if (this.objects) return this.objects.size === 0 ? 'JSON' : `STRUCT(${this.objects.types().join(', ')})`;
    return `${this.arrays!.type(`${path}[]`)}[]`;
  }

  /** JSON, unless a number in the values, at any depth, would not be kept as written. */
  private jsonType(path: string): string {
    const unkept = this.firstUnkeptInJson();
    if (unkept !== undefined)
      throw new TypingRefusal(
        path,
        `its values are of several kinds (a JSON column), and ${unkept} would not be kept in JSON as written; send it as a string`,
      );
    return 'JSON';
  }

  firstUnkeptInJson(): string | undefined {
    return this.unkeptInJson ?? this.objects?.firstUnkeptInJson() ?? this.arrays?.firstUnkeptInJson();
  }

  private numberType(path: string): string {
    const { integers, fractions } = this;
    if (fractions) {
      const inexact = fractions.inexact ?? integers?.inexact;
      if (inexact !== undefined)
        throw new TypingRefusal(path, `${inexact} is not kept exactly by a DOUBLE; send such values as strings`);
      return 'DOUBLE';
    }
    const { min, max } = integers!;
    if (min >= BIGINT_MIN && max <= BIGINT_MAX) return 'BIGINT';
    if (min >= 0n && max <= UBIGINT_MAX) return 'UBIGINT';
    const widest = [min, max].find((n) => (n < 0n ? -n : n).toString().length > MAX_DECIMAL_DIGITS);
    if (widest !== undefined)
      throw new TypingRefusal(
        path,
        `${widest} has more than ${MAX_DECIMAL_DIGITS} digits, the most an exact column holds; send such values as strings`,
      );
    return `DECIMAL(${MAX_DECIMAL_DIGITS},0)`;
  }

  private timestampType(path: string, kinds: number): string {
    const needs = 'the timestamp column takes ISO 8601 strings such as "2026-11-01T00:00:00Z"';
    if (this.integers || this.fractions) throw new TypingRefusal(path, `${needs}; epoch numbers are not read as times`);
    if (kinds > 1 || !this.strings) throw new TypingRefusal(path, needs);
    if (this.strings.other !== undefined)
      throw new TypingRefusal(path, `${JSON.stringify(this.strings.other.slice(0, 60))} is not a timestamp: ${needs}`);
    return 'TIMESTAMP';
  }
}

/** The fields of a batch's rows (or of one nested object), in the order they were first seen. */
class FieldMap {
  private readonly fields = new Map<string, FieldValues>();
  /** Each field's name in lower case: SQL names ignore case, so two that differ only in case cannot both be columns. */
  private readonly lowerCase = new Map<string, string>();

  constructor(private readonly prefix = '') {}

  get size(): number {
    return this.fields.size;
  }

  clone(): FieldMap {
    const copy = new FieldMap(this.prefix);
    for (const [name, values] of this.fields) copy.fields.set(name, values.clone());
    for (const [lower, name] of this.lowerCase) copy.lowerCase.set(lower, name);
    return copy;
  }

  add(row: Record<string, unknown>): void {
    for (const [name, value] of Object.entries(row)) {
      let values = this.fields.get(name);
      if (!values) {
        const lower = name.toLowerCase();
        const other = this.lowerCase.get(lower);
        if (other !== undefined)
          throw new TypingRefusal(
            this.prefix + name,
            `differs from field "${this.prefix + other}" only in case, and SQL names ignore case: send one spelling`,
          );
        this.lowerCase.set(lower, name);
        this.fields.set(name, (values = new FieldValues()));
      }
      values.add(value, this.prefix + name);
    }
  }

  firstUnkeptInJson(): string | undefined {
    for (const values of this.fields.values()) {
      const unkept = values.firstUnkeptInJson();
      if (unkept !== undefined) return unkept;
    }
    return undefined;
  }

  /** The fields as STRUCT members: `"name" TYPE`. */
  types(): string[] {
    return [...this.fields].map(([name, values]) => `${quoteName(name)} ${values.type(this.prefix + name)}`);
  }

  columns(timestampColumn?: string): Column[] {
    return [...this.fields].map(([name, values]) => ({
      name,
      type: values.type(this.prefix + name, name === timestampColumn),
    }));
  }
}

const quoteName = (name: string) => `"${name.replaceAll('"', '""')}"`;

/**
 * Infers a table's columns from its first batch: add() each parsed row (numbers as JsonNumber),
 * then columns(). Throws TypingRefusal for a batch no column types fit.
 */
export class ColumnInference {
  private fields = new FieldMap();

  add(row: Record<string, unknown>): void {
    this.fields.add(row);
  }

  /** A copy to add rows to while this one stays as it is: to try a row before taking it. */
  clone(): ColumnInference {
    const copy = new ColumnInference();
    copy.fields = this.fields.clone();
    return copy;
  }

  columns(timestampColumn?: string): Column[] {
    return this.fields.columns(timestampColumn);
  }
}

/**
 * The type a column is read from JSON as: a TIMESTAMP (anywhere in it) is read as a
 * TIMESTAMPTZ, so that a UTC offset moves the instant, and cast back in UTC.
 */
export const jsonReadType = (type: string): string =>
  type.replace(/"(?:[^"]|"")*"|\bTIMESTAMP\b(?! WITH)/g, (token) => (token.startsWith('"') ? token : 'TIMESTAMPTZ'));
