/** `berth attach`'s arguments: what each s3:// URL names in its bucket. */
import { describe, expect, it } from 'vitest';
import { parseS3Url } from '../cli/commands/attach.js';

describe('berth attach URLs', () => {
  it('name a prefix, a glob or one key', () => {
    expect(parseS3Url('s3://logs/2026/')).toEqual({ bucket: 'logs', prefix: '2026/' });
    expect(parseS3Url('s3://logs')).toEqual({ bucket: 'logs', prefix: '' });
    expect(parseS3Url('s3://logs/2026/*/part-?.parquet')).toEqual({ bucket: 'logs', glob: '2026/*/part-?.parquet' });
    expect(parseS3Url('s3://logs/2026/{a,b}.parquet')).toEqual({ bucket: 'logs', glob: '2026/{a,b}.parquet' });
    expect(parseS3Url('s3://logs/2026/a.parquet')).toEqual({ bucket: 'logs', keys: ['2026/a.parquet'] });
  });

  it('refuse anything that is not an s3:// URL', () => {
    expect(() => parseS3Url('https://logs/a.parquet')).toThrow(/is not an s3:\/\/BUCKET\/KEY URL/);
    expect(() => parseS3Url('s3:///a.parquet')).toThrow(/is not an s3:\/\/BUCKET\/KEY URL/);
  });
});
