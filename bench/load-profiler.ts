/**
 * Preloaded into the cluster's coordinator and query nodes by bench/load --profile (NODE_OPTIONS
 * refuses --cpu-prof, so this does what it does): a CPU profile from start to exit, written as
 * `<service>-<pid>.cpuprofile` into BERTH_PROFILE_DIR.
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import path from 'node:path';

const dir = process.env.BERTH_PROFILE_DIR;
const service = /services\/(coordinator|query-node)\/main\.js$/.exec(process.argv[1] ?? '')?.[1];
if (dir && service) {
  const session = new Session();
  session.connect();
  session.post('Profiler.enable');
  session.post('Profiler.start');
  // Same-thread inspector calls answer synchronously, so this completes inside 'exit'.
  process.once('exit', () => {
    session.post('Profiler.stop', (error, result) => {
      if (!error) writeFileSync(path.join(dir, `${service}-${process.pid}.cpuprofile`), JSON.stringify(result.profile));
    });
  });
}
