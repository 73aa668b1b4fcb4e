// `headroom report DIR`: regenerate a ladder study's tables, figures and HTML report from its
// committed data (src/harness/study-report/write.ts). The heavy modules load inside the action.
import type { Command } from 'commander';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { UserError } from '../user-error.ts';

export function registerReportCommand(program: Command): void {
  program
    .command('report <dir>')
    .description("regenerate a ladder study's tables, figures (SVG, PNG) and HTML report into DIR/report/ from its data")
    .action(async (dir: string) => {
      if (!existsSync(path.join(dir, 'ladder.json'))) throw new UserError(`report: expected a ladder study (ladder.json) in ${dir}`);
      const { writeStudyReport } = await import('../../harness/study-report/write.ts');
      // The study is named as given, relative to the working directory: no machine path in the output.
      const name = path.isAbsolute(dir) ? path.relative(process.cwd(), dir) || '.' : path.normalize(dir);
      const r = await writeStudyReport(dir, name);
      process.stderr.write(`report: ${r.tables.length} tables, ${r.figures.length} figures in ${path.join(dir, 'report')} (open report.html)\n`);
    });
}
