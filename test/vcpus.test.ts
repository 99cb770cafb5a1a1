import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { detectVcpus } from '../services/query-node/vcpus.js';

const fixture = (name: string) => fileURLToPath(new URL(`./fixtures/cgroup/${name}`, import.meta.url));

describe('vCPU detection', () => {
  it.each([
    ['v2-limited', { vcpus: 4, source: 'cgroup v2' }],
    ['v2-fractional', { vcpus: 1.5, source: 'cgroup v2' }],
    ['v2-unlimited', { vcpus: 64, source: 'parallelism' }],
    ['v2-tiny', { vcpus: 1, source: 'cgroup v2' }],
    ['v1-limited', { vcpus: 3, source: 'cgroup v1' }],
    ['v1-unlimited', { vcpus: 64, source: 'parallelism' }],
    ['missing', { vcpus: 64, source: 'parallelism' }],
  ])('reads %s as %j on a 64-core machine', async (name, expected) => {
    expect(await detectVcpus({ cgroupRoot: fixture(name), parallelism: 64 })).toEqual(expected);
  });

  it('caps a quota above the machine’s parallelism at that parallelism', async () => {
    expect((await detectVcpus({ cgroupRoot: fixture('v2-limited'), parallelism: 2 })).vcpus).toBe(2);
  });

  it('never declares less than 1', async () => {
    expect((await detectVcpus({ cgroupRoot: fixture('missing'), parallelism: 0 })).vcpus).toBe(1);
  });
});
