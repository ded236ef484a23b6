// Reads {"titles": [...], "separator": "-"} on stdin, prints {"slugs": [...]}.
const slugify = require('slugify');

let raw = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (d) => { raw += d; });
process.stdin.on('end', () => {
  const input = JSON.parse(raw || '{}');
  const sep = input.separator ?? '-';
  const slugs = input.titles.map((t) => slugify(t, { lower: true, strict: true, replacement: sep }));
  process.stdout.write(JSON.stringify({ slugs }) + '\n');
});
