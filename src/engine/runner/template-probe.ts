// Measures the fewest bytes a chat template adds per message of its own (role markers, separators),
// for the API's pre-tokenization size checks (api/limits.ts), for a message that is neither the
// first (a first system message replaces a template's default one, which may be longer) nor the last
// (a last assistant message is continued in place of the generation prompt). Measured, not assumed:
// every pair of roles the API accepts, the second message empty and a user message after it,
// against the render without the empty one. A
// conversation the template refuses (many insist on alternating roles) is skipped; with nothing
// measured the answer is 0, which never refuses a prompt that fits.
import type { ChatMessage } from '../tokenizer.ts';

const ROLES = ['system', 'developer', 'user', 'assistant', 'tool'] as const;

export function templateBytesPerMessage(render: (messages: readonly ChatMessage[]) => string): number {
  const bytes = (m: readonly ChatMessage[]): number | null => {
    try {
      return Buffer.byteLength(render(m), 'utf8');
    } catch {
      return null;
    }
  };
  let min = Infinity;
  const last = { role: 'user', content: 'y' };
  const measure = (base: readonly ChatMessage[], r: string): void => {
    const without = bytes([...base, last]);
    const withIt = bytes([...base, { role: r, content: '' }, last]);
    if (without !== null && withIt !== null) min = Math.min(min, withIt - without);
  };
  for (const r of ROLES) {
    for (const p of ROLES) measure([{ role: p, content: 'x' }], r);
  }
  return Number.isFinite(min) ? Math.max(0, min) : 0;
}
