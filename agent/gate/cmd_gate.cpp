// sandgate gate: one merge-gate check of one exact commit. Mirror the repository (libgit2,
// under --state-dir), materialise a worktree at the SHA to read its workflows, run the
// workflows the event selects through the wrap (each job leg in its own worktree, filled by
// actions/checkout), remove every worktree, and exit with the verdict.
//
// Exit status: 0 the gate passes; 1 a job failed (or no job ran: a gate that checks nothing
// does not pass); 2 a bad argument or an invalid workflow; 3 the remote does not have the SHA;
// 4 the remote is unreachable or refused the credentials; 5 the mirror or a worktree could
// not be made on this machine; 128+N when SIGINT/SIGTERM/SIGHUP (signal N) cancelled the run
// (its steps stopped, its jobs concluded and reported cancelled). The token
// (SANDGATE_GIT_TOKEN, https only) is never printed.
//
// Under the agent with a job sandbox (SANDGATE_BROKER_SOCKET, SANDGATE_BROKER_IDENTITY and
// SANDGATE_JOB_WORKSPACE set; agent/cli/job_executor.hpp) the worktrees and the scratch lie in
// the job's workspace (the sandbox's writable root) and every step is an exec request to the
// job's broker: no wrap per step, and a refused exec fails the step, never runs on the host.
// The mirror stays in the state directory, fetched here (outside the sandbox, with the
// network); the agent binds the repository's mirror scope (its mirror and its submodules',
// jobs/git/git_mirror_layout.hpp) read-only into the sandbox for the alternates, and nothing of
// the other repositories it serves.
#include <poll.h>
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <semaphore>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "agent/cli/action_options.hpp"
#include "agent/cli/builtin_options.hpp"
#include "agent/cli/cli11.hpp"
#include "agent/cli/commands.hpp"
#include "agent/cli/interrupts.hpp"
#include "agent/cli/job_executor.hpp"
#include "agent/cli/policy_options.hpp"
#include "agent/cli/random_id.hpp"
#include "agent/cli/run_setup.hpp"
#include "agent/gate/gate_reporting.hpp"
#include "agent/sandboxes/leg_sandboxes.hpp"
#include "common/temp_dir.hpp"
#include "jobs/git/changed_paths.hpp"
#include "jobs/git/git_handles.hpp"
#include "jobs/git/git_provider.hpp"
#include "jobs/git/git_remove.hpp"
#include "jobs/git/repo_info.hpp"
#include "jobs/run/log.hpp"
#include "jobs/run/masker.hpp"
#include "jobs/run/run_report.hpp"
#include "jobs/run/workflow_runner.hpp"
#include "jobs/workflow/runner_labels.hpp"
#include "jobs/workflow/workflow_events.hpp"
#include "sandbox/wrap/identity.hpp"

