/**
 * Registers Berth's search attributes (BerthTable, BerthPartition, BerthGroup, BerthPhase) on a
 * Temporal namespace through the operator service. A namespace without them refuses schedules
 * and workflow starts that set them and fails every workflow task that upserts them, so workers
 * run this before they poll, and `berth setup` runs it once for a deployment. Idempotent: present
 * attributes are left alone, and another process registering at the same moment is not an error.
 */
import type { Connection } from '@temporalio/client';
import proto from '@temporalio/proto';
import type { NativeConnection } from '@temporalio/worker';
import { SEARCH_ATTRIBUTES } from '../workflows/contracts/shared.js';

const { IndexedValueType } = proto.temporal.api.enums.v1;
const GRPC_ALREADY_EXISTS = 6;
const GRPC_PERMISSION_DENIED = 7;
const GRPC_UNIMPLEMENTED = 12;

export interface RegisteredSearchAttributes {
  /** Names added now. */
  added: string[];
  /** Names that were already there. */
  present: string[];
}

/** Thrown when a namespace already has one of Berth's search attributes with another type. */
export class SearchAttributeConflictError extends Error {
  override name = 'SearchAttributeConflictError';
}

const wanted = () =>
  Object.values(SEARCH_ATTRIBUTES).map((key) => ({
    name: key.name,
    type: IndexedValueType[`INDEXED_VALUE_TYPE_${key.type}`],
  }));

export async function registerSearchAttributes(
  connection: Pick<Connection | NativeConnection, 'operatorService'>,
  namespace: string,
  options: { timeoutMs?: number } = {},
): Promise<RegisteredSearchAttributes> {
  const operator = connection.operatorService;
  const current = async () => (await operator.listSearchAttributes({ namespace })).customAttributes ?? {};
  const existing = await current();
  for (const { name, type } of wanted()) {
    if (name in existing && existing[name] !== type) {
      throw new SearchAttributeConflictError(
        `namespace "${namespace}" has search attribute ${name} as ${IndexedValueType[existing[name]!]}; Berth needs ${IndexedValueType[type]}`,
      );
    }
  }
  const missing = wanted().filter(({ name }) => !(name in existing));
  if (missing.length > 0) {
    try {
      await operator.addSearchAttributes({
        namespace,
        searchAttributes: Object.fromEntries(missing.map(({ name, type }) => [name, type])),
      });
    } catch (error) {
      // Another worker registered them first: fine, as long as they end up there (checked below).
      // Two registering at once may also fail otherwise; then they must be listed already.
      const registeredMeanwhile = async () => {
        const now = await current().catch(() => ({}) as Record<string, unknown>);
        return missing.every(({ name }) => name in now);
      };
      if ((error as { code?: number }).code !== GRPC_ALREADY_EXISTS && !(await registeredMeanwhile())) {
        throw new Error(
          `could not register search attributes ${missing.map((m) => m.name).join(', ')} on namespace "${namespace}"`,
          { cause: error },
        );
      }
    }
    // Servers apply them asynchronously on some visibility stores: wait until they are listed.
    const deadline = Date.now() + (options.timeoutMs ?? 30_000);
    for (;;) {
      const now = await current();
      if (missing.every(({ name }) => name in now)) break;
      if (Date.now() > deadline)
        throw new Error(
          `search attributes ${missing.map((m) => m.name).join(', ')} were not listed on "${namespace}" within ${options.timeoutMs ?? 30_000} ms`,
        );
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
  return {
    added: missing.map((m) => m.name),
    present: wanted()
      .filter(({ name }) => name in existing)
      .map((m) => m.name),
  };
}

/**
 * What a worker does before it polls: registers them, but where the server will not let it (a
 * namespace whose credentials may not manage search attributes, as on Temporal Cloud), says so and
 * goes on: an operator may have registered them (`berth setup`, or the provider's own tools).
 */
export async function registerSearchAttributesOrWarn(
  connection: Pick<Connection | NativeConnection, 'operatorService'>,
  namespace: string,
  warn: (message: string) => void = console.warn,
): Promise<void> {
  try {
    await registerSearchAttributes(connection, namespace);
  } catch (error) {
    const code =
      (error as { code?: number; cause?: { code?: number } }).code ??
      (error as { cause?: { code?: number } }).cause?.code;
    if (code !== GRPC_PERMISSION_DENIED && code !== GRPC_UNIMPLEMENTED) throw error;
    warn(
      `this worker may not register Berth's search attributes on "${namespace}" (${(error as Error).message}); they must be registered already (berth setup)`,
    );
  }
}
