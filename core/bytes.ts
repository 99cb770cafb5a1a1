/** Byte counts as people and Kubernetes write them: binary units (Ki, Mi, Gi, Ti), two decimals at most. */
export function formatBytes(bytes: number): string {
  for (const [unit, size] of [
    ['Ti', 1024 ** 4],
    ['Gi', 1024 ** 3],
    ['Mi', 1024 ** 2],
    ['Ki', 1024],
  ] as const) {
    if (bytes >= size) return `${Number((bytes / size).toFixed(2))}${unit}`;
  }
  return `${bytes}`;
}
