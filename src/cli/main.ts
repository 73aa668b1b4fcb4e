// The `headroom` command line: serve, model, calibrate, bench, admission. Each group registers itself from its own file.
import { Command } from 'commander';
import { registerServeCommand } from './commands/serve.ts';
import { registerModelCommands } from './commands/model.ts';
import { registerCalibrateCommand } from './commands/calibrate.ts';
import { registerBenchCommands } from './commands/bench.ts';
import { registerAdmissionCommands } from './commands/admission.ts';

const program = new Command('headroom').description('An SLO-aware LLM inference gateway').showHelpAfterError();
registerServeCommand(program);
registerModelCommands(program);
registerCalibrateCommand(program);
registerBenchCommands(program);
registerAdmissionCommands(program);
await program.parseAsync(process.argv);
