/** The meta service's configuration: the variables it reads, their defaults and their ranges (see README). */
import { Type, type Static } from 'typebox';
import { Host, Millis, Port, Settings } from '../common/config.js';

export const MetaConfig = Type.Object({
  ...Settings.common,
  ...Settings.heartbeat,
  /** postgres://… for any number of replicas; unset: SQLite in BERTH_META_DIR. */
  BERTH_META_DATABASE: Type.Optional(Type.String()),
  /** @default DATA/meta */
  BERTH_META_DIR: Type.Optional(Type.String()),
  BERTH_META_HOST: Host(),
  BERTH_META_PORT: Port(7400),
  BERTH_NODE_EXPIRY_MS: Millis({ default: 30_000 }),
  BERTH_MAX_VCPUS: Type.Number({ minimum: 1, default: 1024 }),
});
export type MetaConfig = Static<typeof MetaConfig>;
