// Placeholder until the owning issue lands its command group.
import type { Command } from 'commander';

export function registerBenchCommands(_program: Command): void {}
