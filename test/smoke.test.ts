import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { GetObjectCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createS3Client } from '../services/common/s3-client.js';

const createSmokeActivities = (s3: S3Client, bucket: string) => ({
  async storeGreeting(key: string, text: string): Promise<string> {
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: text }));
    return key;
  },
});
export type SmokeActivities = ReturnType<typeof createSmokeActivities>;

describe('the shared test servers', () => {
  const bucket = inject('s3Bucket');
  let s3: S3Client;
  beforeAll(() => {
    s3 = createS3Client({ endpoint: inject('s3Endpoint'), credentials: inject('s3Credentials') });
  });
  afterAll(() => s3.destroy());

  it('round-trips an object through the S3 API, including a ranged read', async () => {
    const key = `smoke/${randomUUID()}.txt`;
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: 'segment bytes' }));
    const whole = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
    expect(await whole.Body!.transformToString()).toBe('segment bytes');
    const tail = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key, Range: 'bytes=8-12' }));
    expect(await tail.Body!.transformToString()).toBe('bytes');
  });

  it('runs a real workflow whose real activity writes to the S3 API', async () => {
    const address = inject('temporalAddress');
    const taskQueue = `smoke-${randomUUID()}`;
    const nativeConnection = await NativeConnection.connect({ address });
    const connection = await Connection.connect({ address });
    try {
      const worker = await Worker.create({
        connection: nativeConnection,
        taskQueue,
        workflowsPath: fileURLToPath(new URL('./fixtures/smoke-workflows.ts', import.meta.url)),
        activities: createSmokeActivities(s3, bucket),
      });
      const client = new Client({ connection });
      const key = `smoke/${randomUUID()}.txt`;
      const result = await worker.runUntil(
        client.workflow.execute('greetingWorkflow', {
          taskQueue,
          workflowId: `smoke-${randomUUID()}`,
          args: [{ name: 'berth', key }],
        }),
      );
      expect(result).toBe(key);
      const stored = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
      expect(await stored.Body!.transformToString()).toBe('hello, berth');
    } finally {
      await connection.close();
      await nativeConnection.close();
    }
  });
});
