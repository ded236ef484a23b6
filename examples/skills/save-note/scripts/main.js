// Write a note into $WORKSPACE.
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const input = JSON.parse(fs.readFileSync(0, 'utf8'));
const root = process.env.WORKSPACE;
if (!root) {
  process.stderr.write('save-note: no workspace granted\n');
  process.exit(2);
}
const target = path.resolve(root, input.path);
if (!target.startsWith(root + path.sep)) {
  process.stderr.write(`save-note: ${input.path} leaves the workspace\n`);
  process.exit(2);
}
fs.mkdirSync(path.dirname(target), { recursive: true });
if (input.append) fs.appendFileSync(target, input.content);
else fs.writeFileSync(target, input.content);
const size = fs.statSync(target).size;
process.stdout.write(JSON.stringify({ saved: path.relative(root, target), bytes: size, appended: !!input.append }) + '\n');
