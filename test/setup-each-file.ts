// Keep Temporal's worker logs to warnings so that test output stays readable.
import { DefaultLogger, Runtime } from '@temporalio/worker';

Runtime.install({ logger: new DefaultLogger('WARN') });
