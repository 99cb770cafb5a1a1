/** The controller's configuration: the variables it reads, their defaults and their ranges (see README). */
import { Type, type Static } from 'typebox';
import { CommonSettings, HeavyPoolSettings, Host, Port, ServingScalerSettings, TemporalSettings } from '../common/config.js';

export const ControllerConfig = Type.Object({
  ...CommonSettings,
  ...TemporalSettings,
  ...HeavyPoolSettings,
  ...ServingScalerSettings,
  BERTH_CONTROLLER_HOST: Host(),
  BERTH_CONTROLLER_PORT: Port(7402),
});
export type ControllerConfig = Static<typeof ControllerConfig>;
