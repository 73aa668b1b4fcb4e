// Builds the runner named by configuration. Asking for `llama` when the native addon is not
// built is an error with a clear message, never a silent fallback to the mock.

import { MockRunner } from './mock/mock-runner.ts';
import type { Runner } from './runner.ts';

export interface RunnerConfig {
  readonly runner: 'llama' | 'mock';
  /** GGUF file; default: the generated tiny model. */
  readonly modelPath?: string;
  readonly threads: number;
  /** llama: run steps this short (ms) on the JS thread (LlamaRunnerOptions.inlineStepMs); default 0, never. */
  readonly inlineStepMs?: number;
  /** llama: bind llama.cpp's threads to CPUs (LlamaRunnerOptions.pinThreads); default false. */
  readonly pinThreads?: boolean;
  /** llama: compute a step's decoding rows apart from its prompt chunks (LlamaRunnerOptions.splitSteps); default true. */
  readonly splitSteps?: boolean;
  /** KV cells; undefined: the model's trained context (llama, at most 8192) or 8192 (mock). */
  readonly contextTokens?: number;
  /** llama: allow contextTokens above the model's trained context. */
  readonly contextBeyondTrained?: boolean;
  readonly maxSequences: number;
  readonly maxBatchTokens: number;
  /** llama: n_ubatch (default maxBatchTokens). */
  readonly microBatchTokens?: number;
  readonly mockSpeed: number;
  /** llama: a Jinja chat template (its text) to use instead of the GGUF's. */
  readonly chatTemplate?: string;
  /** llama: parse control-token text in chat messages as control tokens (the peers' behaviour). */
  readonly parseSpecialInMessages?: boolean;
  /** llama: tokenize completions prompts with control-token text as text. */
  readonly promptSpecialAsText?: boolean;
}

export async function createRunner(c: RunnerConfig): Promise<Runner> {
  if (c.runner === 'mock') {
    return Promise.resolve(
      new MockRunner({ contextTokens: c.contextTokens ?? 8192, maxSequences: c.maxSequences, maxBatchTokens: c.maxBatchTokens, cost: { speed: c.mockSpeed } }),
    );
  }
  // Loaded on demand: the mock path never touches the native addon.
  const { LlamaRunner } = await import('./llama/llama-runner.ts');
  const { ensureDefaultModel } = await import('../../model/default-model.ts');
  const modelPath = c.modelPath ?? (await ensureDefaultModel());
  return new LlamaRunner({
    modelPath,
    threads: c.threads,
    ...(c.inlineStepMs === undefined ? {} : { inlineStepMs: c.inlineStepMs }),
    ...(c.pinThreads === true ? { pinThreads: true } : {}),
    ...(c.splitSteps === undefined ? {} : { splitSteps: c.splitSteps }),
    ...(c.contextTokens === undefined ? {} : { contextTokens: c.contextTokens }),
    contextBeyondTrained: c.contextBeyondTrained === true,
    maxSequences: c.maxSequences,
    maxBatchTokens: c.maxBatchTokens,
    ...(c.microBatchTokens === undefined ? {} : { microBatchTokens: c.microBatchTokens }),
    ...(c.chatTemplate === undefined ? {} : { chatTemplate: c.chatTemplate }),
    parseSpecialInMessages: c.parseSpecialInMessages === true,
    promptSpecialAsText: c.promptSpecialAsText === true,
  });
}
