// Placeholder until the owning issue lands its command group.
import type { Command } from 'commander';

export function registerCalibrateCommand(_program: Command): void {}
