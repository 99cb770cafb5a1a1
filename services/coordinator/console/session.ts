/**
 * The console's sessions: the cluster token, given once on the login page, buys a random session
 * id kept in an HttpOnly, SameSite=Strict cookie, so the token itself never sits in the browser
 * (no URL, no localStorage) and no other site's page can send requests that carry it.
 */
import { randomBytes } from 'node:crypto';
import { sameText } from '../../common/auth.js';

export const SESSION_COOKIE = 'berth_console';
/** How long a session lasts from its login. */
export const SESSION_TTL_MS = 12 * 3_600_000;
/** Sessions kept at once: past it, the oldest go first (a login flood cannot grow memory). */
const MAX_SESSIONS = 1_000;

export class Sessions {
  private readonly expiry = new Map<string, number>();

  constructor(
    private readonly token: string,
    private readonly now: () => number = Date.now,
  ) {}

  /** A new session's id for the right token, undefined for any other. */
  login(given: string): string | undefined {
    if (!sameText(given, this.token)) return undefined;
    const id = randomBytes(32).toString('base64url');
    this.expiry.set(id, this.now() + SESSION_TTL_MS);
    // Maps keep insertion order: the first keys are the oldest sessions.
    for (const old of this.expiry.keys()) {
      if (this.expiry.size <= MAX_SESSIONS) break;
      this.expiry.delete(old);
    }
    return id;
  }

  valid(id: string | undefined): boolean {
    if (!id) return false;
    const until = this.expiry.get(id);
    if (until === undefined) return false;
    if (until > this.now()) return true;
    this.expiry.delete(id);
    return false;
  }

  logout(id: string | undefined): void {
    if (id) this.expiry.delete(id);
  }
}

/** The session id a Cookie header carries, if any. */
export function sessionOf(cookieHeader: string | undefined): string | undefined {
  for (const part of (cookieHeader ?? '').split(';')) {
    const [name, ...value] = part.trim().split('=');
    if (name === SESSION_COOKIE) return value.join('=');
  }
  return undefined;
}

/**
 * The Set-Cookie value for a session (an empty id with max-age 0 ends it); `Secure` when the page
 * came over TLS (plain http on loopback, as `berth up` serves it, would never send it back).
 */
export const sessionCookie = (id: string, secure: boolean, maxAgeMs = SESSION_TTL_MS) =>
  `${SESSION_COOKIE}=${id}; Path=/console; HttpOnly; SameSite=Strict; Max-Age=${Math.floor(maxAgeMs / 1000)}${secure ? '; Secure' : ''}`;
