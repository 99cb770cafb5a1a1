/** The `berth` command. */
import { Command } from 'commander';
import { attachCommand } from './commands/attach.js';
import { costCommand } from './commands/cost.js';
import { doctorCommand } from './commands/doctor.js';
import { ingestCommand } from './commands/ingest.js';
import { deleteCommand } from './commands/delete.js';
import { mergeCommand } from './commands/merge.js';
import { nodesCommand } from './commands/nodes.js';
import { placementCommand } from './commands/placement.js';
import { poolCommand } from './commands/pool.js';
import { preflightCommand } from './commands/preflight.js';
import { queryCommand } from './commands/query.js';
import { seaweedfsKeysCommand } from './commands/seaweedfs-keys.js';
import { servingCommand } from './commands/serving.js';
import { setupCommand } from './commands/setup.js';
import { tableCommand } from './commands/table.js';
import { upCommand } from './commands/up.js';
import { UsageError } from './usage-error.js';

const program = new Command('berth')
  .description('Berth: an elastic query tier for S3-backed segment data')
  .addCommand(upCommand())
  .addCommand(ingestCommand())
  .addCommand(queryCommand())
  .addCommand(nodesCommand())
  .addCommand(mergeCommand())
  .addCommand(tableCommand())
  .addCommand(attachCommand())
  .addCommand(deleteCommand())
  .addCommand(poolCommand())
  .addCommand(preflightCommand())
  .addCommand(costCommand())
  .addCommand(doctorCommand())
  .addCommand(servingCommand())
  .addCommand(placementCommand())
  .addCommand(setupCommand())
  .addCommand(seaweedfsKeysCommand());

try {
  await program.parseAsync();
} catch (error) {
  if (!(error instanceof UsageError)) throw error;
  console.error(`berth: ${error.message}`);
  process.exit(2);
}
