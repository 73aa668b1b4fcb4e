// A tiny GBNF interpreter for tests: parses the subset of llama.cpp's grammar format that
// src/engine/grammar emits (rules one per line; literals, character classes, rule references,
// groups, | and the quantifiers ? * + {m} {m,} {m,n}), generates random strings the grammar
// accepts, and tells whether a string is in the language (for grammars without left recursion). It shares no code with the converter, so a string it generates is evidence about the
// grammar, not about the converter's idea of it.
//
// Generation terminates: each rule's minimal derivation height is computed first, and past a depth
// budget every choice takes the shallowest alternative and the fewest repetitions.

type Node =
  | { readonly k: 'lit'; readonly text: string }
  | { readonly k: 'class'; readonly negated: boolean; readonly ranges: readonly (readonly [number, number])[] }
  | { readonly k: 'ref'; readonly name: string }
  | { readonly k: 'seq'; readonly items: readonly Node[] }
  | { readonly k: 'alt'; readonly options: readonly Node[] }
  | { readonly k: 'rep'; readonly node: Node; readonly min: number; readonly max: number | null };

export class Gbnf {
  readonly rules = new Map<string, Node>();
  readonly #height = new Map<string, number>();

  constructor(text: string) {
    for (const line of text.split('\n')) {
      if (line.trim() === '' || line.trimStart().startsWith('#')) continue;
      const m = /^([A-Za-z0-9-]+)\s*::=\s*(.*)$/.exec(line);
      if (m === null) throw new Error(`gbnf: cannot parse line ${JSON.stringify(line)}`);
      const p = new Parser(m[2]!);
      const node = p.alt();
      if (!p.done()) throw new Error(`gbnf: trailing text in ${JSON.stringify(line)} at ${p.pos}`);
      if (this.rules.has(m[1]!)) throw new Error(`gbnf: rule ${m[1]} defined twice`);
      this.rules.set(m[1]!, node);
    }
    for (const [name, node] of this.rules) this.#checkRefs(node, name);
    this.#computeHeights();
  }

