/**
 * The local driver: the embedded cluster's stand-in for the operator. Setting replicas starts or
 * stops query-node processes for the group on this machine, after a boot delay that imitates node
 * provisioning; pods are the processes running. Like a real platform, setReplicas only records the
 * target and returns: the backends arrive later, and readiness must find them. Why they have not
 * arrived is its own record of what failed: a start that threw, a process that exited.
 */
import { preflightReport, type PreflightCheck, type PreflightReport } from '../../core/preflight.js';
import type { ComputePlatform } from './compute-platform.js';

export interface LocalBackend {
  stop(): Promise<void>;
  /** Resolves when the process has exited, for whatever reason (with its exit code, when it has one). */
  exited: Promise<unknown>;
}

export interface LocalPlatformOptions {
  /** Starts one backend process of the group. */
  startBackend(group: string, index: number): Promise<LocalBackend>;
  /** How long a new backend takes to be provisioned before its process starts. @default 0 */
  bootDelayMs?: number;
  /** The checks this machine can make before a launch (the query-node script is built, its directory writable...). */
  preflight?: (group: string) => Promise<PreflightCheck[]>;
  onError?: (error: Error) => void;
}

interface GroupState {
  target: number;
  backends: { backend: LocalBackend; alive: boolean }[];
  started: number;
  reconciling?: Promise<void>;
  /** When the current boot delay ends, while backends are being provisioned. */
  bootingUntil?: number;
  /** The last thing that went wrong: a start that failed, a backend that exited on its own. */
  trouble?: string;
  /** The target the current pass last converged on. */
  seen?: number;
}

export class LocalPlatform implements ComputePlatform {
  readonly kind = 'local';
  private readonly groups = new Map<string, GroupState>();
  private closed = false;

  constructor(private readonly options: LocalPlatformOptions) {}

  private state(group: string): GroupState {
    let state = this.groups.get(group);
    if (!state) this.groups.set(group, (state = { target: 0, backends: [], started: 0 }));
    return state;
  }

  async setReplicas(group: string, replicas: number): Promise<{ changed: boolean; previous: number }> {
    if (this.closed) throw new Error('the local platform is closed');
    const state = this.state(group);
    const previous = state.target;
    if (previous === replicas) return { changed: false, previous };
    state.target = replicas;
    this.reconcile(group);
    return { changed: true, previous };
  }

  async replicas(group: string): Promise<number> {
    return this.state(group).target;
  }

  async runningPods(group: string): Promise<number> {
    return this.state(group).backends.filter((b) => b.alive).length;
  }

  async why(group: string): Promise<string | undefined> {
    const state = this.state(group);
    const alive = state.backends.filter((b) => b.alive).length;
    if (alive >= state.target) return undefined;
    if (state.trouble) return state.trouble;
    if (state.bootingUntil !== undefined)
      return `provisioning ${state.target - alive} backend process${state.target - alive === 1 ? '' : 'es'} (boot delay ${this.options.bootDelayMs ?? 0} ms)`;
    return undefined;
  }

  async preflight(group: string): Promise<PreflightReport> {
    return preflightReport(group, 'local', (await this.options.preflight?.(group)) ?? []);
  }

  /** Stops every backend of every group. */
  async close(): Promise<void> {
    this.closed = true;
    for (const state of this.groups.values()) state.target = 0;
    await Promise.all(
      [...this.groups.values()].map(async (state) => {
        await state.reconciling; // a start under way finishes, then sees the zero target and stops what it started
        await Promise.all(state.backends.map((b) => b.backend.stop()));
      }),
    );
  }

  private reconcile(group: string): void {
    const state = this.state(group);
    // Cleared in a callback, never inline: a pass with nothing to do ends before its own promise
    // is assigned, and clearing it inline would leave that settled promise in place for good.
    state.reconciling ??= this.converge(group, state).finally(() => {
      state.reconciling = undefined;
      // A target set after the pass last looked, while it was ending, gets a pass of its own.
      if (state.seen !== state.target && !this.closed) this.reconcile(group);
    });
  }

  /** Starts or stops the group's backends until they are as many as its target. */
  private async converge(group: string, state: GroupState): Promise<void> {
    try {
      for (;;) {
        state.seen = state.target;
        state.backends = state.backends.filter((b) => b.alive);
        if (state.backends.length < state.target) {
          // Nodes are provisioned side by side, as a cloud provisions them.
          state.bootingUntil = Date.now() + (this.options.bootDelayMs ?? 0);
          await new Promise((resolve) => setTimeout(resolve, this.options.bootDelayMs ?? 0));
          const missing = state.target - state.backends.length;
          const started = await Promise.all(
            Array.from({ length: Math.max(0, missing) }, async () => {
              const index = state.started++;
              try {
                return { index, backend: await this.options.startBackend(group, index) };
              } catch (error) {
                state.trouble = `backend ${group}-${index} failed to start: ${(error as Error).message.split('\n')[0]}`;
                throw error;
              }
            }),
          ).finally(() => (state.bootingUntil = undefined));
          state.trouble = undefined;
          for (const { index, backend } of started) {
            const entry = { backend, alive: true };
            void backend.exited.then((code) => {
              entry.alive = false;
              if (!this.closed && state.backends.includes(entry))
                state.trouble = `backend ${group}-${index} exited on its own${typeof code === 'number' ? ` with code ${code}` : ''}`;
            });
            state.backends.push(entry);
          }
        } else if (state.backends.length > state.target) {
          // Removed from the list first: a stop asked for is not trouble.
          await state.backends.pop()!.backend.stop();
        } else return;
      }
    } catch (error) {
      this.options.onError?.(error as Error);
    }
  }
}
