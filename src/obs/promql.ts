// Which series names a PromQL expression reads — enough of PromQL to check a dashboard against
// the registry, not a parser. Strings, label matchers, range selectors, grouping clauses and
// Grafana variables are removed first; every identifier left is a function call (followed by
// `(`), a keyword, or a series name. An identifier that calls an unknown function is reported too,
// so a typo in either place fails the check.

const FUNCTIONS = new Set([
  'abs', 'absent', 'absent_over_time', 'avg', 'avg_over_time', 'bottomk', 'ceil', 'changes', 'clamp', 'clamp_max', 'clamp_min',
  'count', 'count_over_time', 'count_values', 'deriv', 'delta', 'exp', 'floor', 'group', 'histogram_quantile', 'idelta',
  'increase', 'irate', 'label_join', 'label_replace', 'last_over_time', 'ln', 'log2', 'log10', 'max', 'max_over_time', 'min',
  'min_over_time', 'predict_linear', 'quantile', 'quantile_over_time', 'rate', 'resets', 'round', 'scalar', 'sgn', 'sort',
  'sort_desc', 'sqrt', 'stddev', 'stdvar', 'sum', 'sum_over_time', 'time', 'timestamp', 'topk', 'vector',
]);
const KEYWORDS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'bool', 'and', 'or', 'unless', 'offset', 'inf', 'nan', 'Inf', 'NaN']);

export interface PromqlNames {
  /** Series (metric) names the expression selects. */
  readonly series: string[];
  /** Identifiers called like functions that PromQL does not have. */
  readonly unknownFunctions: string[];
}

export function promqlNames(expr: string): PromqlNames {
  const e = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ')
    .replace(/\$\{[^}]*\}|\$\w+/g, ' ');
  const series: string[] = [];
  const unknownFunctions: string[] = [];
  for (const m of e.matchAll(/(?<![\w.:])[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    const id = m[0];
    const isCall = /^\s*\(/.test(e.slice(m.index + id.length));
    if (isCall) {
      if (!FUNCTIONS.has(id)) unknownFunctions.push(id);
    } else if (!KEYWORDS.has(id)) {
      series.push(id);
    }
  }
  return { series, unknownFunctions };
}
