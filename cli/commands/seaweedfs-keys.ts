/**
 * `berth seaweedfs-keys DIR`: writes the security.toml and certificates that close every SeaweedFS
 * port but the S3 gateway (cli/embedded/seaweed-security.ts), for a SeaweedFS that Berth does not
 * start itself: docker-compose's one-shot service writes them into the volume SeaweedFS reads
 * /etc/seaweedfs from. Keys already there are kept, so a restart never splits the servers' keys.
 */
import { access } from 'node:fs/promises';
import path from 'node:path';
import { Command } from 'commander';
import { writeSeaweedSecurity } from '../embedded/seaweed-security.js';

export function seaweedfsKeysCommand(): Command {
  return new Command('seaweedfs-keys')
    .description("write SeaweedFS's security.toml and certificates into a directory (kept if there)")
    .argument('<dir>', 'where SeaweedFS reads security.toml from, e.g. /etc/seaweedfs')
    .action(async (dir: string) => {
      const file = path.join(path.resolve(dir), 'security.toml');
      const present = await access(file).then(
        () => true,
        () => false,
      );
      if (present) console.log(`${file}: kept`);
      else console.log(`${await writeSeaweedSecurity(path.resolve(dir))}: written`);
    });
}
