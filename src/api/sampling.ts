// A request's sampling fields → the engine's SamplingParams, with the checks the schema cannot
// make alone: token ids of logit_bias inside the vocabulary, top_logprobs only beside logprobs,
// response_format turned into a grammar that the model's grammar sampler has accepted. Every
// refusal is a 400 naming the field, before anything reaches the engine.
//
// Defaults stay absent (SamplingParams' optional fields), so a request that uses none of these
// fields builds the same sampler as before they existed.

import { ApiError } from './errors.ts';
import type { ChatCompletionBody, CompletionBody } from './schemas.ts';
import type { LogitBias, SamplingParams } from '../engine/plan.ts';
import type { Tokenizer } from '../engine/tokenizer.ts';
import { jsonObjectGbnf, jsonSchemaToGbnf, UnsupportedSchemaError } from '../engine/grammar/json-schema-gbnf.ts';

/**
 * Longest grammar a schema may become: the grammar is parsed on the event loop and walked per
 * token, so a schema of a megabyte must not become one. Real schemas are far below (zod's int()
 * bounds, shared across fields, are 1.6 KiB once). The converter stops as soon as it passes this.
 */
const MAX_GRAMMAR_CHARS = 64 * 1024;

type Body = { readonly kind: 'chat'; readonly body: ChatCompletionBody } | { readonly kind: 'completion'; readonly body: CompletionBody };

export function samplingParams(p: Body, tokenizer: Tokenizer, seed: number): SamplingParams {
  const b = p.body;
  const topK = b.top_k ?? 0;
  const logprobs = logprobsAsked(p);
  const grammar = grammarOf(b.response_format, tokenizer, b.ignore_eos === true);
  return {
    temperature: b.temperature ?? 1,
    topP: b.top_p ?? 1,
    seed,
    ...(topK > 0 ? { topK } : {}),
    ...(b.min_p != null && b.min_p > 0 ? { minP: b.min_p } : {}),
    ...(b.repetition_penalty != null && b.repetition_penalty !== 1 ? { repetitionPenalty: b.repetition_penalty } : {}),
    ...(b.frequency_penalty != null && b.frequency_penalty !== 0 ? { frequencyPenalty: b.frequency_penalty } : {}),
    ...(b.presence_penalty != null && b.presence_penalty !== 0 ? { presencePenalty: b.presence_penalty } : {}),
    ...(b.logit_bias != null && Object.keys(b.logit_bias).length > 0 ? { logitBias: logitBias(b.logit_bias, tokenizer.vocabSize) } : {}),
    ...(grammar === null ? {} : { grammar }),
    ...(logprobs === null ? {} : { logprobs }),
  };
}

/** Alternatives per token, or null when the request asked for no log-probabilities. */
function logprobsAsked(p: Body): number | null {
  if (p.kind === 'completion') return p.body.logprobs ?? null;
  const b = p.body;
  if (b.top_logprobs != null && b.logprobs !== true) {
    throw new ApiError('invalid_value', 'top_logprobs requires logprobs to be true.', { param: 'top_logprobs' });
  }
  return b.logprobs === true ? (b.top_logprobs ?? 0) : null;
}

function logitBias(map: Readonly<Record<string, number>>, vocabSize: number): LogitBias[] {
  return Object.entries(map).map(([id, bias]) => {
    const tokenId = Number(id);
    if (!(tokenId < vocabSize)) {
      throw new ApiError('invalid_value', `logit_bias names token id ${id}, outside the vocabulary [0, ${vocabSize}).`, { param: 'logit_bias' });
    }
    return { tokenId, bias };
  });
}

/** The GBNF for a response_format, checked by the model's grammar sampler; null for none or text. */
function grammarOf(format: ChatCompletionBody['response_format'], tokenizer: Tokenizer, ignoreEos: boolean): string | null {
  if (format == null || format.type === 'text') return null;
  // The schema first: a schema the converter refuses is the same 400 on every runner.
  const gbnf = format.type === 'json_object' ? jsonObjectGbnf() : schemaGrammarOr400(format.json_schema.schema ?? true, 'response_format.json_schema.schema');
  const check = tokenizer.checkGrammar;
  if (check === undefined) {
    throw new ApiError('unsupported_value', `response_format ${format.type} is not supported by the mock runner (it has no grammar sampler); serve a model with --runner llama.`, { param: 'response_format' });
  }
  if (ignoreEos) {
    throw new ApiError('invalid_value', 'response_format cannot be combined with ignore_eos: the grammar ends generation with the end-of-sequence token.', { param: 'ignore_eos' });
  }
  if (gbnf.length > MAX_GRAMMAR_CHARS) {
    throw new ApiError('invalid_value', `The schema's grammar has ${gbnf.length} characters, more than the ${MAX_GRAMMAR_CHARS} this server accepts; simplify the schema.`, { param: 'response_format.json_schema.schema' });
  }
  if (!check(gbnf)) {
    // The converter's grammars parse and keep inside llama.cpp's repetition limit; what is left is
    // left recursion (a schema whose $ref reaches itself without consuming text).
    throw new ApiError('invalid_value', "The schema's grammar was refused by the model's grammar sampler (llama.cpp): most likely a $ref that reaches itself without any text in between.", { param: 'response_format.json_schema.schema' });
  }
  return gbnf;
}

/** The schema's grammar, or the 400 that names the unsupported keyword under `param`. */
function schemaGrammarOr400(schema: unknown, param: string): string {
  try {
    return jsonSchemaToGbnf(schema, { maxChars: MAX_GRAMMAR_CHARS });
  } catch (err) {
    if (!(err instanceof UnsupportedSchemaError)) throw err;
    // keyword '': the schema as a whole (its grammar's size).
    if (err.keyword === '') throw new ApiError('invalid_value', `${err.message}.`, { param });
    throw new ApiError('invalid_value', `${err.message} (at ${err.path}); ${param} supports the subset in docs/sampling.md.`, { param: `${param}.${err.keyword}` });
  }
}
