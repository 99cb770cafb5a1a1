/**
 * Where a segment's Parquet object lies, and the client that reads it: Berth's own bucket at
 * segmentObjectKey, or, for a segment attached where it was (AttachedObject), another bucket read
 * with the credentials of a named profile. An attached object is read only while S3 answers with
 * the ETag it had when attached: every GET sends If-Match, and a changed object is refused
 * (`object_changed`) rather than read as something else.
 */
import { GetObjectCommand, type GetObjectCommandOutput, type S3Client } from '@aws-sdk/client-s3';
import { segmentObjectKey } from '../../core/identifiers.js';
import type { AttachedObject } from '../meta/api.js';
import { conflict, DomainError } from './errors.js';
import { createS3Client, type S3Config, type S3Profiles } from './s3-client.js';

/** What locates a segment's object: its table and id, and where it lies when attached. */
export interface SegmentRef {
  table: string;
  id: string;
  object?: AttachedObject;
}

/** One GET's target: the client, bucket and key, and the ETag an attached object must still have. */
export interface ObjectLocation {
  s3: S3Client;
  bucket: string;
  key: string;
  ifMatch?: string;
}

export class SegmentObjects {
  private readonly clients = new Map<string, S3Client>();

  private readonly profiles: S3Profiles;

  constructor(
    /** Berth's own bucket and its client (also the client of an attached object without a profile). */
    readonly own: { s3: S3Client; bucket: string; config?: S3Config },
    profiles?: S3Profiles,
  ) {
    this.profiles = profiles ?? own.config?.profiles ?? {};
  }

  locate(segment: SegmentRef): ObjectLocation {
    const { object } = segment;
    if (!object) return { s3: this.own.s3, bucket: this.own.bucket, key: segmentObjectKey(segment.table, segment.id) };
    return { s3: this.client(object.profile), bucket: object.bucket, key: object.key, ifMatch: object.etag };
  }

  /** The client of a profile (Berth's own for none); a profile this process does not have is a 4xx. */
  client(profile: string | undefined): S3Client {
    if (profile === undefined) return this.own.s3;
    let client = this.clients.get(profile);
    if (!client) {
      const settings = this.profiles[profile];
      if (!settings)
        throw new DomainError(
          'invalid',
          'unknown_profile',
          `S3 profile "${profile}" is not in this process's BERTH_S3_PROFILES_FILE`,
        );
      const { accessKeyId, secretAccessKey, ...rest } = settings;
      client = createS3Client({
        ...rest,
        timeoutMs: this.own.config?.timeoutMs,
        credentials: accessKeyId && secretAccessKey ? { accessKeyId, secretAccessKey } : undefined,
      });
      this.clients.set(profile, client);
    }
    return client;
  }

  /** GETs a segment's object, or a range of it; an attached one only while it is unchanged. */
  async get(segment: SegmentRef, range?: string, signal?: AbortSignal): Promise<GetObjectCommandOutput> {
    const at = this.locate(segment);
    try {
      return await at.s3.send(
        new GetObjectCommand({ Bucket: at.bucket, Key: at.key, IfMatch: at.ifMatch, Range: range }),
        signal ? { abortSignal: signal } : {},
      );
    } catch (error) {
      if (at.ifMatch && (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 412)
        throw objectChanged(segment, at);
      throw error;
    }
  }

  close(): void {
    for (const client of this.clients.values()) client.destroy();
  }
}

/** Thrown when an attached object's ETag is no longer the one it was attached with. */
export const objectChanged = (segment: SegmentRef, at: ObjectLocation) =>
  conflict(
    'object_changed',
    `s3://${at.bucket}/${at.key}, attached to ${segment.table} as segment ${segment.id}, has changed since it was attached (ETag no longer ${at.ifMatch}): it is not read; attach it again to take the new object`,
  );
