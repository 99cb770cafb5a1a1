import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Endpoints } from '../cli/commands/up.js';
import { createS3Client, S3RVER_CREDENTIALS } from '../services/common/s3-client.js';
import { startBerth } from './helpers/berth-cli.js';

const FREE_PORTS = ['--temporal-port', '0', '--temporal-ui-port', '0', '--s3-port', '0'];

async function runUntilReady(dataDir: string) {
  const up = startBerth('up', '--data-dir', dataDir, ...FREE_PORTS);
  await up.waitFor(/Ctrl-C stops everything/);
  const endpoints = JSON.parse(await readFile(path.join(dataDir, 'endpoints.json'), 'utf8')) as Endpoints;
  return { up, endpoints };
}

describe('berth up', () => {
  let dataDir: string;
  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'berth-up-'));
  });
  afterAll(() => rm(dataDir, { recursive: true, force: true }));

  it('runs Temporal with its Web UI and the S3 API, says where, stops on Ctrl-C and resumes its data', async () => {
    const first = await runUntilReady(dataDir);
    expect(first.up.output()).toContain(first.endpoints.temporal);
    expect(first.endpoints.bucket).toBe('berth');

    const connection = await Connection.connect({ address: first.endpoints.temporal });
    const { namespaceInfo } = await connection.workflowService.describeNamespace({ namespace: first.endpoints.temporalNamespace });
    expect(namespaceInfo?.name).toBe('default');
    await connection.close();
    const ui = await fetch(first.endpoints.temporalUi);
    expect(ui.status).toBe(200);

    const s3 = createS3Client({ endpoint: first.endpoints.s3, credentials: S3RVER_CREDENTIALS });
    await s3.send(new PutObjectCommand({ Bucket: 'berth', Key: 'kept.txt', Body: 'still here' }));
    first.up.child.kill('SIGINT');
    expect(await first.up.exited).toBe(0);
    expect(first.up.output()).toContain('stopped');

    const second = await runUntilReady(dataDir);
    const s3Again = createS3Client({ endpoint: second.endpoints.s3, credentials: S3RVER_CREDENTIALS });
    const kept = await s3Again.send(new GetObjectCommand({ Bucket: 'berth', Key: 'kept.txt' }));
    expect(await kept.Body!.transformToString()).toBe('still here');
    second.up.child.kill('SIGINT');
    expect(await second.up.exited).toBe(0);
    s3.destroy();
    s3Again.destroy();
  });
});
