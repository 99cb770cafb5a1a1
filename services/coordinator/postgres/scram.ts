/**
 * SCRAM-SHA-256 (RFC 5802, RFC 7677) as PostgreSQL's servers speak it, with the cluster's token
 * as the one password: the token never crosses the wire, and the client checks the server knew it.
 * The salted password is derived once per server; each exchange has its own nonce.
 */
import { createHash, createHmac, pbkdf2Sync, randomBytes, timingSafeEqual } from 'node:crypto';
import { ProtocolViolation } from './frontend-messages.js';

export const SCRAM_SHA_256 = 'SCRAM-SHA-256';
const ITERATIONS = 4096;

const hmac = (key: Buffer, text: string) => createHmac('sha256', key).update(text).digest();
const sha256 = (data: Buffer) => createHash('sha256').update(data).digest();

/** What the server keeps of the password: never the password itself. */
export interface ScramSecret {
  salt: Buffer;
  storedKey: Buffer;
  serverKey: Buffer;
}

export function scramSecret(password: string): ScramSecret {
  const salt = randomBytes(16);
  const salted = pbkdf2Sync(password.normalize('NFKC'), salt, ITERATIONS, 32, 'sha256');
  return { salt, storedKey: sha256(hmac(salted, 'Client Key')), serverKey: hmac(salted, 'Server Key') };
}

/** Reads a SASLInitialResponse: the mechanism the client chose and its first message. */
export function saslInitialResponse(data: Buffer): { mechanism: string; message: string } {
  const end = data.indexOf(0);
  if (end < 0 || end + 5 > data.length) throw new ProtocolViolation('a malformed SASLInitialResponse');
  const length = data.readInt32BE(end + 1);
  const message = length < 0 ? '' : data.subarray(end + 5, end + 5 + length).toString('utf8');
  return { mechanism: data.toString('utf8', 0, end), message };
}

const attributes = (text: string) =>
  new Map(text.split(',').map((part) => [part.slice(0, 1), part.slice(2)] as [string, string]));

/** One client's exchange: the server's first message, then the check of the client's proof. */
export class ScramExchange {
  private clientFirstBare = '';
  private serverFirst = '';
  private nonce = '';

  constructor(private readonly secret: ScramSecret) {}

  /** The client's first message (`n,,n=,r=NONCE`) in, the server's first message out. */
  first(clientFirst: string): string {
    const match = /^([ny]|p=[^,]*),[^,]*,(.*)$/.exec(clientFirst);
    if (!match || match[1]!.startsWith('p')) throw new ProtocolViolation('SCRAM channel binding is not offered here');
    this.clientFirstBare = match[2]!;
    const clientNonce = attributes(this.clientFirstBare).get('r');
    if (!clientNonce) throw new ProtocolViolation('a SCRAM first message without a nonce');
    this.nonce = clientNonce + randomBytes(18).toString('base64');
    this.serverFirst = `r=${this.nonce},s=${this.secret.salt.toString('base64')},i=${ITERATIONS}`;
    return this.serverFirst;
  }

  /** The client's final message in; the server's final message out when its proof holds, else undefined. */
  final(clientFinal: string): string | undefined {
    const parts = attributes(clientFinal);
    const proof = Buffer.from(parts.get('p') ?? '', 'base64');
    if (parts.get('r') !== this.nonce || proof.length !== 32) return undefined;
    const withoutProof = clientFinal.slice(0, clientFinal.lastIndexOf(',p='));
    const authMessage = `${this.clientFirstBare},${this.serverFirst},${withoutProof}`;
    const signature = hmac(this.secret.storedKey, authMessage);
    const clientKey = Buffer.from(proof.map((byte, i) => byte ^ signature[i]!));
    if (!timingSafeEqual(sha256(clientKey), this.secret.storedKey)) return undefined;
    return `v=${hmac(this.secret.serverKey, authMessage).toString('base64')}`;
  }
}