namespace agent {
namespace {

constexpr int k_exit_failed = 1;
constexpr int k_exit_invalid = 2;
constexpr int k_exit_unknown_sha = 3;
constexpr int k_exit_unreachable = 4;
constexpr int k_exit_local = 5;
constexpr const char* k_token_variable = "SANDGATE_GIT_TOKEN";

struct GateFlags {
    std::string repo;
    std::string sha;
    std::string ref;
    std::string
        base_sha;  // push: `before`; pull_request: the base branch's SHA; merge_group: base_sha
    std::string base_ref;  // pull_request, merge_group: the base branch
    std::string event = "merge_group";
    std::string workflows = ".github/workflows";
    std::vector<std::string> jobs;
    std::string state_dir;
    std::string report;
    PolicyOptions policy;
    GitHubFlags github;           // --github-repo ...: check runs (or statuses) per job
    ActionFlags actions;          // --actions-dir, --actions-source, --node
    BuiltinFlags builtins;        // --cache-dir, --cache-max-*, --artifacts-dir
    bool wrap_each_step = false;  // a fresh wrap per step instead of one sandbox per job leg
};

void add_flags(CLI::App& app, GateFlags& f) {
    app.add_option("--repo", f.repo, "the repository: a path, file:// or https:// URL")->required();
    app.add_option("--sha", f.sha, "the full 40-hex SHA of the commit to check")->required();
    app.add_option("--ref", f.ref, "the ref the commit is on (fetched too; github.ref)");
    app.add_option(
        "--base-sha", f.base_sha,
        "push: the SHA the ref had before (40 zeros: a new branch); pull_request: the base "
        "branch's SHA; merge_group: the commit the group is on. For paths/paths-ignore filters");
    app.add_option(
        "--base-ref", f.base_ref,
        "pull_request, merge_group: the base branch (branches filters; github.base_ref; a pull "
        "request's diff base when --base-sha is missing or not in the remote)");
    app.add_option("--event", f.event, "merge_group (the default), pull_request or push")
        ->check(CLI::IsMember({"merge_group", "pull_request", "push"}));
    app.add_option("-W,--workflows", f.workflows,
                   "workflows in the commit: a file or directory (.github/workflows)");
    app.add_option("-j,--job", f.jobs, "run this job (and what it needs); repeatable");
    app.add_option("--state-dir", f.state_dir,
                   "mirrors, worktrees and the GitHub report journal ($XDG_STATE_HOME/sandgate)");
    app.add_option("--report", f.report, "write a JSON report of every job and step to FILE");
    add_policy_options(app, f.policy);
    app.add_flag("--wrap-each-step", f.wrap_each_step,
                 "a fresh wrap for each step, instead of one sandbox per job leg its steps share");
    add_action_options(app, f.actions);
    add_builtin_options(app, f.builtins);
    add_github_options(app, f.github, StateDirOption::omit);
    app.footer(
        "Exit status: 0 the gate passes; 1 a job failed, or no workflow runs on the event; 2 a "
        "bad\n"
        "argument or an invalid workflow; 3 the remote does not have the SHA; 4 the remote is\n"
        "unreachable or refused the credentials; 5 a local failure (mirror, worktree, report "
        "file);\n"
        "128+N when signal N (SIGINT, SIGTERM, SIGHUP) cancelled the run: steps stopped, jobs\n"
        "concluded and reported cancelled.\n"
        "An https token is read from SANDGATE_GIT_TOKEN (never from the command line); without "
        "it,\n"
        "the App flags mint one for the --github-repo repository alone, contents:read. It is sent\n"
        "only to --repo itself: submodules are fetched without credentials. With\n"
        "--github-repo each job gets a check run (in_progress, then concluded); reports GitHub\n"
        "cannot take are kept in STATE_DIR/github-journal and never change the exit status.\n"
        "Under `sandgate agent` with a job sandbox (SANDGATE_BROKER_SOCKET, "
        "SANDGATE_BROKER_IDENTITY,\n"
        "SANDGATE_JOB_WORKSPACE) the worktrees lie in the job's workspace and every step is an "
        "exec\n"
        "request to the job's broker; a refused exec fails the step (nothing runs on the host).");
}

int say(int code, const std::string& message) {
    std::fprintf(stderr, "sandgate gate: %s\n", message.c_str());
    return code;
}

int exit_for(const common::Error& error) {
    switch (error.kind) {
        case common::ErrorKind::invalid_input:
            return k_exit_invalid;
        case common::ErrorKind::unavailable:
        case common::ErrorKind::transient:
        case common::ErrorKind::timeout:
            return k_exit_unreachable;
        case common::ErrorKind::permanent:
            return k_exit_local;
    }
    return k_exit_local;
}

// "refs/heads/main" or "main": "main".
std::string branch_name(const std::string& ref) {
    return ref.starts_with("refs/heads/") ? ref.substr(11) : ref;
}

// A minimal payload for the event, as GitHub would send for this SHA and ref.
jobs::Value event_payload(const GateFlags& f, const std::string& repository) {
    jobs::Object repo;
    repo.set("full_name", repository);
    jobs::Object payload;
    payload.set("repository", jobs::Value(repo));
    if (f.event == "push") {
        if (!f.ref.empty()) payload.set("ref", f.ref);
        if (!f.base_sha.empty()) payload.set("before", f.base_sha);
        payload.set("after", f.sha);
        jobs::Object head;
        head.set("id", f.sha);
        payload.set("head_commit", jobs::Value(head));
    } else if (f.event == "pull_request") {
        payload.set("action", "synchronize");
        jobs::Object head;
        head.set("sha", f.sha);
        if (!f.ref.empty()) head.set("ref", f.ref);
        jobs::Object pull;
        pull.set("head", jobs::Value(head));
        if (!f.base_sha.empty() || !f.base_ref.empty()) {
            jobs::Object base;
            if (!f.base_sha.empty()) base.set("sha", f.base_sha);
            if (!f.base_ref.empty()) base.set("ref", branch_name(f.base_ref));
            pull.set("base", jobs::Value(base));
        }
        payload.set("pull_request", jobs::Value(pull));
    } else {
        payload.set("action", "checks_requested");
        jobs::Object group;
        group.set("head_sha", f.sha);
        if (!f.ref.empty()) group.set("head_ref", f.ref);
        if (!f.base_sha.empty()) group.set("base_sha", f.base_sha);
        if (!f.base_ref.empty()) group.set("base_ref", "refs/heads/" + branch_name(f.base_ref));
        payload.set("merge_group", jobs::Value(group));
    }
    return jobs::Value(payload);
}

// A directory removed (never following symlinks) when the gate ends.
class ScopedDir {
public:
    // Under `base` (a directory held open, in a job sandbox's workspace), or $TMPDIR (/tmp)
    // when there is none. The new directory is made and opened through its parent's fd, so a
    // step that replaced a path component meanwhile leads nowhere else.
    // In a job sandbox, the directory belongs to the sandbox's host identity (`owner`), which
    // reaches RUNNER_TEMP through it.
    common::Expected<std::filesystem::path> create(const std::string& label,
                                                   const sandbox::SafeDir* base,
                                                   const std::optional<sandbox::Owner>& owner) {
        if (base != nullptr) {
            auto name = SANDGATE_TRY(random_id("sandgate-" + label + "-", 12));
            auto made = SANDGATE_TRY(base->make_dirs(name, {0700, owner}, "the gate's temp root"));
            m_path = made.path();
            m_dir = std::make_shared<const sandbox::SafeDir>(std::move(made));
            return m_path;
        }
        auto made_here = SANDGATE_TRY(common::make_host_temp_dir("sandgate-" + label + "-"));
        m_path = made_here;
        auto opened = SANDGATE_TRY(sandbox::SafeDir::open_trusted(m_path, "the gate's temp root"));
        m_dir = std::make_shared<const sandbox::SafeDir>(std::move(opened));
        return m_path;
    }
    // The directory, opened when it was made (before any step ran).
    std::shared_ptr<const sandbox::SafeDir> dir() const { return m_dir; }
    ~ScopedDir() {
        m_dir.reset();
        if (!m_path.empty()) (void)jobs::remove_tree(m_path);
    }

private:
    std::filesystem::path m_path;
    std::shared_ptr<const sandbox::SafeDir> m_dir;
};

struct Gate {
    GateFlags flags;
    sandbox::Policy policy;
    std::filesystem::path state;
    std::optional<github::Reporter> reporter;  // set with --github-repo
    // Every git token the gate offers (a minted one, each time it is minted again) is masked.
    jobs::Masker masker;  // not movable: MaskedTokens keeps a reference
    std::optional<jobs::GitToken> token;
    std::string repository;  // owner/name
    // Set under the agent: the job's sandbox, and the executor that sends each step there.
    std::optional<JobSandboxEnvironment> job_sandbox;
    std::unique_ptr<jobs::StepExecutor> executor;
    std::unique_ptr<jobs::ActionResolver>
        actions;  // the commit's remote actions, resolved before the jobs
};

// Where worktrees are leased: the job's workspace in a job sandbox, else the state directory.
std::filesystem::path worktree_root(const Gate& gate) {
    return gate.job_sandbox ? gate.job_sandbox->workspace : gate.state;
}

// The scratch's parent: the job's workspace's tmp in a job sandbox (created beneath the
// workspace's fd: earlier steps of the job may have written there), else none ($TMPDIR).
common::Expected<std::optional<sandbox::SafeDir>> scratch_parent(const Gate& gate) {
    if (!gate.job_sandbox) return std::optional<sandbox::SafeDir>();
    auto workspace =
        sandbox::SafeDir::open_trusted(gate.job_sandbox->workspace, "the job's workspace");
    if (!workspace) return std::unexpected(workspace.error());
    auto dir =
        SANDGATE_TRY(workspace->make_dirs("tmp", {0755, std::nullopt}, "the job's workspace tmp"));
    return std::optional<sandbox::SafeDir>(std::move(dir));
}

// Why the gate stops before any job runs; `commit`: the commit's own doing (its workflows),
// which GitHub is told about, not a mistake on the command line.
struct Refusal {
    int code;
    std::string message;
    bool commit;
};

// Selects the workflows of the commit (materialised at `root`) that run on the event; paths
// filters diff the commits in `mirror` (a diff it cannot make runs the workflow, warned).
std::optional<Refusal> select_workflows(const Gate& gate, const std::filesystem::path& root,
                                        const jobs::Mirror& mirror,
                                        const jobs::RunSettings& settings,
                                        std::vector<jobs::Workflow>& out) {
    auto files = workflow_files(root, gate.flags.workflows);
    if (!files) return Refusal{k_exit_invalid, files.error().message, true};
    auto workflows = load_workflows(root, *files);
    if (!workflows) return Refusal{k_exit_invalid, workflows.error().message, true};
    auto selection = jobs::select_for_event(std::move(*workflows), settings.event_name,
                                            settings.event, mirror.gitdir);
    for (const auto& warning : selection.warnings)
        std::fprintf(stderr, "sandgate gate: warning: %s\n", warning.c_str());
    out = std::move(selection.workflows);
    for (const auto& id : gate.flags.jobs) {
        const bool known = std::ranges::any_of(
            out, [&](const jobs::Workflow& w) { return w.find_job(id) != nullptr; });
        if (!known)
            return Refusal{k_exit_invalid,
                           "-j " + id + ": no job with that id in the workflows '" +
                               gate.flags.event + "' selects",
                           false};
    }
    if (!gate.flags.jobs.empty())
        std::erase_if(out, [&](const jobs::Workflow& w) {
            return std::ranges::none_of(
                gate.flags.jobs, [&](const std::string& id) { return w.find_job(id) != nullptr; });
        });
    if (out.empty())
        return Refusal{k_exit_failed,
                       "no workflow in " + gate.flags.workflows + " at " + gate.flags.sha +
                           " runs on '" + gate.flags.event + "': the gate has nothing to check",
                       true};
    return std::nullopt;
}

jobs::RunSettings base_settings(const Gate& gate, const std::filesystem::path& root,
                                const jobs::Mirror& mirror) {
    jobs::RunSettings settings;
    settings.event_name = gate.flags.event;
    settings.repository = root;
    settings.repo.sha = gate.flags.sha;
    settings.repo.ref = gate.flags.ref.empty() || gate.flags.ref.starts_with("refs/")
                            ? gate.flags.ref
                            : "refs/heads/" + gate.flags.ref;
    settings.repo.repository = gate.repository;
    settings.repo.owner = gate.repository.substr(0, gate.repository.find('/'));
    settings.event = event_payload(gate.flags, gate.repository);
    settings.actor = "sandgate";
    settings.labels = jobs::default_runner_labels();
    settings.job_filter = gate.flags.jobs;
    settings.policy = gate.policy;
    // git in a step reads objects through the worktree's alternates: the repository's mirror
    // scope, read-only (its submodules' mirrors included, also those fetched later).
    settings.policy.read_only.push_back(mirror.scope);
    settings.host = sandbox::current_environment();
    // No credential of the gate's reaches a step, allowlist or not.
    std::erase_if(settings.host, [](const auto& pair) {
        return pair.first == k_token_variable ||
               std::ranges::any_of(k_token_variables,
                                   [&](const char* name) { return pair.first == name; });
    });
    return settings;
}

// The state directory, created, as a physical path: the wrap refuses binds through symlinks.
std::optional<int> prepare_state(Gate& gate) {
    std::filesystem::path state = gate.flags.state_dir.empty()
                                      ? jobs::MirrorCache::default_state_dir()
                                      : std::filesystem::absolute(gate.flags.state_dir);
    std::error_code ec;
    std::filesystem::create_directories(state, ec);  // trusted path: --state-dir, the gate's own
    if (ec) return say(k_exit_local, "--state-dir " + state.string() + ": " + ec.message());
    gate.state = std::filesystem::canonical(state, ec);
    if (ec) return say(k_exit_local, "--state-dir " + state.string() + ": " + ec.message());
    return std::nullopt;
}

// The GitHub reporter when --github-repo is given; its other flags alone are a mistake.
std::optional<int> prepare_reporter(Gate& gate) {
    GitHubFlags& github = gate.flags.github;
    if (github.repo.empty()) {
        const bool stray = !github.token_file.empty() || !github.app_id.empty() ||
                           !github.app_key.empty() || !github.installation_id.empty() ||
                           !github.details_url.empty();
        if (stray)
            return say(k_exit_invalid,
                       "--token-file, --app-* and --details-url need --github-repo OWNER/NAME");
        return std::nullopt;
    }
    github.state_dir = gate.state.string();
    auto reporter = make_reporter(github);
    if (!reporter) return say(k_exit_invalid, reporter.error().message);
    gate.reporter = std::move(*reporter);
    return std::nullopt;
}

// With the App flags and no SANDGATE_GIT_TOKEN, an https --repo is fetched with installation
// tokens of its own, for the --github-repo repository alone with contents:read (the reporter's
// token, which needs checks:write, is another), minted again before each one expires: a gate
// longer than the hour still fetches late submodules and later jobs' checkouts.
std::optional<int> prepare_git_token(Gate& gate, const jobs::RemoteUrl& remote) {
    if (gate.token || remote.kind != jobs::RemoteKind::https || gate.flags.github.repo.empty())
        return std::nullopt;
    auto source = git_token_source(gate.flags.github);
    if (!source) {
        const bool bad_flags = source.error().kind == common::ErrorKind::invalid_input;
        return say(bad_flags ? k_exit_invalid : k_exit_unreachable,
                   "git token: " + source.error().message);
    }
    if (*source)
        gate.token =
            jobs::GitToken{std::make_shared<jobs::MaskedTokens>(std::move(*source), gate.masker)};
    return std::nullopt;
}

// How long a cancelled run may take to unwind (its steps stopped, always() steps run, its
// jobs concluded and reported) before the gate gives up on it. A step in the agent's job
// sandbox cannot be stopped mid-way, so it may outlast this.
constexpr std::chrono::seconds k_unwind_deadline{30};

// Until `stop`: once SIGINT/SIGTERM/SIGHUP fired the run's cancel token, the run unwinds by
// itself. Should it not be done within k_unwind_deadline, the open runs are concluded as
// cancelled here and sandgate dies of the signal as it would have without the guard (the
// steps' trees die with it: bwrap --die-with-parent and the spawner's parent-death signal;
// `temp` is removed first, the worktrees are reaped by the next gate).
void watch_interrupts(const std::stop_token& stop, const InterruptGuard& guard,
                      GateReporter* reporting, const std::filesystem::path& temp) {
    pollfd ready{guard.token().fd(), POLLIN, 0};
    while (!stop.stop_requested() && ::poll(&ready, 1, 200) <= 0) {
    }  // 200 ms: sees `stop`
    if (stop.stop_requested()) return;
    const int sig = guard.received().value_or(SIGTERM);
    std::fprintf(stderr, "sandgate gate: signal %d: cancelling the run\n", sig);
    const auto deadline = std::chrono::steady_clock::now() + k_unwind_deadline;
    while (!stop.stop_requested() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (stop.stop_requested()) return;
    std::fprintf(stderr,
                 "sandgate gate: the run did not stop within %llds: concluding the open check runs "
                 "as cancelled\n",
                 static_cast<long long>(k_unwind_deadline.count()));
    if (reporting != nullptr)
        (void)reporting->cancel_open("The gate was stopped by signal " + std::to_string(sig) +
                                     " before this job ended.");
    std::fflush(nullptr);
    (void)jobs::remove_tree(temp);  // best effort: the steps using it are about to die
    ::signal(sig, SIG_DFL);
    ::raise(sig);
}

// Runs the selected workflows, reports them, writes --report; returns the verdict.
int run_jobs(Gate& gate, jobs::RunSettings& settings, const std::vector<jobs::Workflow>& workflows,
             const jobs::MirrorCache& cache, jobs::WorktreeArea& area) {
    ScopedDir temp;
    auto parent = scratch_parent(gate);
    if (!parent) return say(k_exit_local, parent.error().message);
    auto temp_path =
        temp.create("gate", *parent ? &**parent : nullptr, sandbox::sandbox_owner(gate.policy));
    if (!temp_path) return say(k_exit_local, temp_path.error().message);
    settings.temp_root = *temp_path;
    settings.temp_root_dir = temp.dir();
    jobs::Masker& masker = gate.masker;
    jobs::ConsoleLog console(stdout);
    TailLog log(console, masker);
    jobs::GitWorkspace workspace(cache, area,
                                 jobs::GitSource{gate.flags.repo, gate.flags.sha, settings.repo.ref,
                                                 gate.repository, gate.token});
    std::counting_semaphore<> legs(
        std::max<std::ptrdiff_t>(2, std::thread::hardware_concurrency()));
    jobs::RunServices services{log, masker, workspace, legs, nullptr, gate.executor.get()};
    // Run by hand: one persistent sandbox per job leg (agent/sandboxes/leg_sandboxes.hpp).
    const auto leg_sandboxes = gate.executor || gate.flags.wrap_each_step
                                   ? nullptr
                                   : open_leg_sandboxes(settings, "sandgate gate");
    services.leg_executors = leg_sandboxes.get();
    services.actions = gate.actions.get();
    auto builtins = open_builtin_stores(gate.flags.builtins, gate.state, gate.flags.report);
    if (!builtins) return say(k_exit_local, builtins.error().message);
    services.caches = &(*builtins)->caches();
    services.artifacts = &(*builtins)->artifacts();
    std::optional<GateReporter> reporting;
    if (gate.reporter) {
        std::vector<const jobs::Workflow*> top_level;
        top_level.reserve(workflows.size());
        for (const auto& workflow : workflows) top_level.push_back(&workflow);
        reporting.emplace(*gate.reporter, gate.flags.sha, masker, std::move(top_level),
                          ReportOutput{stdout, stderr, "sandgate gate"});
        (void)
            reporting->replay();  // what an earlier gate could not send (its lines say how it went)
        services.observer = &*reporting;
    }
    // SIGINT/SIGTERM/SIGHUP cancel the run: its steps are stopped, its jobs concluded (and
    // reported) cancelled, and the gate exits 128+N.
    auto interrupts = InterruptGuard::install();
    if (!interrupts) return say(k_exit_local, interrupts.error().message);
    services.cancel = &(*interrupts)->token();
    std::jthread watcher(watch_interrupts, std::cref(**interrupts),
                         reporting ? &*reporting : nullptr, *temp_path);
    jobs::RunReport report;
    report.event = settings.event_name;
    const auto started = std::chrono::steady_clock::now();
    for (const auto& workflow : workflows)
        report.workflows.push_back(
            jobs::run_workflow(settings, services, workflow, jobs::Object{}, jobs::Object{}));
    report.duration = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - started);
    if (gate.actions) report.actions = gate.actions->lock();
    for (const auto& workflow : report.workflows)
        for (const auto& job : workflow.jobs)
            if (job.conclusion == jobs::Outcome::failure) {
                report.exit_code = k_exit_failed;
                std::fprintf(stderr, "sandgate gate: job '%s' failed\n", job.id.c_str());
            }
    std::fflush(stdout);
    watcher.request_stop();
    watcher.join();
    // Reporting failures are journaled and said on stderr; the verdict stays the jobs'.
    if (reporting) (void)reporting->finish(report, &log);
    if (!gate.flags.report.empty())
        if (auto written = jobs::write_report(gate.flags.report, report, masker); !written)
            return say(k_exit_local, written.error().message);
    if (const auto sig = (*interrupts)->received()) {
        std::printf("sandgate gate: cancelled by signal %d: %s at %s\n", *sig,
                    gate.repository.c_str(), gate.flags.sha.c_str());
        return 128 + *sig;
    }
    std::printf("sandgate gate: %s %s at %s\n", report.exit_code == 0 ? "passed" : "failed",
                gate.repository.c_str(), gate.flags.sha.c_str());
    return report.exit_code;
}

int run_gate(Gate& gate) {
    const jobs::MirrorCache cache(gate.state);
    jobs::WorktreeArea area(worktree_root(gate));
    area.reap_stale();
    // The commit, in a worktree of its own, to read the workflows from.
    auto control = area.create("gate");
    if (!control) return say(k_exit_local, control.error().message);
    jobs::GitCheckoutRequest request;
    request.source =
        jobs::MirrorRequest{gate.flags.repo, gate.flags.sha, gate.flags.ref, gate.token, ""};
    request.path = control->path();
    request.depth = 1;
    auto checked_out = jobs::checkout_commit(cache, request);
    if (!checked_out) return say(exit_for(checked_out.error()), checked_out.error().message);
    const jobs::Mirror& mirror = checked_out->mirror;
    if (mirror.presence == jobs::CommitPresence::missing)
        return say(k_exit_unknown_sha,
                   "commit " + gate.flags.sha + " is not in " + mirror.remote.fetch_url);
    gate.repository = jobs::repository_from_url(mirror.remote.fetch_url);
    if (gate.repository.empty()) gate.repository = "local/" + mirror.scope.filename().string();

    // The base of a paths filter's diff, fetched when the mirror lacks it (a base the remote
    // does not have leaves the paths filters unapplied, with a warning: select_workflows).
    if (!gate.flags.base_sha.empty() &&
        gate.flags.base_sha.find_first_not_of('0') != std::string::npos)
        (void)cache.ensure_commit(
            jobs::MirrorRequest{gate.flags.repo, gate.flags.base_sha, "", gate.token, ""});
    jobs::RunSettings settings = base_settings(gate, control->path(), mirror);
    std::vector<jobs::Workflow> workflows;
    if (auto refusal = select_workflows(gate, control->path(), mirror, settings, workflows)) {
        const int code = say(refusal->code, refusal->message);
        if (gate.reporter && refusal->commit)
            (void)report_gate_refusal(*gate.reporter, gate.flags.sha, gate.flags.workflows,
                                      refusal->message,
                                      ReportOutput{stdout, stderr, "sandgate gate"});
        return code;
    }
    // The commit's remote actions, from its own workflow files, resolved before any job starts.
    auto actions = make_action_resolver(gate.flags.actions, gate.state, gate.flags.repo);
    if (!actions) return say(k_exit_invalid, actions.error().message);
    gate.actions = std::move(*actions);
    resolve_run_actions(*gate.actions, workflows, control->path(), "sandgate gate");
    settings.node = gate.flags.actions.node;
    return run_jobs(gate, settings, workflows, cache, area);
}

}  // namespace

int gate_command(CommandArgs args) {
    CLI::App app{
        "sandgate gate: check one commit of a repository with its own workflows, every step in the "
        "sandbox"};
    app.name("sandgate gate");
    Gate gate;
    add_flags(app, gate.flags);
    try {
        app.parse(static_cast<int>(args.size()), args.data());
    } catch (const CLI::ParseError& e) {
        const int code = app.exit(e);
        return code == 0 ? 0 : k_exit_invalid;
    }
    auto policy = to_policy(gate.flags.policy);
    if (!policy) return say(k_exit_invalid, policy.error().message);
    gate.policy = std::move(*policy);
    if (auto sha = jobs::parse_sha(gate.flags.sha); !sha)
        return say(k_exit_invalid, "--sha: " + sha.error().message);
    if (auto base = jobs::parse_sha(gate.flags.base_sha); !gate.flags.base_sha.empty() && !base)
        return say(k_exit_invalid, "--base-sha: " + base.error().message);
    auto remote = jobs::parse_remote(gate.flags.repo);
    if (!remote) return say(k_exit_invalid, "--repo: " + remote.error().message);
    if (const char* token = std::getenv(k_token_variable); token && *token) {
        gate.token = jobs::GitToken{std::string(token)};  // fixed: never refreshed
        gate.masker.add_secret(token);
    }
    auto job_sandbox = job_sandbox_from_environment(NeedWorkspace::yes);
    if (!job_sandbox) return say(k_exit_invalid, job_sandbox.error().message);
    gate.job_sandbox = std::move(*job_sandbox);
    if (auto code = prepare_state(gate)) return *code;
    if (auto code = prepare_reporter(gate)) return *code;
    // A private CA (OpenSSL's SSL_CERT_FILE) holds for https remotes too: libgit2's TLS
    // backend does not read the variable itself.
    if (const char* ca_file = std::getenv("SSL_CERT_FILE");
        ca_file && *ca_file && remote->kind == jobs::RemoteKind::https)
        if (auto trusted = jobs::set_tls_ca_file(ca_file); !trusted)
            return say(k_exit_invalid, "SSL_CERT_FILE: " + trusted.error().message);
    if (auto code = prepare_git_token(gate, *remote)) return *code;
    if (gate.job_sandbox) {
        auto executor = broker_executor(*gate.job_sandbox, &gate.policy);
        if (!executor) return say(k_exit_invalid, executor.error().message);
        gate.executor = std::move(*executor);
        std::fprintf(stderr, "sandgate gate: every step runs in the job sandbox %s\n",
                     gate.job_sandbox->identity.c_str());
    } else {
        gate.executor = recording_executor(gate.masker);  // a job of the agent: its evidence
    }
    return run_gate(gate);
}

}  // namespace agent
