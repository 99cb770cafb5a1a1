/**
 * A query node's identity lives in its cache directory: a restart on the same volume keeps the id
 * (and so its segments and warm cache); a fresh volume is a new node.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { NODE_ID } from '../../core/identifiers.js';

export async function loadOrCreateNodeId(cacheDir: string, prefix = 'qn'): Promise<string> {
  const file = path.join(cacheDir, 'node-id');
  try {
    const id = (await readFile(file, 'utf8')).trim();
    if (!NODE_ID.test(id)) throw new Error(`${file} holds "${id}", which is not a node id`);
    return id;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  await mkdir(cacheDir, { recursive: true });
  const id = `${prefix}-${randomBytes(4).toString('hex')}`;
  // 'wx': if two processes race on one fresh volume, the second fails instead of forking identities.
  await writeFile(file, `${id}\n`, { flag: 'wx' });
  return id;
}
