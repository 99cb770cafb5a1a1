/** A database of its own on the run's PostgreSQL cluster (see global-setup.ts), for one test. */
import { inject } from 'vitest';
import { createDatabase } from '../../cli/embedded/postgres-server.js';

export const createTestDatabase = (): Promise<string> => createDatabase(inject('postgresUrl'));
