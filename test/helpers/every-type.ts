/** A query over every type the Arrow exchange carries (services/common/arrow-exchange.ts), for the tests of both its ends. */

/** Columns of every type the exchange carries, NULL in some rows, over 5,000 rows (three DuckDB chunks). */
export const EVERY_TYPE = `SELECT i, (i % 100)::TINYINT AS t, ((i % 30) * 1000)::SMALLINT AS s, i::UBIGINT * 1000000000000 AS ub,
    i::HUGEINT * 10000000000000000000000000 AS h, (-i)::HUGEINT - 170141183460469231731687303715884100000 AS hn, 340282366920938463463374607431768211455::UHUGEINT - i AS uh,
    ((i % 600) * 1.5)::DECIMAL(4,1) AS d4, (i * -1.25)::DECIMAL(9,2) AS d9, (i * -123456.789)::DECIMAL(18,3) AS d18, (i * -1234567890123456789.123)::DECIMAL(38,3) AS d38,
    CASE WHEN i % 3 = 0 THEN NULL ELSE i / 7.0 END AS dbl, '-0.0'::DOUBLE AS negz, 'inf'::DOUBLE AS inf, 'nan'::DOUBLE AS nan, i::FLOAT / 3 AS f,
    i % 2 = 0 AS b, CASE WHEN i % 5 = 0 THEN NULL ELSE i % 2 = 1 END AS bn,
    DATE '2026-11-01' + i::INT AS dt, TIME '12:34:56.789012' AS tm, TIMESTAMP '2026-11-01' + to_microseconds(i) AS ts, TIMESTAMP_NS '2026-11-01 00:00:00.123456789' AS tns,
    TIMESTAMP_MS '2026-11-01 00:00:00.123' AS tms, TIMESTAMP_S '2026-11-01 00:00:01' AS tsec, TIMESTAMPTZ '2026-11-01 00:00:00.5+00' AS tz, TIMETZ '12:00:00+05' AS ttz,
    INTERVAL (i) DAY + INTERVAL 3 MONTH + to_microseconds(i) AS iv, '8ac7f0b2-0000-4000-8000-00000000000a'::UUID AS u,
    CASE WHEN i % 4 = 0 THEN NULL ELSE repeat('x', i % 30) END AS str, 'ünïcødé ' || i AS uni, '\\xAA\\x00'::BLOB AS bl, '101'::BIT AS bit, 12345678901234567890123456789::BIGNUM AS big,
    [i, NULL, i + 1] AS lst, CASE WHEN i % 3 = 0 THEN NULL ELSE ['a', repeat('long', i % 7), NULL] END AS lstr,
    {'a': i, 'b': [1.5, '-0.0'::DOUBLE], 'c': {'d': 'e' || i}} AS st, CASE WHEN i % 7 = 0 THEN NULL ELSE MAP {'k' || i: [i]} END AS m,
    [i, i + 1]::INT[2] AS arr, [[i], [], NULL] AS nested, [{'x': [NULL, 'y' || repeat('z', i % 20)]}] AS deep
  FROM range(0, 5000) t(i)`;
