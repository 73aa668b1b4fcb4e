#!/usr/bin/env node
// Entry point: runs the TypeScript CLI through tsx so no build step stands between a clone and a server.
import { register } from 'tsx/esm/api';
register();
await import('../src/cli/main.ts');
