/** Parsers for command-line values, each failing with a one-line reason. */
import { UsageError } from './usage-error.js';

export function parsePort(text: string, flag: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new UsageError(`${flag}: "${text}" is not a port number`);
  return n;
}

/** "--vcpus 4,4,2" with an optional "--nodes N": N nodes, the list repeated or cut to fit. */
export function parseVcpuList(text: string, nodes?: string): number[] {
  const list = text.split(',').map((s) => Number(s.trim()));
  if (list.length === 0 || list.some((v) => !Number.isFinite(v) || v <= 0))
    throw new UsageError(`--vcpus: "${text}" must be positive numbers, comma-separated`);
  if (nodes === undefined) return list;
  const n = Number(nodes);
  if (!Number.isInteger(n) || n < 1 || n > 64)
    throw new UsageError(`--nodes: "${nodes}" must be a whole number from 1 to 64`);
  return Array.from({ length: n }, (_, i) => list[i % list.length]!);
}

export function parseCount(text: string, flag: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 0) throw new UsageError(`${flag}: "${text}" must be a whole number`);
  return n;
}

/** "--seaweed-ports master=9333,filer=8888": named ports, each name one of `names`. */
export function parsePortMap<Name extends string>(
  text: string,
  flag: string,
  names: readonly Name[],
): Partial<Record<Name, number>> {
  const ports: Partial<Record<Name, number>> = {};
  for (const pair of text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const [name, port] = pair.split('=');
    if (!names.includes(name as Name) || port === undefined)
      throw new UsageError(`${flag}: "${pair}" must be NAME=PORT with NAME one of ${names.join(', ')}`);
    ports[name as Name] = parsePort(port, `${flag} ${name}`);
  }
  return ports;
}
