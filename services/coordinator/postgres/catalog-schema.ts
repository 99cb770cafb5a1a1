/**
 * The PostgreSQL catalog Berth shows its clients: the pg_catalog relations and functions psql,
 * JDBC's DatabaseMetaData and BI tools read, as tables and macros of the catalog's DuckDB
 * (catalog.ts). Relations clients ask about that Berth has nothing of (policies, publications,
 * inheritance, defaults) are empty tables with PostgreSQL's columns, so those questions get
 * PostgreSQL's answer for a database without any: no rows.
 */
import { OID } from './pg-types.js';

/** The oids of the catalog's fixed objects. */
export const CATALOG_OIDS = {
  pgCatalog: 11,
  public: 2200,
  informationSchema: 13000,
  owner: 10,
  database: 16384,
  heap: 2,
};
/** The first oid of Berth's tables; each column's table type follows its table. */
export const FIRST_TABLE_OID = 20000;

/** The types Berth answers with: oid, name, length, category, element and array type, and how format_type names them. */
const TYPES: [oid: number, name: string, length: number, category: string, display: string][] = [
  [OID.bool, 'bool', 1, 'B', 'boolean'],
  [OID.bytea, 'bytea', -1, 'U', 'bytea'],
  [OID.name, 'name', 64, 'S', 'name'],
  [18, 'char', 1, 'Z', '"char"'],
  [OID.int8, 'int8', 8, 'N', 'bigint'],
  [OID.int2, 'int2', 2, 'N', 'smallint'],
  [OID.int4, 'int4', 4, 'N', 'integer'],
  [OID.text, 'text', -1, 'S', 'text'],
  [OID.oid, 'oid', 4, 'N', 'oid'],
  [OID.json, 'json', -1, 'U', 'json'],
  [OID.float4, 'float4', 4, 'N', 'real'],
  [OID.float8, 'float8', 8, 'N', 'double precision'],
  [OID.unknown, 'unknown', -2, 'X', 'unknown'],
  [OID.bpchar, 'bpchar', -1, 'S', 'character'],
  [OID.varchar, 'varchar', -1, 'S', 'character varying'],
  [OID.date, 'date', 4, 'D', 'date'],
  [OID.time, 'time', 8, 'D', 'time without time zone'],
  [OID.timestamp, 'timestamp', 8, 'D', 'timestamp without time zone'],
  [OID.timestamptz, 'timestamptz', 8, 'D', 'timestamp with time zone'],
  [OID.interval, 'interval', 16, 'T', 'interval'],
  [OID.timetz, 'timetz', 12, 'D', 'time with time zone'],
  [OID.varbit, 'varbit', -1, 'V', 'bit varying'],
  [OID.numeric, 'numeric', -1, 'N', 'numeric'],
  [OID.uuid, 'uuid', 16, 'U', 'uuid'],
  [OID.jsonb, 'jsonb', -1, 'U', 'jsonb'],
];
const ARRAYS: [array: number, element: number][] = [
  [1000, OID.bool],
  [1001, OID.bytea],
  [1005, OID.int2],
  [1007, OID.int4],
  [1009, OID.text],
  [1015, OID.varchar],
  [1016, OID.int8],
  [1021, OID.float4],
  [1022, OID.float8],
  [1115, OID.timestamp],
  [1182, OID.date],
  [1183, OID.time],
  [1185, OID.timestamptz],
  [1187, OID.interval],
  [1231, OID.numeric],
  [1270, OID.timetz],
  [1563, OID.varbit],
  [2951, OID.uuid],
  [199, OID.json],
  [3807, OID.jsonb],
];

const q = (s: string) => `'${s.replace(/'/g, "''")}'`;

const typeRows = [
  ...TYPES.map(([oid, name, length, category, display]) => {
    const array = ARRAYS.find(([, e]) => e === oid)?.[0] ?? 0;
    return `(${oid}, ${q(name)}, ${length}, ${q(category)}, 0, ${array}, ${q(display)})`;
  }),
  ...ARRAYS.map(([array, element]) => {
    const [, name, , , display] = TYPES.find(([oid]) => oid === element)!;
    return `(${array}, ${q(`_${name}`)}, -1, 'A', ${element}, 0, ${q(`${display}[]`)})`;
  }),
];

