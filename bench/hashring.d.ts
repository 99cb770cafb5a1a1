// The few parts of the `hashring` package (the baseline) that the benchmark uses.
declare module 'hashring' {
  export default class HashRing {
    constructor(servers: Record<string, { weight: number }>, algorithm?: string, options?: Record<string, unknown>);
    get(key: string): string | undefined;
  }
}
