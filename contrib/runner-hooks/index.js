// The script ACTIONS_RUNNER_CONTAINER_HOOKS points at. The runner runs it with its own node
// and the hook's JSON input on stdin; it hands everything to `sandgate hook` and returns its
// exit status. SANDGATE_BIN (default: sandgate on PATH) and SANDGATE_HOOK_ARGS (for example
// "--network host") come from the runner's environment (.env file of the runner).
'use strict';
const { spawnSync } = require('child_process');
const fs = require('fs');

const input = fs.readFileSync(0);
const extra = (process.env.SANDGATE_HOOK_ARGS || '').split(/\s+/).filter(Boolean);
const result = spawnSync(process.env.SANDGATE_BIN || 'sandgate', ['hook', ...extra], {
  input,
  stdio: ['pipe', 'inherit', 'inherit'],
});
if (result.error) {
  console.error(`sandgate hook: cannot start sandgate: ${result.error.message}`);
  process.exit(1);
}
process.exit(result.status === null ? 128 + 9 : result.status);
