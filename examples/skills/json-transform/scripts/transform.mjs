// A small jq-like query language over the "data" field of the input.
import { readFileSync } from 'node:fs';

const fail = (msg) => { process.stderr.write(`json-transform: ${msg}\n`); process.exit(2); };

// splitTop splits s on sep outside brackets and strings.
function splitTop(s, sep) {
  const out = []; let depth = 0, q = null, start = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (q) { if (c === '\\') i++; else if (c === q) q = null; continue; }
    if (c === '"' || c === "'") q = c;
    else if ('([{'.includes(c)) depth++;
    else if (')]}'.includes(c)) depth--;
    else if (depth === 0 && s.startsWith(sep, i)) { out.push(s.slice(start, i)); start = i + sep.length; i += sep.length - 1; }
  }
  out.push(s.slice(start));
  return out.map((x) => x.trim());
}

// path evaluates ".a.b[0].c[]" against one value, returning the outputs.
function path(expr, v) {
  let outs = [v];
  const re = /\.([A-Za-z_][A-Za-z0-9_]*)|\["([^"]*)"\]|\[(-?\d+)\]|\[\]|\./y;
  let m; re.lastIndex = 0;
  while (re.lastIndex < expr.length && (m = re.exec(expr))) {
    const next = [];
    for (const o of outs) {
      if (m[1] !== undefined || m[2] !== undefined) next.push(o == null ? null : o[m[1] ?? m[2]] ?? null);
      else if (m[3] !== undefined) { const i = Number(m[3]); next.push(Array.isArray(o) ? o.at(i) ?? null : null); }
      else if (m[0] === '[]') { if (Array.isArray(o)) next.push(...o); else if (o && typeof o === 'object') next.push(...Object.values(o)); else fail(`cannot iterate over ${JSON.stringify(o)}`); }
      else next.push(o);
    }
    outs = next;
  }
  if (re.lastIndex !== expr.length) fail(`bad path ${JSON.stringify(expr)}`);
  return outs;
}

function literal(s) {
  s = s.trim();
  if (s.startsWith('.')) return null;
  try { return { v: JSON.parse(s.replace(/^'(.*)'$/, '"$1"')) }; } catch { fail(`bad literal ${s}`); }
}

function compare(expr, v) {
  const m = expr.match(/^(.*?)\s*(==|!=|>=|<=|>|<)\s*(.*)$/);
  if (!m) return path(expr, v).some(Boolean);
  const side = (s) => { const l = literal(s); return l ? l.v : path(s, v)[0]; };
  const a = side(m[1]), b = side(m[3]);
  switch (m[2]) {
    case '==': return JSON.stringify(a) === JSON.stringify(b);
    case '!=': return JSON.stringify(a) !== JSON.stringify(b);
    case '>': return a > b; case '<': return a < b; case '>=': return a >= b; case '<=': return a <= b;
  }
}

function step(stage, v) {
  let m;
  if (stage === '' || stage === '.') return [v];
  if ((m = stage.match(/^select\((.*)\)$/))) return compare(m[1], v) ? [v] : [];
  if ((m = stage.match(/^map\((.*)\)$/))) { if (!Array.isArray(v)) fail('map needs an array'); return [v.flatMap((x) => run(m[1], x))]; }
  if ((m = stage.match(/^sort_by\((.*)\)$/))) { if (!Array.isArray(v)) fail('sort_by needs an array'); return [[...v].sort((a, b) => { const x = path(m[1], a)[0], y = path(m[1], b)[0]; return x < y ? -1 : x > y ? 1 : 0; })]; }
  const arr = () => { if (!Array.isArray(v)) fail(`${stage} needs an array`); return v; };
  switch (stage) {
    case 'keys': return [Object.keys(v ?? {}).sort()];
    case 'length': return [Array.isArray(v) || typeof v === 'string' ? v.length : v && typeof v === 'object' ? Object.keys(v).length : 0];
    case 'sort': return [[...arr()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))];
    case 'unique': return [[...new Set(arr().map((x) => JSON.stringify(x)))].map((x) => JSON.parse(x))];
    case 'sum': return [arr().reduce((a, b) => a + b, 0)];
    case 'min': return [arr().length ? Math.min(...v) : null];
    case 'max': return [arr().length ? Math.max(...v) : null];
    case 'first': return [arr()[0] ?? null];
    case 'last': return [arr().at(-1) ?? null];
    case 'reverse': return [[...arr()].reverse()];
  }
  if (stage.startsWith('.')) return path(stage, v);
  if ((m = stage.match(/^\[(.*)\]$/))) return [run(m[1], v)];
  fail(`unknown filter ${JSON.stringify(stage)}`);
}

function run(query, v) {
  let outs = [v];
  for (const stage of splitTop(query, '|')) outs = outs.flatMap((o) => step(stage, o));
  return outs;
}

const input = JSON.parse(readFileSync(0, 'utf8'));
process.stdout.write(JSON.stringify({ results: run(input.query, input.data) }) + '\n');