  /** A random string of the language of `rule`. */
  generate(random: () => number, rule = 'root', depthBudget = 12): string {
    let out = '';
    const visit = (n: Node, depth: number): void => {
      switch (n.k) {
        case 'lit':
          out += n.text;
          return;
        case 'class':
          out += pickChar(n, random);
          return;
        case 'ref':
          visit(this.rules.get(n.name)!, depth + 1);
          return;
        case 'seq':
          for (const i of n.items) visit(i, depth);
          return;
        case 'alt': {
          const shallow = depth > depthBudget;
          const option = shallow ? minBy(n.options, (o) => this.#h(o)) : n.options[Math.floor(random() * n.options.length)]!;
          visit(option, depth);
          return;
        }
        case 'rep': {
          const cap = n.max ?? n.min + 3;
          const times = depth > depthBudget ? n.min : n.min + Math.floor(random() * (cap - n.min + 1));
          for (let i = 0; i < times; i++) visit(n.node, depth);
          return;
        }
      }
    };
    visit({ k: 'ref', name: rule }, 0);
    return out;
  }

  /** Whether `text` is in the language of `rule` (all parses explored; small inputs only). */
  matches(text: string, rule = 'root'): boolean {
    const memo = new Map<string, Set<number>>();
    const ends = (n: Node, pos: number): Set<number> => {
      switch (n.k) {
        case 'lit':
          return text.startsWith(n.text, pos) ? new Set([pos + n.text.length]) : new Set();
        case 'class': {
          const c = text.codePointAt(pos);
          if (c === undefined) return new Set();
          const inClass = n.ranges.some(([a, b]) => c >= a && c <= b) !== n.negated;
          return inClass ? new Set([pos + (c > 0xffff ? 2 : 1)]) : new Set();
        }
        case 'ref': {
          const key = `${n.name}@${pos}`;
          let r = memo.get(key);
          if (r === undefined) {
            memo.set(key, new Set()); // a left-recursive loop finds nothing
            r = ends(this.rules.get(n.name)!, pos);
            memo.set(key, r);
          }
          return r;
        }
        case 'seq': {
          let at = new Set([pos]);
          for (const item of n.items) at = new Set([...at].flatMap((p) => [...ends(item, p)]));
          return at;
        }
        case 'alt':
          return new Set(n.options.flatMap((o) => [...ends(o, pos)]));
        case 'rep': {
          let frontier = new Set([pos]);
          const out = new Set<number>(n.min === 0 ? [pos] : []);
          for (let i = 1; frontier.size > 0 && (n.max === null ? i <= text.length - pos + 1 : i <= n.max); i++) {
            frontier = new Set([...frontier].flatMap((p) => [...ends(n.node, p)]));
            if (i >= n.min) for (const p of frontier) out.add(p);
          }
          return out;
        }
      }
    };
    return ends({ k: 'ref', name: rule }, 0).has(text.length);
  }

  #checkRefs(n: Node, where: string): void {
    if (n.k === 'ref' && !this.rules.has(n.name)) throw new Error(`gbnf: rule ${where} refers to undefined ${n.name}`);
    if (n.k === 'seq') n.items.forEach((i) => this.#checkRefs(i, where));
    if (n.k === 'alt') n.options.forEach((o) => this.#checkRefs(o, where));
    if (n.k === 'rep') this.#checkRefs(n.node, where);
  }

  #computeHeights(): void {
    for (const name of this.rules.keys()) this.#height.set(name, Infinity);
    for (let changed = true; changed; ) {
      changed = false;
      for (const [name, node] of this.rules) {
        const h = this.#h(node) + 1;
        if (h < this.#height.get(name)!) {
          this.#height.set(name, h);
          changed = true;
        }
      }
    }
    for (const [name, h] of this.#height) if (h === Infinity) throw new Error(`gbnf: rule ${name} derives no finite string`);
  }

  #h(n: Node): number {
    switch (n.k) {
      case 'lit':
      case 'class':
        return 0;
      case 'ref':
        return this.#height.get(n.name) ?? Infinity;
      case 'seq':
        return Math.max(0, ...n.items.map((i) => this.#h(i)));
      case 'alt':
        return Math.min(...n.options.map((o) => this.#h(o)));
      case 'rep':
        return n.min === 0 ? 0 : this.#h(n.node);
    }
  }
}

function minBy<T>(xs: readonly T[], f: (x: T) => number): T {
  let best = xs[0] as T;
  for (const x of xs) if (f(x) < f(best)) best = x;
  return best;
}

/** Characters tried for a negated class: printable ASCII, a few multi-byte ones, and controls. */
const POOL = [...Array.from({ length: 95 }, (_, i) => 32 + i), 0x09, 0x0a, 0xe9, 0x65e5, 0x1f642];

function pickChar(n: Extract<Node, { k: 'class' }>, random: () => number): string {
  const inClass = (c: number): boolean => n.ranges.some(([a, b]) => c >= a && c <= b) !== n.negated;
  const allowed = n.negated ? POOL.filter(inClass) : n.ranges.flatMap(([a, b]) => Array.from({ length: Math.min(b - a + 1, 200) }, (_, i) => a + i));
  if (allowed.length === 0) throw new Error('gbnf: a character class with nothing to generate');
  return String.fromCodePoint(allowed[Math.floor(random() * allowed.length)]!);
}

class Parser {
  pos = 0;
  readonly #s: string;

  constructor(s: string) {
    this.#s = s;
  }

  done(): boolean {
    this.#ws();
    return this.pos >= this.#s.length;
  }

  alt(): Node {
    const options = [this.#seq()];
    while (this.#peek() === '|') {
      this.pos++;
      options.push(this.#seq());
    }
    return options.length === 1 ? options[0]! : { k: 'alt', options };
  }

  #seq(): Node {
    const items: Node[] = [];
    for (;;) {
      this.#ws();
      const c = this.#s[this.pos];
      if (c === undefined || c === '|' || c === ')') break;
      items.push(this.#quantified(this.#primary()));
    }
    if (items.length === 0) throw new Error(`gbnf: empty alternative at ${this.pos} in ${this.#s}`);
    return items.length === 1 ? items[0]! : { k: 'seq', items };
  }

  #primary(): Node {
    const c = this.#s[this.pos]!;
    if (c === '"') return { k: 'lit', text: this.#literal() };
    if (c === '[') return this.#class();
    if (c === '(') {
      this.pos++;
      const inner = this.alt();
      if (this.#peek() !== ')') throw new Error(`gbnf: expected ) at ${this.pos} in ${this.#s}`);
      this.pos++;
      return inner;
    }
    const m = /^[A-Za-z0-9-]+/.exec(this.#s.slice(this.pos));
    if (m === null) throw new Error(`gbnf: unexpected ${JSON.stringify(c)} at ${this.pos} in ${this.#s}`);
    this.pos += m[0].length;
    return { k: 'ref', name: m[0] };
  }

  #quantified(n: Node): Node {
    const c = this.#s[this.pos];
    if (c === '?') return (this.pos++, { k: 'rep', node: n, min: 0, max: 1 });
    if (c === '*') return (this.pos++, { k: 'rep', node: n, min: 0, max: null });
    if (c === '+') return (this.pos++, { k: 'rep', node: n, min: 1, max: null });
    if (c === '{') {
      const m = /^\{(\d+)(,(\d*))?\}/.exec(this.#s.slice(this.pos));
      if (m === null) throw new Error(`gbnf: bad repetition at ${this.pos} in ${this.#s}`);
      this.pos += m[0].length;
      const min = Number(m[1]);
      const max = m[2] === undefined ? min : m[3] === '' ? null : Number(m[3]);
      return { k: 'rep', node: n, min, max };
    }
    return n;
  }

  #literal(): string {
    this.pos++; // opening quote
    let out = '';
    for (;;) {
      const c = this.#s[this.pos];
      if (c === undefined) throw new Error(`gbnf: unterminated literal in ${this.#s}`);
      this.pos++;
      if (c === '"') return out;
      out += c === '\\' ? String.fromCodePoint(this.#escape()) : c;
    }
  }

  #class(): Node {
    this.pos++; // [
    const negated = this.#s[this.pos] === '^';
    if (negated) this.pos++;
    const ranges: [number, number][] = [];
    while (this.#s[this.pos] !== ']') {
      if (this.pos >= this.#s.length) throw new Error(`gbnf: unterminated class in ${this.#s}`);
      const a = this.#classChar();
      if (this.#s[this.pos] === '-' && this.#s[this.pos + 1] !== ']') {
        this.pos++;
        ranges.push([a, this.#classChar()]);
      } else {
        ranges.push([a, a]);
      }
    }
    this.pos++; // ]
    return { k: 'class', negated, ranges };
  }

  #classChar(): number {
    const c = this.#s.codePointAt(this.pos)!;
    this.pos += c > 0xffff ? 2 : 1;
    return c === 0x5c ? this.#escape() : c;
  }

  #escape(): number {
    const c = this.#s[this.pos++];
    const hex = (n: number): number => {
      const v = parseInt(this.#s.slice(this.pos, this.pos + n), 16);
      this.pos += n;
      return v;
    };
    switch (c) {
      case 'x':
        return hex(2);
      case 'u':
        return hex(4);
      case 'U':
        return hex(8);
      case 'n':
        return 10;
      case 'r':
        return 13;
      case 't':
        return 9;
      default:
        return c!.codePointAt(0)!;
    }
  }

  #peek(): string | undefined {
    this.#ws();
    return this.#s[this.pos];
  }

  #ws(): void {
    while (this.#s[this.pos] === ' ') this.pos++;
  }
}

/** A small seeded PRNG in [0, 1) (mulberry32): generation is reproducible from the seed. */
export { prng as mulberry32 } from '../engine/kv/property-support.ts';
