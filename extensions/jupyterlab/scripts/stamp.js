// After a build: record a hash of the sources the bundle was built from in the built package.json, so that a test
// (tests/extensions/jupyterlab/test_frontend_build.py) fails when src/, style/ or schema/ change without a rebuild.
// The Python twin of this hash is workbench_jupyterlab.sources_hash(); both hash the same files the same way.
const crypto = require('crypto');
const fs = require('fs');
const path = require('path');

const root = path.resolve(__dirname, '..');
const DIRS = ['src', 'style', 'schema'];
const FILES = ['package.json', 'tsconfig.json'];

function listFiles(dir) {
  return fs.readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap(e =>
    e.isDirectory() ? listFiles(path.join(dir, e.name)) : [path.join(dir, e.name)]);
}

const files = [...DIRS.flatMap(listFiles), ...FILES].map(f => f.split(path.sep).join('/')).sort();
const hash = crypto.createHash('sha256');
for (const f of files) {
  hash.update(f + '\0');
  hash.update(fs.readFileSync(path.join(root, f)));
  hash.update('\0');
}
const built = path.join(root, 'workbench_jupyterlab', 'labextension', 'package.json');
const meta = JSON.parse(fs.readFileSync(built, 'utf8'));
meta.workbench = { sourcesHash: hash.digest('hex'), files: files.length };
fs.writeFileSync(built, JSON.stringify(meta, null, 2) + '\n');
console.log(`workbench-jupyterlab: sources hash ${meta.workbench.sourcesHash.slice(0, 12)} (${files.length} files)`);
