/** Thrown when a command's arguments are wrong; main prints its message on one line and exits 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}
