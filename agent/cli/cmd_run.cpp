// sandgate run: a repository's GitHub Actions workflows, run locally the way nektos/act does,
// every step through sandbox::run. Exit 0 when every selected job succeeded or was skipped,
// 1 when one failed, 2 when a workflow or the command line is invalid (nothing ran), 128+N
// when SIGINT/SIGTERM/SIGHUP (signal N) cancelled the run.
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <semaphore>
#include <string>
#include <thread>
#include <vector>

#include "agent/cli/action_options.hpp"
#include "agent/cli/assignments.hpp"
#include "agent/cli/builtin_options.hpp"
#include "agent/cli/cli11.hpp"
#include "agent/cli/commands.hpp"
#include "agent/cli/interrupts.hpp"
#include "agent/cli/job_executor.hpp"
#include "agent/cli/policy_options.hpp"
#include "agent/cli/run_list.hpp"
#include "agent/cli/run_setup.hpp"
#include "agent/sandboxes/leg_sandboxes.hpp"
#include "common/temp_dir.hpp"
#include "jobs/git/changed_paths.hpp"
#include "jobs/git/checkout.hpp"
#include "jobs/git/git_mirror.hpp"
#include "jobs/git/git_remove.hpp"
#include "jobs/run/dotenv.hpp"
#include "jobs/run/log.hpp"
#include "jobs/run/masker.hpp"
#include "jobs/run/run_report.hpp"
#include "jobs/run/workflow_runner.hpp"
#include "jobs/workflow/runner_labels.hpp"
#include "jobs/workflow/workflow_events.hpp"

