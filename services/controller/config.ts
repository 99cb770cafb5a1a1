/** The controller's configuration: the variables it reads, their defaults and their ranges (see docs/configuration.md). */
import { Type, type Static } from 'typebox';
import { Host, Port, Settings } from '../common/config.js';

export const ControllerConfig = Type.Object({
  ...Settings.common,
  ...Settings.temporal,
  ...Settings.heavyPool,
  ...Settings.servingScaler,
  BERTH_CONTROLLER_HOST: Host(),
  BERTH_CONTROLLER_PORT: Port(7402),
});
export type ControllerConfig = Static<typeof ControllerConfig>;
