/**
 * The controller's wire contract: every route's request and response schema. What it answers is
 * the workflows' results (a launch's update, a pool's status and usage, a preflight, the serving
 * autoscaler's status): their shapes live in workflows/contracts/ and core, and pass through here
 * as they are, typed as they are there.
 */
import { Type, type Static } from 'typebox';
import type { NodeUsage } from '../../core/node-hours.js';
import { LARGEST_SANE_TARGET, type LaunchAccepted, type PoolStatus } from '../../workflows/contracts/heavy-pool.js';
import type { PreflightReport } from '../../workflows/contracts/preflight.js';
import type { ServingScalerStatus } from '../../workflows/contracts/serving-scaler.js';
import { DefinedIn, GroupName } from '../common/schemas.js';

export type { LaunchAccepted, NodeUsage, PreflightReport, ServingScalerStatus };

export const GroupParams = Type.Object({ group: GroupName });

/** POST /v1/pools/:group/launch: raise the pool's target. */
export const LaunchRequest = Type.Object(
  { target: Type.Integer({ minimum: 1, maximum: LARGEST_SANE_TARGET }) },
  { additionalProperties: false },
);
/** The pool's workflow, and its target after this request (rounded up to the increment, capped, never lowered). */
export const LaunchAnswer = DefinedIn<LaunchAccepted>('workflows/contracts/heavy-pool.ts (LaunchAccepted)');

/** GET /v1/pools/:group/status: the pool's status, with the routes of its preflight and usage. */
export const PoolStatusAnswer = DefinedIn<PoolStatus & { links?: { preflight: string; usage: string } }>(
  'workflows/contracts/heavy-pool.ts (PoolStatus), with links',
);
export type PoolStatusAnswer = Static<typeof PoolStatusAnswer>;

/** GET /v1/pools/:group/usage: the pool's node-hours ledger. */
export const PoolUsage = DefinedIn<NodeUsage>('core/node-hours.ts (NodeUsage)');
/** GET /v1/pools/:group/preflight: the checks a worker ran, and how many failed. */
export const Preflight = DefinedIn<PreflightReport>('core/preflight.ts (PreflightReport)');
/** GET /v1/serving/:group/autoscaler. */
export const ServingAutoscaler = DefinedIn<ServingScalerStatus>(
  'workflows/contracts/serving-scaler.ts (ServingScalerStatus)',
);
