// CommandError's message: Runtime Cloud's "Command exited with N.", then the line of stderr that says what went wrong, not its last
// lines (npm prints its notices after its error). The shapes of npm 9 and 11, pip and a
// traceback are in tests/fixtures/error-lines.json, which the daemon's unit test reads too.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { REPO, sdk } from './helpers.mjs';

const { CommandError, errorLine } = sdk;
const cases = JSON.parse(fs.readFileSync(path.join(REPO, 'tests', 'fixtures', 'error-lines.json'), 'utf8'));

test('errorLine and CommandError name the error line, not the notices after it', () => {
  assert.ok(cases.length >= 8);
  for (const c of cases) {
    assert.equal(errorLine(c.stderr), c.line, c.what);
    const e = new CommandError({ exitCode: 1, stdout: '', stderr: c.stderr }, ['npm', 'install']);
    assert.equal(e.message, `Command exited with 1.${c.line ? ` ${c.line}` : ''}`, c.what);
    assert.equal(e.stderr, c.stderr);
    assert.deepEqual([e.code, e.status, e.exitCode, e.argv], ['command_failed', 0, 1, ['npm', 'install']]);
  }
});
