/** `berth placement simulate|explain`: what weighted ownership does, before touching a cluster. */
import { Command, Option } from 'commander';
import { simulatePlacement, type NodeShare, type SimulationResult } from '../../core/placement-simulation.js';
import { count, percent, table } from '../format.js';
import { applyChange, parseNodeList, placementOf } from '../node-list.js';
import { UsageError } from '../usage-error.js';

export function placementCommand(): Command {
  const placement = new Command('placement').description('simulate and explain weighted segment ownership');

  placement
    .command('simulate')
    .description('count each node’s segments before and after a membership change, and what moved')
    .requiredOption('--nodes <list>', 'the members before, as ID:VCPUS,… e.g. A:16,B:16,C:8')
    .option('--add <list>', 'nodes to add, as ID:VCPUS,…')
    .option('--remove <ids>', 'node ids to remove, comma-separated')
    .option('--set <list>', 'new weights for existing nodes, as ID:VCPUS,…')
    .addOption(new Option('--segments <n>', 'how many segment ids to place').default('100000'))
    .option('--json', 'print one JSON object instead of tables')
    .action(
      (options: { nodes: string; add?: string; remove?: string; set?: string; segments: string; json?: boolean }) => {
        const before = parseNodeList(options.nodes, '--nodes');
        placementOf(before, '--nodes');
        const after = applyChange(before, options);
        placementOf(after, 'after the change');
        const result = simulatePlacement({ before, after, segments: parseSegments(options.segments) });
        console.log(options.json ? JSON.stringify(result, null, 2) : describeSimulation(result, options));
      },
    );

  placement
    .command('explain')
    .description('rank the nodes for one segment, owner first, with their scores')
    .argument('<segmentId>', 'the segment to place')
    .requiredOption('--nodes <list>', 'the members, as ID:VCPUS,… e.g. A:16,B:16,C:8')
    .option('--json', 'print the ranking as JSON')
    .action((segmentId: string, options: { nodes: string; json?: boolean }) => {
      const ranking = placementOf(parseNodeList(options.nodes, '--nodes'), '--nodes').ranking(segmentId);
      const rows = ranking.map((r, i) => ({ rank: i + 1, id: r.node.id, weight: r.node.weight, score: r.score }));
      if (options.json) {
        console.log(JSON.stringify({ segment: segmentId, ranking: rows }, null, 2));
        return;
      }
      console.log(`segment ${segmentId}: owner ${rows[0]?.id ?? '(none: no nodes)'}`);
      console.log(
        table([
          ['rank', 'node', 'weight', 'score', 'role'],
          ...rows.map((r) => [
            String(r.rank),
            r.id,
            String(r.weight),
            r.score.toFixed(6),
            r.rank === 1 ? 'owner' : `standby ${r.rank - 1}`,
          ]),
        ]),
      );
    });

  return placement;
}

function parseSegments(text: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1 || n > 100_000_000) {
    throw new UsageError(`--segments: "${text}" must be a whole number from 1 to 100000000`);
  }
  return n;
}

function describeSimulation(result: SimulationResult, change: { add?: string; remove?: string; set?: string }): string {
  const shareTable = (shares: Record<string, NodeShare>, other?: Record<string, NodeShare>) =>
    table([
      ['node', 'vCPU', 'weight share', 'segments', 'segment share', ...(other ? ['change'] : [])],
      ...Object.entries(shares).map(([id, s]) => {
        const weightShare = s.weight / Object.values(shares).reduce((sum, n) => sum + n.weight, 0);
        const delta = s.segments - (other?.[id]?.segments ?? 0);
        return [
          id,
          String(s.weight),
          percent(weightShare),
          count(s.segments),
          percent(s.share),
          ...(other ? [(delta > 0 ? '+' : '') + count(delta)] : []),
        ];
      }),
    ]);
  const described = [
    change.add && `add ${change.add}`,
    change.remove && `remove ${change.remove}`,
    change.set && `set ${change.set}`,
  ].filter(Boolean);
  const lines = [`Before (${count(result.segments)} segments)`, shareTable(result.before), ''];
  lines.push(`After (${described.join(', ') || 'no change'})`, shareTable(result.after, result.before), '');
  lines.push(`Moved: ${count(result.moved.segments)} segments (${percent(result.moved.fraction)})`);
  const pairs = Object.entries(result.moved.byPair).sort(([a], [b]) => a.localeCompare(b));
  if (pairs.length > 0) {
    lines.push(
      table([
        ['from → to', 'segments', 'of moved'],
        ...pairs.map(([pair, n]) => [pair.replace('->', ' → '), count(n), percent(n / result.moved.segments)]),
      ]),
    );
  }
  return lines.join('\n');
}
