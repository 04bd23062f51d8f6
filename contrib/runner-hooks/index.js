// The script ACTIONS_RUNNER_CONTAINER_HOOKS points at. The runner runs it with its own node
// and the hook's JSON input on stdin; it hands everything to `sandgate hook` and returns its
// exit status. SANDGATE_BIN (default: sandgate on PATH) and SANDGATE_HOOK_ARGS (for example
// "--network host --allow-volume /srv/cache") come from the runner's environment (.env file).
//
// On cancellation the runner signals this process only (SIGINT, then SIGTERM, then a kill):
// both signals are forwarded to `sandgate hook`, which stops its step's whole tree and exits;
// this script exits with its status. Should node be killed outright, `sandgate hook` dies with
// it (PR_SET_PDEATHSIG) and takes the step along.
'use strict';
const { spawn } = require('child_process');
const { constants } = require('os');

const extra = (process.env.SANDGATE_HOOK_ARGS || '').split(/\s+/).filter(Boolean);
// The runner's worker (our parent) owns the job: once it is gone, a job it never cleaned up
// is reaped by the next prepare_job.
const args = ['hook', '--job-owner', String(process.ppid), ...extra];
const child = spawn(process.env.SANDGATE_BIN || 'sandgate', args, {
  stdio: ['pipe', 'inherit', 'inherit'],
});
for (const name of ['SIGINT', 'SIGTERM']) {
  process.on(name, () => {
    if (child.exitCode === null && child.signalCode === null) child.kill(name);
  });
}
child.on('error', (error) => {
  console.error(`sandgate hook: cannot start sandgate: ${error.message}`);
  process.exit(1);
});
child.on('close', (code, signal) => {
  if (code !== null) process.exit(code);
  process.exit(128 + (constants.signals[signal] || constants.signals.SIGKILL));
});
child.stdin.on('error', () => {}); // sandgate gone before reading everything: its status says why
process.stdin.pipe(child.stdin);
