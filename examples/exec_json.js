#!/usr/bin/env node
// Run commands in cordon from Node through `cordon exec-json` (docs/exec-json.md).
// CORDON_BIN names the cordon binary (default: `cordon` in PATH). Exits 0 when
// every check passes; the integration tests run this file.
'use strict';
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const assert = require('node:assert/strict');

const CORDON = process.env.CORDON_BIN || 'cordon';

function cordonExec(request) {
  const p = spawnSync(CORDON, ['exec-json'], { input: JSON.stringify(request), timeout: 60000 });
  const result = JSON.parse(p.stdout.toString());
  if (!result.ok) {
    throw new Error(`cordon: ${result.error.kind}: ${result.error.message}`);
  }
  return result;
}

const ws = fs.mkdtempSync(path.join(os.tmpdir(), 'cordon-node-'));
try {
  if (process.geteuid() === 0) {
    fs.chownSync(ws, 65534, 65534); // as root the sandbox runs as the workspace owner or nobody
  }
  let r = cordonExec({
    command: '/usr/bin/node',
    args: ['-e', "require('fs').writeFileSync('out.txt', 'ok'); console.log(process.env.GREETING)"],
    workspace: ws,
    env: { GREETING: 'hi from node' },
    timeout: 30,
  });
  assert.equal(r.exit_code, 0, JSON.stringify(r));
  assert.equal(r.stdout.data, 'hi from node\n');
  assert.equal(fs.readFileSync(path.join(ws, 'out.txt'), 'utf8'), 'ok');
  assert.equal(r.enforcement.seccomp.installed, true);

  r = cordonExec({ command: 'sleep', args: ['30'], workspace: ws, timeout: 1 });
  assert.equal(r.timed_out, true);

  assert.throws(() => cordonExec({ command: 'true', workspace: ws, env: { LD_PRELOAD: '/x.so' } }), /env/);
  console.log('node exec-json example: OK');
} finally {
  fs.rmSync(ws, { recursive: true, force: true });
}
