/**
 * `berth preflight [group]`: what would keep the heavy pool from ever serving, checked by a worker
 * (with the platform's credentials) through the controller, each check with its arithmetic. Exits
 * 1 on a finding, so a deployment pipeline can stop on it.
 */
import { Command } from 'commander';
import type { PreflightReport } from '../../core/preflight.js';
import { ask, dataDirOption, openCluster } from '../cluster-client.js';

export function formatPreflight(report: PreflightReport): string {
  const width = Math.max(...report.checks.map((c) => c.area.length));
  const lines = [
    `preflight of ${report.group} on ${report.platform}: ${report.findings === 0 ? 'no findings' : `${report.findings} finding${report.findings === 1 ? '' : 's'}`}`,
  ];
  for (const check of report.checks) {
    lines.push(`${check.ok ? 'ok  ' : 'FAIL'} ${check.area.padEnd(width)}  ${check.summary}`);
    const indent = ' '.repeat(width + 7);
    for (const line of check.detail) lines.push(`${indent}${line}`);
    if (check.fix) lines.push(`${indent}fix: ${check.fix}`);
  }
  return lines.join('\n');
}

export function preflightCommand(): Command {
  return new Command('preflight')
    .description(
      'check that the heavy pool can ever run: requests against allocatable, labels and taints, rights; exits 1 on a finding',
    )
    .argument('[group]', 'the pool’s compute group', 'heavy')
    .option('--json', 'print the report as JSON')
    .addOption(dataDirOption())
    .action(async (group: string, options: { json?: boolean; dataDir: string }) => {
      const report = await ask((await openCluster(options.dataDir)).controller, (c) => c.preflight(group));
      console.log(options.json ? JSON.stringify(report) : formatPreflight(report));
      if (report.findings > 0) process.exitCode = 1;
    });
}
