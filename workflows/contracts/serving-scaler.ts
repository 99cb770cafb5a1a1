/**
 * The contract of the serving group's autoscaler workflow (servingScalerWorkflow, opt-in): its
 * config and settings, its memory and status, the load signal and the status query.
 */
import { defineQuery, defineSignal } from '@temporalio/workflow';
import type { ServingPlan, ServingScaleSettings } from '../../core/serving-scale.js';
import { withDefaults } from './shared.js';

export interface ServingScalerConfig extends Partial<ServingScaleSettings> {
  /** The serving group it scales. */
  group: string;
  /** A coordinator silent this long is forgotten (its load with it). @default 30000 */
  reportTtlMs?: number;
}

export type ServingScalerSettings = Required<ServingScalerConfig>;

export const SERVING_SCALER_DEFAULTS: Omit<ServingScalerSettings, 'group'> = {
  floor: 1,
  max: 8,
  waitingThreshold: 0,
  sustainMs: 30_000,
  idleMs: 600_000,
  reportTtlMs: 30_000,
};

export const servingScalerSettings = (config: ServingScalerConfig): ServingScalerSettings => ({
  ...withDefaults<ServingScalerSettings>(SERVING_SCALER_DEFAULTS, config),
  group: config.group,
});

/** A coordinator's serving queue: absolute counts, sent while it has queries and once when it empties. */
export interface ServingLoadReport {
  coordinator: string;
  running: number;
  waiting: number;
}

export interface ServingScalerStatus {
  group: string;
  /** The replicas the platform has from the scaler (its own workload's, not every member of the group). */
  replicas: number;
  floor: number;
  max: number;
  running: number;
  waiting: number;
  coordinators: number;
  /** Since when waiting has been above the threshold, or the group idle. */
  pressedSince?: number;
  idleSince?: number;
  /** The last steps, each with what it was expected to move, said before it was taken (newest last). */
  steps: ServingPlan[];
}

export interface ServingScalerMemory {
  replicas?: number;
  loads: Record<string, { running: number; waiting: number; at: number }>;
  pressedSince?: number;
  idleSince?: number;
  steps: ServingPlan[];
}

export interface ServingScalerInput {
  config: ServingScalerConfig;
  carried?: ServingScalerMemory;
}

export const servingScalerWorkflowId = (group: string) => `serving-scaler-${group}`;
export const servingLoadSignal = defineSignal<[ServingLoadReport]>('servingLoad');
export const servingScalerStatusQuery = defineQuery<ServingScalerStatus>('servingScalerStatus');
