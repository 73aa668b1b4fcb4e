// Measures the fewest bytes a chat template adds per message of its own (role markers, separators),
// for the API's pre-tokenization size checks (api/limits.ts). Measured, not assumed: every pair of
// roles the API accepts, the second message empty, against the render of the first alone.
import type { ChatMessage } from '../tokenizer.ts';

const ROLES = ['system', 'developer', 'user', 'assistant', 'tool'] as const;

export function templateBytesPerMessage(render: (messages: readonly ChatMessage[]) => string): number {
  const bytes = (m: readonly ChatMessage[]): number => Buffer.byteLength(render(m), 'utf8');
  let min = Infinity;
  for (const r of ROLES) {
    min = Math.min(min, bytes([{ role: r, content: '' }]) - bytes([]));
    for (const p of ROLES) {
      const first = { role: p, content: 'x' };
      min = Math.min(min, bytes([first, { role: r, content: '' }]) - bytes([first]));
    }
  }
  return Math.max(0, min);
}
