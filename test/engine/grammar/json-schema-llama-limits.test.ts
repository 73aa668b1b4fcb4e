// The converter's count limit sits inside what llama.cpp's grammar parser expands: grammars with
// every count at MAX_REPEAT_COUNT parse (the parser refuses a repetition of 2,000, and silently
// drops a larger maximum), checked by the real parser through the tiny model.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { openTinyRunner } from '../runner/llama/fixture.ts';
import type { LlamaRunner } from '../../../src/engine/runner/llama/llama-runner.ts';
import { jsonSchemaToGbnf, MAX_REPEAT_COUNT } from '../../../src/engine/grammar/json-schema-gbnf.ts';

let runner: LlamaRunner;
before(async () => {
  runner = await openTinyRunner({ threads: 1, contextTokens: 512, maxSequences: 1 });
});
after(async () => {
  await runner.close();
});

test('grammars with counts at the limit parse in llama.cpp', () => {
  const check = runner.tokenizer.checkGrammar;
  const N = MAX_REPEAT_COUNT;
  const schemas = [
    { type: 'string', minLength: N, maxLength: N },
    { type: 'string', maxLength: N },
    { type: 'array', items: { type: 'string', maxLength: N }, maxItems: N },
    { type: 'array', items: { type: 'array', items: { type: 'integer' }, minItems: N, maxItems: N }, minItems: N },
    { type: 'object', properties: { a: { type: 'array', items: { type: 'boolean' }, maxItems: N }, b: { type: 'string', minLength: N } } },
  ];
  for (const s of schemas) assert.ok(check(jsonSchemaToGbnf(s)), JSON.stringify(s));
  // What the limit keeps out: the parser refuses 2,000 repetitions (the old limit of 10,000 let minLength 10000 reach it).
  assert.equal(check('root ::= [a]{2000}'), false);
});
