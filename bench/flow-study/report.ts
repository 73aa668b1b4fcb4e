// Regenerates report.md of a flow-study folder from its CSVs (the study writes it too).
//
//   node --import tsx bench/flow-study/report.ts <study dir>
import { writeReport } from '../../src/harness/flow-study/report.ts';

const dir = process.argv[2];
if (dir === undefined) {
  process.stderr.write('usage: node --import tsx bench/flow-study/report.ts <study dir>\n');
  process.exit(1);
}
await writeReport(dir);