/** Statements that build the catalog in database `berth`, schema `pgcat` (the search path's first). */
export const CATALOG_SCHEMA: string[] = [
  `CREATE TABLE berth_types(oid INTEGER, typname VARCHAR, typlen SMALLINT, typcategory VARCHAR, typelem INTEGER, typarray INTEGER, display VARCHAR)`,
  `INSERT INTO berth_types VALUES ${typeRows.join(', ')}`,
  `CREATE TABLE pg_namespace(oid INTEGER, nspname VARCHAR, nspowner INTEGER, nspacl VARCHAR[])`,
  `INSERT INTO pg_namespace VALUES (${CATALOG_OIDS.pgCatalog}, 'pg_catalog', 10, NULL), (${CATALOG_OIDS.public}, 'public', 10, NULL), (${CATALOG_OIDS.informationSchema}, 'information_schema', 10, NULL)`,
  `CREATE TABLE pg_class(oid INTEGER, relname VARCHAR, relnamespace INTEGER, reltype INTEGER, reloftype INTEGER,
     relowner INTEGER, relam INTEGER, relfilenode INTEGER, reltablespace INTEGER, relpages INTEGER, reltuples REAL,
     relallvisible INTEGER, reltoastrelid INTEGER, relhasindex BOOLEAN, relisshared BOOLEAN, relpersistence VARCHAR,
     relkind VARCHAR, relnatts SMALLINT, relchecks SMALLINT, relhasrules BOOLEAN, relhastriggers BOOLEAN,
     relhassubclass BOOLEAN, relrowsecurity BOOLEAN, relforcerowsecurity BOOLEAN, relispopulated BOOLEAN,
     relreplident VARCHAR, relispartition BOOLEAN, relrewrite INTEGER, relfrozenxid INTEGER, relminmxid INTEGER,
     relacl VARCHAR[], reloptions VARCHAR[], relpartbound VARCHAR)`,
  `CREATE TABLE pg_attribute(attrelid INTEGER, attname VARCHAR, atttypid INTEGER, attstattarget SMALLINT, attlen SMALLINT,
     attnum SMALLINT, attndims SMALLINT, attcacheoff INTEGER, atttypmod INTEGER, attbyval BOOLEAN, attalign VARCHAR,
     attstorage VARCHAR, attcompression VARCHAR, attnotnull BOOLEAN, atthasdef BOOLEAN, atthasmissing BOOLEAN,
     attidentity VARCHAR, attgenerated VARCHAR, attisdropped BOOLEAN, attislocal BOOLEAN, attinhcount SMALLINT,
     attcollation INTEGER, attacl VARCHAR[], attoptions VARCHAR[], attfdwoptions VARCHAR[], attmissingval VARCHAR)`,
  `CREATE VIEW pg_type AS SELECT oid, typname, ${CATALOG_OIDS.pgCatalog} AS typnamespace, 10 AS typowner, typlen,
     typlen > 0 AND typlen <= 8 AS typbyval, 'b' AS typtype, typcategory, false AS typispreferred, true AS typisdefined,
     ',' AS typdelim, 0 AS typrelid, 0 AS typsubscript, typelem, typarray, typname || 'in' AS typinput,
     typname || 'out' AS typoutput, typname || 'recv' AS typreceive, typname || 'send' AS typsend, 0 AS typmodin,
     0 AS typmodout, 0 AS typanalyze, 'i' AS typalign, 'p' AS typstorage, false AS typnotnull, 0 AS typbasetype,
     -1 AS typtypmod, 0 AS typndims, CASE WHEN typcategory = 'S' THEN 100 ELSE 0 END AS typcollation,
     NULL::VARCHAR AS typdefaultbin, NULL::VARCHAR AS typdefault, NULL::VARCHAR[] AS typacl
     FROM berth_types`,
  `CREATE TABLE pg_database(oid INTEGER, datname VARCHAR, datdba INTEGER, encoding INTEGER, datlocprovider VARCHAR,
     datistemplate BOOLEAN, datallowconn BOOLEAN, datconnlimit INTEGER, datfrozenxid INTEGER, datminmxid INTEGER,
     dattablespace INTEGER, datcollate VARCHAR, datctype VARCHAR, daticulocale VARCHAR, daticurules VARCHAR,
     datcollversion VARCHAR, datacl VARCHAR[])`,
  `INSERT INTO pg_database VALUES (${CATALOG_OIDS.database}, 'berth', 10, 6, 'c', false, true, -1, 0, 0, 1663, 'C.UTF-8', 'C.UTF-8', NULL, NULL, NULL, NULL)`,
  `CREATE TABLE pg_am(oid INTEGER, amname VARCHAR, amhandler VARCHAR, amtype VARCHAR)`,
  `INSERT INTO pg_am VALUES (${CATALOG_OIDS.heap}, 'heap', 'heap_tableam_handler', 't')`,
  `CREATE TABLE pg_roles(oid INTEGER, rolname VARCHAR, rolsuper BOOLEAN, rolinherit BOOLEAN, rolcreaterole BOOLEAN,
     rolcreatedb BOOLEAN, rolcanlogin BOOLEAN, rolreplication BOOLEAN, rolconnlimit INTEGER, rolpassword VARCHAR,
     rolvaliduntil TIMESTAMPTZ, rolbypassrls BOOLEAN, rolconfig VARCHAR[])`,
  `INSERT INTO pg_roles VALUES (10, 'berth', false, true, false, false, true, false, -1, '********', NULL, false, NULL)`,
  `CREATE VIEW pg_user AS SELECT rolname AS usename, oid AS usesysid, rolcreatedb AS usecreatedb, rolsuper AS usesuper,
     false AS userepl, false AS usebypassrls, rolpassword AS passwd, rolvaliduntil AS valuntil, rolconfig AS useconfig FROM pg_roles`,
  `CREATE TABLE pg_tablespace(oid INTEGER, spcname VARCHAR, spcowner INTEGER, spcacl VARCHAR[], spcoptions VARCHAR[])`,
  `INSERT INTO pg_tablespace VALUES (1663, 'pg_default', 10, NULL, NULL)`,
  `CREATE TABLE pg_attrdef(oid INTEGER, adrelid INTEGER, adnum SMALLINT, adbin VARCHAR)`,
  `CREATE TABLE pg_collation(oid INTEGER, collname VARCHAR, collnamespace INTEGER, collowner INTEGER, collprovider VARCHAR,
     collisdeterministic BOOLEAN, collencoding INTEGER, collcollate VARCHAR, collctype VARCHAR)`,
  `CREATE TABLE pg_policy(oid INTEGER, polname VARCHAR, polrelid INTEGER, polcmd VARCHAR, polpermissive BOOLEAN,
     polroles INTEGER[], polqual VARCHAR, polwithcheck VARCHAR)`,
  `CREATE TABLE pg_statistic_ext(oid INTEGER, stxrelid INTEGER, stxname VARCHAR, stxnamespace INTEGER, stxowner INTEGER,
     stxstattarget INTEGER, stxkeys SMALLINT[], stxkind VARCHAR[], stxexprs VARCHAR)`,
  `CREATE TABLE pg_publication(oid INTEGER, pubname VARCHAR, pubowner INTEGER, puballtables BOOLEAN, pubinsert BOOLEAN,
     pubupdate BOOLEAN, pubdelete BOOLEAN, pubtruncate BOOLEAN, pubviaroot BOOLEAN)`,
  `CREATE TABLE pg_publication_namespace(oid INTEGER, pnpubid INTEGER, pnnspid INTEGER)`,
  `CREATE TABLE pg_publication_rel(oid INTEGER, prpubid INTEGER, prrelid INTEGER, prqual VARCHAR, prattrs SMALLINT[])`,
  `CREATE TABLE pg_inherits(inhrelid INTEGER, inhparent INTEGER, inhseqno INTEGER, inhdetachpending BOOLEAN)`,
  `CREATE TABLE pg_description(objoid INTEGER, classoid INTEGER, objsubid INTEGER, description VARCHAR)`,
  `CREATE TABLE pg_shdescription(objoid INTEGER, classoid INTEGER, description VARCHAR)`,
  `CREATE TABLE pg_index(indexrelid INTEGER, indrelid INTEGER, indnatts SMALLINT, indnkeyatts SMALLINT, indisunique BOOLEAN,
     indisprimary BOOLEAN, indisexclusion BOOLEAN, indimmediate BOOLEAN, indisclustered BOOLEAN, indisvalid BOOLEAN,
     indisreplident BOOLEAN, indkey SMALLINT[], indexprs VARCHAR, indpred VARCHAR)`,
  `CREATE TABLE pg_constraint(oid INTEGER, conname VARCHAR, connamespace INTEGER, contype VARCHAR, condeferrable BOOLEAN,
     condeferred BOOLEAN, convalidated BOOLEAN, conrelid INTEGER, contypid INTEGER, conindid INTEGER, conparentid INTEGER,
     confrelid INTEGER, confupdtype VARCHAR, confdeltype VARCHAR, confmatchtype VARCHAR, conislocal BOOLEAN,
     coninhcount INTEGER, connoinherit BOOLEAN, conkey SMALLINT[], confkey SMALLINT[], conbin VARCHAR)`,
  `CREATE TABLE pg_proc(oid INTEGER, proname VARCHAR, pronamespace INTEGER, proowner INTEGER, prolang INTEGER,
     prokind VARCHAR, proretset BOOLEAN, prorettype INTEGER, proargtypes INTEGER[], proargnames VARCHAR[])`,
  `CREATE TABLE pg_trigger(oid INTEGER, tgrelid INTEGER, tgname VARCHAR, tgfoid INTEGER, tgtype SMALLINT, tgenabled VARCHAR, tgisinternal BOOLEAN)`,
  `CREATE TABLE pg_rewrite(oid INTEGER, rulename VARCHAR, ev_class INTEGER, ev_type VARCHAR, ev_enabled VARCHAR, is_instead BOOLEAN)`,
  `CREATE TABLE pg_extension(oid INTEGER, extname VARCHAR, extowner INTEGER, extnamespace INTEGER, extrelocatable BOOLEAN, extversion VARCHAR)`,
  `CREATE TABLE pg_enum(oid INTEGER, enumtypid INTEGER, enumsortorder REAL, enumlabel VARCHAR)`,
  `CREATE TABLE pg_range(rngtypid INTEGER, rngsubtype INTEGER)`,
  `CREATE TABLE pg_sequence(seqrelid INTEGER, seqtypid INTEGER)`,
  `CREATE TABLE pg_foreign_table(ftrelid INTEGER, ftserver INTEGER, ftoptions VARCHAR[])`,
  `CREATE TABLE pg_views(schemaname VARCHAR, viewname VARCHAR, viewowner VARCHAR, definition VARCHAR)`,
  `CREATE TABLE pg_matviews(schemaname VARCHAR, matviewname VARCHAR, matviewowner VARCHAR, tablespace VARCHAR,
     hasindexes BOOLEAN, ispopulated BOOLEAN, definition VARCHAR)`,
  `CREATE VIEW pg_tables AS SELECT 'public' AS schemaname, relname AS tablename, 'berth' AS tableowner,
     NULL::VARCHAR AS tablespace, false AS hasindexes, false AS hasrules, false AS hastriggers, false AS rowsecurity
     FROM pg_class WHERE relkind = 'r'`,
  `CREATE TABLE tables(table_catalog VARCHAR, table_schema VARCHAR, table_name VARCHAR, table_type VARCHAR,
     self_referencing_column_name VARCHAR, reference_generation VARCHAR, user_defined_type_catalog VARCHAR,
     user_defined_type_schema VARCHAR, user_defined_type_name VARCHAR, is_insertable_into VARCHAR, is_typed VARCHAR,
     commit_action VARCHAR)`,
  `CREATE TABLE columns(table_catalog VARCHAR, table_schema VARCHAR, table_name VARCHAR, column_name VARCHAR,
     ordinal_position INTEGER, column_default VARCHAR, is_nullable VARCHAR, data_type VARCHAR,
     character_maximum_length INTEGER, character_octet_length INTEGER, numeric_precision INTEGER,
     numeric_precision_radix INTEGER, numeric_scale INTEGER, datetime_precision INTEGER, udt_catalog VARCHAR,
     udt_schema VARCHAR, udt_name VARCHAR, is_updatable VARCHAR)`,
  `CREATE VIEW schemata AS SELECT 'berth' AS catalog_name, nspname AS schema_name, 'berth' AS schema_owner FROM pg_namespace`,
  // Functions clients call, as PostgreSQL answers them for Berth.
  `CREATE MACRO pg_get_userbyid(role) AS 'berth'`,
  `CREATE MACRO pg_table_is_visible(rel) AS true`,
  `CREATE MACRO pg_type_is_visible(t) AS true`,
  `CREATE MACRO pg_encoding_to_char(e) AS 'UTF8'`,
  `CREATE MACRO pg_get_expr(expr, rel, pretty := false) AS NULL::VARCHAR`,
  `CREATE MACRO pg_relation_is_publishable(rel) AS false`,
  `CREATE MACRO pg_get_statisticsobjdef_columns(o) AS NULL::VARCHAR`,
  `CREATE MACRO pg_get_indexdef(i, c := 0, p := false) AS NULL::VARCHAR`,
  `CREATE MACRO pg_get_constraintdef(c, p := false) AS NULL::VARCHAR`,
  `CREATE MACRO pg_get_viewdef(v, p := false) AS NULL::VARCHAR`,
  `CREATE MACRO pg_total_relation_size(rel) AS 0::BIGINT`,
  `CREATE MACRO pg_relation_size(rel) AS 0::BIGINT`,
  `CREATE MACRO pg_backend_pid() AS 0`,
  `CREATE MACRO obj_description(o, c := NULL) AS NULL::VARCHAR`,
  `CREATE MACRO col_description(o, n) AS NULL::VARCHAR`,
  `CREATE MACRO shobj_description(o, c) AS NULL::VARCHAR`,
  `CREATE MACRO has_table_privilege(a, b := NULL, c := NULL) AS true`,
  `CREATE MACRO has_schema_privilege(a, b := NULL, c := NULL) AS true`,
  `CREATE MACRO has_database_privilege(a, b := NULL, c := NULL) AS true`,
  `CREATE MACRO has_any_column_privilege(a, b := NULL, c := NULL) AS true`,
  `CREATE MACRO array_upper(a, d) AS len(a)`,
  `CREATE MACRO array_lower(a, d) AS CASE WHEN len(a) > 0 THEN 1 END`,
  `CREATE MACRO regclass_oid(name) AS (SELECT CASE name WHEN 'pg_class' THEN 1259 WHEN 'pg_type' THEN 1247
     WHEN 'pg_namespace' THEN 2615 WHEN 'pg_attribute' THEN 1249 WHEN 'pg_proc' THEN 1255
     ELSE (SELECT min(oid) FROM pg_class WHERE relname = name) END)`,
  `CREATE MACRO format_type(t, m) AS (SELECT CASE WHEN typname = 'numeric' AND m > 4 THEN 'numeric(' || ((m - 4) >> 16) || ',' || ((m - 4) & 65535) || ')'
     ELSE display END FROM berth_types WHERE oid = t)`,
  `CREATE MACRO current_schemas(implicit) AS CASE WHEN implicit THEN ['pg_catalog', 'public'] ELSE ['public'] END`,
  `CREATE MACRO current_schema() AS 'public'`,
  `CREATE MACRO current_database() AS 'berth'`,
  `CREATE MACRO to_regclass(name) AS (SELECT min(oid) FROM pg_class WHERE relname = name)`,
  `CREATE MACRO txid_current() AS 1::BIGINT`,
];

/** The catalog rows of one of Berth's tables: its pg_class row, its columns, and information_schema's. */
export interface CatalogColumn {
  name: string;
  typeOid: number;
  modifier: number;
  length: number;
}
