#!/usr/bin/env node
// Entry point. In a checkout it runs the TypeScript CLI through tsx, so no build step stands between
// a clone and a server; where src/ holds the compiled JavaScript instead (the image: `npm run build`,
// tsconfig.build.json), it runs that, without tsx's start-up cost.
import { existsSync } from 'node:fs';

const compiled = new URL('../src/cli/main.js', import.meta.url);
if (existsSync(compiled)) await import(compiled.href);
else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('../src/cli/main.ts');
}
