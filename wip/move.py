import os, re, subprocess
os.chdir('/work/main')
moves = {}
for line in open('/work/layout/map.txt'):
    dest, names = line.split(':'); names = names.split()
    for n in names:
        src = n if ('/' in n or dest == 'apps') else dest.split('/')[0] + '/' + n
        base = os.path.basename(src)
        for ext in ('.hpp', '.cpp'):
            if os.path.exists(src + ext):
                moves[src + ext] = dest + '/' + base + ext
tests = {
 'common': 'error fd strings temp_dir sha256',
 'sandbox': 'cancel capture cgroup container doctor egress_proxy egress_request egress_rule environment limits mounts netns offline payload reaper result_json run run_tree safe_access seccomp shims spawn tool_cache wrap wrap_bwrap wrap_files broker',
 'jobs': 'action action_store artifact_builtin background_steps cache_builtin changed_paths expr file_commands git_credentials git_lock git_mirror git_mirror_layout log masker matrix merge_queue mirror_gc shell step_actions step_runner template_schema value workflow_call workflow_cancel workflow_commands workflow_events workflow_grammar workflow_matchers workflow_model workflow_runner worktree',
 'github': 'github_auth github_check_runs github_http_client github_job_report github_journal github_report_format github_webhook',
 'agent': 'agent api api_client api_sandboxes cmd_sandboxes daemon_reports egress_presets exec_registry gate_reporting github_rounds job_executor job_process job_store mirror_upkeep policy_options poller random_id runner_hook sandbox_dirs sandbox_records secret_file_token units webhook_events',
 'integration': 'agent_e2e agent_pool arc dockerfile egress_tools exec fuzz_regressions gate gate_github gate_sandbox nightly run_act runner_hook_conformance seams threats',
}
for folder, names in tests.items():
    dest = 'tests/integration' if folder == 'integration' else 'tests/unit/' + folder
    for n in names.split():
        src = f'tests/test_{n}.cpp'
        assert os.path.exists(src), src
        moves[src] = f'{dest}/test_{n}.cpp'
for f in ('action_fixture.hpp', 'agent_fixture.hpp', 'run_helpers.hpp', 'wrap_spawn.hpp'):
    moves['tests/' + f] = 'tests/support/' + f
left = [f for f in os.listdir('tests') if f.startswith('test_') and 'tests/'+f not in moves]
assert not left, left
for src, dst in moves.items():
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    subprocess.run(['git', 'mv', src, dst], check=True)
# Rewrite every reference to a moved path.
pattern = re.compile(r'(?<![A-Za-z0-9_])(' + '|'.join(re.escape(k) for k in sorted(moves, key=len, reverse=True)) + r')(?![A-Za-z0-9_])')
common_names = ('Expected|Error|ErrorKind|fail|errno_message|Fd|close_all|k_ascii_space|trim|ascii_lower|'
                'ascii_iequals|ascii_lowercase|host_temp_dir|make_host_temp_dir|to_ordered_json|'
                'to_ordered_json_or_null|WarningSink|set_warning_sink|warn|listen_unix|connect_unix|'
                'PeerCredentials|peer_credentials|write_frame|read_frame|TokenProvider|FixedToken')
ns_sandbox = re.compile(r'\bsandbox::(' + common_names + r')\b')
ns_jobs = re.compile(r'\bjobs::(sha256|sha256_hex|Sha256Digest|Sha256Stream|to_hex)\b')
files = subprocess.run(['git', 'ls-files'], capture_output=True, text=True, check=True).stdout.split()
changed = 0
for f in files:
    if not os.path.isfile(f) or f.startswith(('fuzz/corpus', 'fuzz/regressions')):
        continue
    try:
        text = open(f, encoding='utf-8').read()
    except UnicodeDecodeError:
        continue
    new = pattern.sub(lambda m: moves[m.group(1)], text)
    if f.endswith(('.cpp', '.hpp')):
        new = ns_sandbox.sub(r'common::\1', new)
        new = ns_jobs.sub(r'common::\1', new)
    if f.startswith('common/'):
        new = new.replace('namespace sandbox {', 'namespace common {').replace('}  // namespace sandbox', '}  // namespace common')
        new = new.replace('namespace jobs {', 'namespace common {').replace('}  // namespace jobs', '}  // namespace common')
    if f.startswith('sandbox/') and f.endswith(('.cpp', '.hpp')) and '/gen/' not in f:
        new = re.sub(r'#include "common/(error|fd)\.hpp"', '#include "sandbox/base.hpp"', new)
        # one base.hpp include per file
        first = new.find('#include "sandbox/base.hpp"')
        if first >= 0:
            head, tail = new[:first + 1], new[first + 1:]
            tail = tail.replace('#include "sandbox/base.hpp"\n', '')
            new = head + tail
    if new != text:
        open(f, 'w', encoding='utf-8').write(new)
        changed += 1
print('moved', len(moves), 'rewrote', changed)
