/** The final-stage figures a service shows on /metrics, the same on the coordinator and on a heavy backend. */
import { Counter, type Registry } from 'prom-client';

/** `berth_exchange_rows_total`: rows the scan stage has sent the process's final stages. */
export function exchangeRowsCounter(registry: Registry, read: () => number): void {
  let reported = 0;
  new Counter({
    name: 'berth_exchange_rows_total',
    help: 'Rows the scan stage sent to final stages run in this process',
    registers: [registry],
    collect() {
      const now = read();
      this.inc(now - reported);
      reported = now;
    },
  });
}
