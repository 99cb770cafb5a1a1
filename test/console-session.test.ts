/** The console's sessions and its CSRF gate, without a server: what buys a session and what a request must carry. */
import type { FastifyRequest } from 'fastify';
import { describe, expect, it } from 'vitest';
import { sameOrigin } from '../services/coordinator/console/guard.js';
import {
  SESSION_COOKIE,
  SESSION_TTL_MS,
  sessionCookie,
  sessionOf,
  Sessions,
} from '../services/coordinator/console/session.js';

const request = (headers: Record<string, string>) => ({ headers }) as unknown as FastifyRequest;

describe('console sessions', () => {
  it('gives a session for the token only, and never the token itself', () => {
    const sessions = new Sessions('s3cret-token');
    expect(sessions.login('s3cret-toke')).toBeUndefined();
    expect(sessions.login('s3cret-token ')).toBeUndefined();
    expect(sessions.login('')).toBeUndefined();
    const id = sessions.login('s3cret-token')!;
    expect(id).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(id).not.toContain('s3cret');
    expect(sessions.valid(id)).toBe(true);
    expect(sessions.valid(`${id}x`)).toBe(false);
    expect(sessions.valid(undefined)).toBe(false);
    expect(sessions.login('s3cret-token')).not.toBe(id);
  });

  it('ends a session at logout and once it is older than its lifetime', () => {
    let now = 0;
    const sessions = new Sessions('t', () => now);
    const [a, b] = [sessions.login('t')!, sessions.login('t')!];
    sessions.logout(a);
    expect(sessions.valid(a)).toBe(false);
    now = SESSION_TTL_MS - 1;
    expect(sessions.valid(b)).toBe(true);
    now = SESSION_TTL_MS;
    expect(sessions.valid(b)).toBe(false);
  });

  it('keeps at most a thousand sessions, dropping the oldest', () => {
    const sessions = new Sessions('t');
    const first = sessions.login('t')!;
    const ids = Array.from({ length: 1_000 }, () => sessions.login('t')!);
    expect(sessions.valid(first)).toBe(false);
    expect(ids.every((id) => sessions.valid(id))).toBe(true);
  });

  it('reads its cookie among others, and sets it HttpOnly and SameSite=Strict under /console', () => {
    expect(sessionOf(`a=1; ${SESSION_COOKIE}=abc=; b=2`)).toBe('abc=');
    expect(sessionOf('a=1')).toBeUndefined();
    expect(sessionOf(undefined)).toBeUndefined();
    expect(sessionCookie('abc', false)).toBe(
      `${SESSION_COOKIE}=abc; Path=/console; HttpOnly; SameSite=Strict; Max-Age=43200`,
    );
    expect(sessionCookie('', true, 0)).toBe(
      `${SESSION_COOKIE}=; Path=/console; HttpOnly; SameSite=Strict; Max-Age=0; Secure`,
    );
  });

  it('takes a change only from a page of the same origin', () => {
    expect(sameOrigin(request({ host: '127.0.0.1:7401', origin: 'http://127.0.0.1:7401' }))).toBe(true);
    expect(sameOrigin(request({ host: '127.0.0.1:7401', origin: 'http://127.0.0.1:7402' }))).toBe(false);
    expect(sameOrigin(request({ host: '127.0.0.1:7401', origin: 'http://evil.example' }))).toBe(false);
    expect(sameOrigin(request({ host: '127.0.0.1:7401', origin: 'null' }))).toBe(false);
    expect(sameOrigin(request({ host: '127.0.0.1:7401' }))).toBe(false);
  });
});