namespace agent {
namespace {

constexpr int k_exit_failed = 1;
constexpr int k_exit_invalid = 2;

struct RunFlags {
    std::string event = "push";
    std::string workflows = ".github/workflows";
    std::vector<std::string> jobs;
    std::string event_file;
    std::vector<std::string> secrets;
    std::vector<std::string> secret_files;
    std::vector<std::string> vars;
    std::vector<std::string> env;
    std::vector<std::string> env_files;
    std::vector<std::string> inputs;
    std::vector<std::string> matrix;
    std::vector<std::string> labels;
    std::string actor = "sandgate";
    bool list = false;
    std::string report;
    std::string directory;
    PolicyOptions policy;         // --sandbox, --network and the wrap's flags, shared with exec
    ActionFlags actions;          // --actions-dir, --actions-source, --node
    BuiltinFlags builtins;        // --cache-dir, --cache-max-*, --artifacts-dir
    bool wrap_each_step = false;  // a fresh wrap per step instead of one sandbox per job leg
    bool bind = false;            // the repository directory itself as every leg's workspace
};

// A repeatable option takes one value per use (as policy_options does), so that the event may
// stand anywhere: `-j build --matrix os:linux push` runs push.
void add_flags(CLI::App& app, RunFlags& f) {
    app.add_option("event", f.event, "the event to run (push); anywhere among the flags");
    app.add_option("-W,--workflows", f.workflows,
                   "a workflow file or a directory of them (.github/workflows)");
    app.add_option("-j,--job", f.jobs, "run this job (and what it needs); repeatable")
        ->allow_extra_args(false);
    app.add_option("-e,--eventpath", f.event_file, "the event payload, a JSON file");
    add_assignment_option(app, "-s,--secret", f.secrets,
                          "NAME=VALUE (or NAME, from the environment); repeatable");
    app.add_option("--secret-file", f.secret_files, "secrets from a .env-format file; repeatable")
        ->allow_extra_args(false);
    add_assignment_option(app, "--var", f.vars, "NAME=VALUE for the vars context; repeatable");
    add_assignment_option(app, "--env", f.env, "NAME=VALUE added to the workflow env; repeatable");
    app.add_option("--env-file", f.env_files, "workflow env from a .env-format file; repeatable")
        ->allow_extra_args(false);
    add_assignment_option(app, "--input", f.inputs,
                          "NAME=VALUE for workflow_dispatch/workflow_call inputs; repeatable");
    app.add_option("--matrix", f.matrix,
                   "KEY:VALUE: run only matrix legs with these values; repeatable")
        ->allow_extra_args(false);
    app.add_option("--label", f.labels,
                   "a runner label runs-on may ask for (adds to the defaults); repeatable")
        ->allow_extra_args(false);
    app.add_option("-a,--actor", f.actor, "github.actor (sandgate)");
    app.add_flag("-l,--list", f.list,
                 "list the workflows the event selects, each job's runs-on and legs and whether it "
                 "runs; run nothing");
    app.add_option("--report", f.report, "write a JSON report of every job and step to FILE");
    app.add_option("-C,--directory", f.directory, "the repository directory (the current one)");
    app.add_flag("-b,--bind", f.bind,
                 "every job leg works in the repository directory itself, instead of a copy of "
                 "its own");
    add_policy_options(app, f.policy);
    app.add_flag("--wrap-each-step", f.wrap_each_step,
                 "a fresh wrap for each step, instead of one sandbox per job leg its steps share");
    add_action_options(app, f.actions);
    add_builtin_options(app, f.builtins);
}

// The per-run scratch directory, removed when the run ends.
class TempRoot {
public:
    common::Expected<std::filesystem::path> create() {
        auto made = SANDGATE_TRY(common::make_host_temp_dir("sandgate-run-"));
        m_path = made;
        auto opened = SANDGATE_TRY(sandbox::SafeDir::open_trusted(m_path, "the run's temp root"));
        m_dir = std::make_shared<const sandbox::SafeDir>(std::move(opened));
        return m_path;
    }
    // The directory, opened when it was made (before any step ran).
    std::shared_ptr<const sandbox::SafeDir> dir() const { return m_dir; }
    ~TempRoot() {
        m_dir.reset();
        if (!m_path.empty()) (void)jobs::remove_tree(m_path);  // links unlinked, never followed
    }

private:
    std::filesystem::path m_path;
    std::shared_ptr<const sandbox::SafeDir> m_dir;
};

struct Prepared {
    jobs::RunSettings settings;
    std::vector<jobs::Workflow> workflows;
    std::vector<std::string> skipped_files;  // the workflows the event's filters leave out
};

int invalid(const std::string& message) {
    std::fprintf(stderr, "sandgate run: %s\n", message.c_str());
    return k_exit_invalid;
}

// Fills `settings` from the flags; returns an error message or "".
std::string collect_values(const RunFlags& f, jobs::RunSettings& settings) {
    for (const auto& file : f.secret_files) {
        auto values = jobs::load_dotenv(file);
        if (!values) return "--secret-file " + values.error().message;
        for (auto& [name, value] : *values) settings.secrets.set(name, value);
    }
    auto secrets = parse_assignments(f.secrets, "-s", BareName::from_environment);
    if (!secrets) return secrets.error().message;
    for (auto& [name, value] : *secrets) settings.secrets.set(name, value);
    for (const auto& file : f.env_files) {
        auto values = jobs::load_dotenv(file);
        if (!values) return "--env-file " + values.error().message;
        for (auto& pair : *values) settings.env.push_back(pair);
    }
    auto env = parse_assignments(f.env, "--env", BareName::refused);
    if (!env) return env.error().message;
    settings.env.insert(settings.env.end(), env->begin(), env->end());
    auto vars = parse_assignments(f.vars, "--var", BareName::refused);
    if (!vars) return vars.error().message;
    for (auto& [name, value] : *vars) settings.vars.set(name, value);
    auto inputs = parse_assignments(f.inputs, "--input", BareName::refused);
    if (!inputs) return inputs.error().message;
    for (auto& [name, value] : *inputs) settings.inputs.set(name, value);
    for (const auto& text : f.matrix) {
        auto pair = parse_matrix_filter(text);
        if (!pair) return pair.error().message;
        settings.matrix_filter.push_back(*pair);
    }
    return "";
}

// Everything before anything runs; on error prints it and returns the exit code.
std::optional<int> prepare(const RunFlags& f, Prepared& out) {
    std::error_code ec;
    const auto cwd = std::filesystem::current_path(ec);
    jobs::RunSettings& settings = out.settings;
    settings.repository =
        f.directory.empty() ? cwd : std::filesystem::absolute(f.directory, ec).lexically_normal();
    if (!std::filesystem::is_directory(settings.repository, ec))
        return invalid("-C " + f.directory + ": not a directory");
    // A physical path: the workspace is reached through descriptors that refuse links
    // (sandbox/access/safe_access.hpp), and a link in the caller's own path is the caller's.
    settings.repository = std::filesystem::canonical(settings.repository, ec);
    if (ec) return invalid("-C " + f.directory + ": " + ec.message());
    settings.event_name = f.event;
    settings.actor = f.actor;
    settings.labels = jobs::default_runner_labels();
    settings.labels.insert(settings.labels.end(), f.labels.begin(), f.labels.end());
    settings.job_filter = f.jobs;
    auto policy = to_policy(f.policy);
    if (!policy) return invalid(policy.error().message);
    settings.policy = std::move(*policy);
    settings.host = sandbox::current_environment();
    if (auto message = collect_values(f, settings); !message.empty()) return invalid(message);
    settings.repo = jobs::read_repo_info(settings.repository);
    auto event = load_event(f.event_file.empty() ? std::filesystem::path()
                                                 : std::filesystem::absolute(f.event_file, ec));
    if (!event) return invalid(event.error().message);
    settings.event =
        f.event_file.empty() ? synthesized_event(settings.event_name, settings.repo) : *event;
    if (!settings.inputs.empty()) {
        // act puts --input values in the payload too (github.event.inputs).
        jobs::Object inputs;
        if (const jobs::Value* given = settings.event.get("inputs"); given && given->is_object())
            inputs = given->as_object();
        for (const auto& [name, value] : settings.inputs) inputs.set(name, value);
        settings.event.mutable_object().set("inputs", jobs::Value(std::move(inputs)));
    }
    auto files = workflow_files(settings.repository, f.workflows);
    if (!files) return invalid(files.error().message);
    auto workflows = load_workflows(settings.repository, *files, jobs::Dialect::act);
    if (!workflows) return invalid(workflows.error().message);
    // paths filters diff the commits the payload names in the repository (-C); a diff that
    // cannot be made leaves them unapplied (the workflow runs) with a warning.
    std::vector<std::string> files_loaded;
    for (const auto& workflow : *workflows) files_loaded.push_back(workflow.file);
    auto selection = jobs::select_for_event(std::move(*workflows), settings.event_name,
                                            settings.event, settings.repository);
    for (const auto& warning : selection.warnings)
        std::fprintf(stderr, "sandgate run: warning: %s\n", warning.c_str());
    out.workflows = std::move(selection.workflows);
    for (const auto& file : files_loaded) {
        if (std::ranges::none_of(out.workflows,
                                 [&](const jobs::Workflow& w) { return w.file == file; }))
            out.skipped_files.push_back(file);
    }
    for (const auto& id : f.jobs) {
        const bool known = std::ranges::any_of(
            out.workflows, [&](const jobs::Workflow& w) { return w.find_job(id) != nullptr; });
        if (!known)
            return invalid("-j " + id + ": no job with that id in the workflows '" + f.event +
                           "' selects");
    }
    if (!f.jobs.empty()) {
        std::erase_if(out.workflows, [&](const jobs::Workflow& w) {
            return std::ranges::none_of(
                f.jobs, [&](const std::string& id) { return w.find_job(id) != nullptr; });
        });
    }
    return std::nullopt;
}

// One line per job leg, named by its workflow file (jobs of the same name in two workflows
// stay apart), a failed one with its failing step and reason.
void print_summary(const jobs::RunReport& report) {
    for (const auto& workflow : report.workflows) {
        for (const auto& job : workflow.jobs) {
            const std::string reason = jobs::failure_reason(job);
            std::printf("sandgate run: %-9s %s: %s%s%s\n",
                        std::string(jobs::to_string(job.conclusion)).c_str(), workflow.file.c_str(),
                        job.name.c_str(), reason.empty() ? "" : ": ", reason.c_str());
        }
    }
    std::fflush(stdout);
}

}  // namespace

int run_command(CommandArgs args) {
    CLI::App app{
        "sandgate run: run a repository's GitHub Actions workflows locally, every step in the "
        "sandbox"};
    app.name("sandgate run");
    RunFlags flags;
    add_flags(app, flags);
    try {
        app.parse(static_cast<int>(args.size()), args.data());
    } catch (const CLI::ParseError& e) {
        const int code = app.exit(e);
        return code == 0 ? 0 : k_exit_invalid;
    }
    Prepared prepared;
    if (auto code = prepare(flags, prepared)) return *code;
    if (flags.list) {
        print_run_list(stdout, prepared.settings, prepared.workflows, prepared.skipped_files);
        return 0;
    }
    jobs::RunSettings& settings = prepared.settings;
    // Remote actions, resolved (and fetched when missing) before any job starts.
    auto actions = make_action_resolver(flags.actions, jobs::MirrorCache::default_state_dir(),
                                        settings.repository);
    if (!actions) return invalid(actions.error().message);
    resolve_run_actions(**actions, prepared.workflows, settings.repository, "sandgate run");
    settings.node = flags.actions.node;
    TempRoot temp;
    auto temp_path = temp.create();
    if (!temp_path) return invalid(temp_path.error().message);
    settings.temp_root = *temp_path;
    settings.temp_root_dir = temp.dir();
    jobs::Masker masker;
    for (const auto& [name, value] : settings.secrets) masker.add_secret(value.to_display_string());
    jobs::ConsoleLog log(stdout);
    // Each leg's workspace a copy of its own (act's default), or with --bind the directory.
    jobs::DirectoryWorkspace bound(settings.repository, settings.repo.repository);
    std::unique_ptr<jobs::CopyWorkspace> copies;
    if (!flags.bind) {
        auto made = jobs::CopyWorkspace::create(settings.repository, settings.repo.repository);
        if (!made) return invalid(made.error().message);
        copies = std::move(*made);
    }
    jobs::WorkspaceProvider& workspace =
        copies ? static_cast<jobs::WorkspaceProvider&>(*copies) : bound;
    std::counting_semaphore<> legs(
        std::max<std::ptrdiff_t>(2, std::thread::hardware_concurrency()));
    // Started by the agent with a job sandbox: every step is an exec request to its broker;
    // started by it without one: every step leaves its evidence on the job's record.
    const auto executor = broker_executor_from_environment(masker);
    jobs::RunServices services{log, masker, workspace, legs, nullptr, executor.get()};
    // Run by hand: one persistent sandbox per job leg (agent/sandboxes/leg_sandboxes.hpp).
    const auto leg_sandboxes =
        executor || flags.wrap_each_step ? nullptr : open_leg_sandboxes(settings, "sandgate run");
    services.leg_executors = leg_sandboxes.get();
    // SIGINT/SIGTERM/SIGHUP cancel the run: the steps' trees are stopped, the jobs conclude
    // cancelled, the report is written, and sandgate exits 128+N.
    auto interrupts = InterruptGuard::install();
    if (!interrupts) return invalid(interrupts.error().message);
    services.cancel = &(*interrupts)->token();
    services.actions = actions->get();
    auto builtins =
        open_builtin_stores(flags.builtins, jobs::MirrorCache::default_state_dir(), flags.report);
    if (!builtins) return invalid(builtins.error().message);
    services.caches = &(*builtins)->caches();
    services.artifacts = &(*builtins)->artifacts();
    jobs::RunReport report;
    report.event = settings.event_name;
    const auto started = std::chrono::steady_clock::now();
    for (const auto& workflow : prepared.workflows) {
        auto inputs = top_level_inputs(settings, workflow);
        if (!inputs) return invalid(inputs.error().message);
        report.workflows.push_back(
            jobs::run_workflow(settings, services, workflow, *inputs, settings.secrets));
    }
    report.duration = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - started);
    report.actions = (*actions)->lock();
    for (const auto& workflow : report.workflows) {
        for (const auto& job : workflow.jobs) {
            if (job.conclusion != jobs::Outcome::failure) continue;
            report.exit_code = k_exit_failed;
            std::fprintf(stderr, "sandgate run: job '%s' failed (%s): %s\n", job.id.c_str(),
                         workflow.file.c_str(), jobs::failure_reason(job).c_str());
        }
    }
    print_summary(report);
    if (prepared.workflows.empty())
        std::fprintf(stderr, "sandgate run: no workflow runs on '%s'\n",
                     settings.event_name.c_str());
    if (!flags.report.empty()) {
        if (auto written = jobs::write_report(flags.report, report, masker); !written) {
            std::fprintf(stderr, "sandgate run: %s\n", written.error().message.c_str());
            return k_exit_failed;
        }
    }
    if (const auto sig = (*interrupts)->received()) {
        std::fprintf(
            stderr, "sandgate run: stopped by signal %d: the running steps were cancelled\n", *sig);
        return 128 + *sig;
    }
    return report.exit_code;
}

}  // namespace agent
