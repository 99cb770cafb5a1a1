/**
 * Reports this coordinator's serving queue to the serving autoscaler (opt-in): absolute counts of
 * queries running and waiting, every `everyMs` while there are any and once when they are gone, so
 * an idle coordinator costs the workflow nothing. A report that fails is sent again at the next tick.
 */
export interface ServingLoad {
  running: number;
  waiting: number;
}

export interface ServingLoadReporterOptions {
  read: () => ServingLoad;
  send: (load: ServingLoad) => Promise<void>;
  /** @default 5000 */
  everyMs?: number;
  onError?: (error: Error) => void;
}

export class ServingLoadReporter {
  private timer: NodeJS.Timeout | undefined;
  private sending: Promise<void> | undefined;
  /** Whether the last report that arrived said there was load. */
  private reportedBusy = false;

  constructor(private readonly options: ServingLoadReporterOptions) {}

  start(): void {
    this.timer = setInterval(() => void this.tick(), this.options.everyMs ?? 5_000);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** One report, if there is load or the last report said there was. */
  tick(): Promise<void> {
    this.sending ??= (async () => {
      const load = this.options.read();
      const busy = load.running + load.waiting > 0;
      if (!busy && !this.reportedBusy) return;
      try {
        await this.options.send(load);
        this.reportedBusy = busy;
      } catch (error) {
        this.options.onError?.(error as Error);
      }
    })().finally(() => (this.sending = undefined));
    return this.sending;
  }
}
