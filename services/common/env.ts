/** Reading a service's configuration from its environment, with errors that name the variable. */

export function envString(name: string, fallback?: string): string {
  const value = process.env[name] ?? fallback;
  if (value === undefined || value === '') throw new Error(`${name} must be set`);
  return value;
}

export function envNumber(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < 0) throw new Error(`${name} must be a non-negative number, not "${raw}"`);
  return value;
}

export function envOptionalNumber(name: string): number | undefined {
  return process.env[name] ? envNumber(name, 0) : undefined;
}
