/**
 * What every workflow's contract shares: the task queues, the search attributes and how settings
 * take their defaults. Services, the CLI and workers import the contracts without worker code.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/** Pool control (the heavy pool's workflow and its activities) runs on this task queue. */
export const TASK_QUEUE = 'berth';
/** Merges and the janitor run on a queue of their own next to it, so that a long merge never delays a launch. */
export const mergeTaskQueueFor = (taskQueue: string) => `${taskQueue}-merge`;
export const MERGE_TASK_QUEUE = mergeTaskQueueFor(TASK_QUEUE);

/** Search attributes, registered on the namespace, so `temporal workflow list --query` finds runs. */
export const SEARCH_ATTRIBUTES = {
  table: defineSearchAttributeKey('BerthTable', SearchAttributeType.KEYWORD),
  partition: defineSearchAttributeKey('BerthPartition', SearchAttributeType.KEYWORD),
  group: defineSearchAttributeKey('BerthGroup', SearchAttributeType.KEYWORD),
  phase: defineSearchAttributeKey('BerthPhase', SearchAttributeType.KEYWORD),
};

/** A config over its defaults: an option left out or given as undefined takes its default. */
export const withDefaults = <Settings extends object>(
  defaults: Partial<Settings>,
  config: Partial<Settings>,
): Settings =>
  ({
    ...defaults,
    ...Object.fromEntries(Object.entries(config).filter(([, v]) => v !== undefined)),
  }) as Settings;
