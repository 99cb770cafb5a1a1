/** The meta service's configuration: the variables it reads, their defaults and their ranges (see docs/configuration.md). */
import { Type, type Static } from 'typebox';
import { Host, Millis, Port, Settings } from '../common/config.js';
import { DEFAULT_MAX_VCPUS } from './api.js';
import { DEFAULT_DEDUP_WINDOW_MS, DEFAULT_EXPIRY_MS } from './store.js';

export const MetaConfig = Type.Object({
  ...Settings.common,
  ...Settings.heartbeat,
  /** postgres://… for any number of replicas; unset: SQLite in BERTH_META_DIR. */
  BERTH_META_DATABASE: Type.Optional(Type.String()),
  /** @default DATA/meta */
  BERTH_META_DIR: Type.Optional(Type.String()),
  BERTH_META_HOST: Host(),
  BERTH_META_PORT: Port(7400),
  BERTH_NODE_EXPIRY_MS: Millis({ default: DEFAULT_EXPIRY_MS }),
  BERTH_MAX_VCPUS: Type.Number({ minimum: 1, default: DEFAULT_MAX_VCPUS }),
  /** How long a merged or expired segment's id stays known after its retirement, so that a batch sent again commits nothing. */
  BERTH_DEDUP_WINDOW_MS: Millis({ minimum: 0, default: DEFAULT_DEDUP_WINDOW_MS }),
});
export type MetaConfig = Static<typeof MetaConfig>;
