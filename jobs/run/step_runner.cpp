#include "jobs/run/step_runner.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <system_error>
#include <utility>

#include "jobs/run/shell.hpp"
#include "sandbox/wrap/identity.hpp"

namespace jobs {
namespace {

using Clock = std::chrono::steady_clock;

// Removes the step's script and file-command files however run_step() returns, through the
// directory fds they were created in.
class ScratchFiles {
public:
    ScratchFiles() = default;
    ScratchFiles(const ScratchFiles&) = delete;
    ScratchFiles& operator=(const ScratchFiles&) = delete;
    ~ScratchFiles() {
        if (m_files) m_files->remove();
        if (m_temp && !m_script.empty()) (void)m_temp->remove(m_script, "the step's script");
    }
    void set_files(FileCommandFiles files) { m_files.emplace(std::move(files)); }
    FileCommandFiles& files() { return *m_files; }
    void set_script(const sandbox::SafeDir* temp, std::string name) {
        m_temp = temp;
        m_script = std::move(name);
    }

private:
    std::optional<FileCommandFiles> m_files;
    const sandbox::SafeDir* m_temp = nullptr;
    std::string m_script;
};

// RUNNER_TEMP through a directory fd: its parent is the trusted side's own, RUNNER_TEMP itself
// and everything in it the steps' (a step that replaced it by a link is refused here).
common::Expected<sandbox::SafeDir> open_temp(const StepContext& context,
                                             const sandbox::CreateOptions& options) {
    const sandbox::CreateOptions dirs{0755, options.owner};
    const auto name = context.temp_dir.filename().string();
    if (context.temp_root != nullptr)
        return context.temp_root->make_dirs(name, dirs, "$RUNNER_TEMP");
    const auto parent = context.temp_dir.parent_path();
    auto root =
        sandbox::SafeDir::open_trusted(parent.empty() ? "." : parent, "the runner's temp root");
    if (!root) return std::unexpected(root.error());
    return root->make_dirs(name, dirs, "$RUNNER_TEMP");
}

// The working directory, when it lies in the workspace, must be a real directory there (not a
// link a step planted); elsewhere the wrap's own checks decide.
std::optional<std::string> working_directory_error(const StepSpec& spec,
                                                   const StepContext& context) {
    if (spec.working_directory.empty()) return std::nullopt;
    const std::string message = "working-directory '" + spec.working_directory.string() +
                                "' does not exist or is not a directory";
    const auto relative =
        context.workspace.empty()
            ? std::nullopt
            : sandbox::relative_beneath(context.workspace, spec.working_directory);
    if (!relative) {
        std::error_code ec;
        if (!std::filesystem::is_directory(spec.working_directory, ec)) return message;
        return std::nullopt;
    }
    auto workspace = sandbox::SafeDir::open_trusted(context.workspace, "the workspace");
    if (!workspace) return workspace.error().message;
    if (*relative == ".") return std::nullopt;
    if (!workspace->open_dir(*relative, "working-directory")) return message;
    return std::nullopt;
}

// Feeds both streams, line by line, through the step's command processor.
class StepObserver final : public sandbox::OutputObserver {
public:
    explicit StepObserver(CommandProcessor& processor)
        : m_out([&processor](std::string_view line) { processor.process_line(line); }),
          m_err([&processor](std::string_view line) { processor.process_line(line); }) {}

    void on_output(sandbox::Stream stream, std::string_view chunk) override {
        (stream == sandbox::Stream::out ? m_out : m_err).feed(chunk);
    }
    void flush() {
        m_out.flush();
        m_err.flush();
    }

private:
    LineSplitter m_out;
    LineSplitter m_err;
};

void merge_into(sandbox::Environment& env, const sandbox::Environment& values) {
    for (const auto& [name, value] : values) set_named(env, name, value);
}

const std::string* lookup(const sandbox::Environment& env, std::string_view name) {
    return find_named(env, name);
}

Annotation error_annotation(std::string message) {
    Annotation annotation;
    annotation.level = AnnotationLevel::error;
    annotation.message = std::move(message);
    return annotation;
}

std::string describe_timeout(std::chrono::milliseconds timeout) {
    const auto ms = timeout.count();
    if (ms % 60000 == 0) {
        const auto minutes = ms / 60000;
        return std::to_string(minutes) + (minutes == 1 ? " minute" : " minutes");
    }
    if (ms < 1000) return std::to_string(ms) + " ms";
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.1f s", static_cast<double>(ms) / 1000.0);
    return seconds;
}

void log_finish(const StepContext& context, const StepResult& result) {
    const auto& step = context.label.step;
    if (result.outcome == Outcome::cancelled) {
        context.log->status(context.label, StatusKind::cancelled, "Cancelled - " + step);
    } else if (result.outcome == Outcome::success) {
        context.log->status(context.label, StatusKind::success, "Success - " + step);
    } else if (result.conclusion == Outcome::success) {
        context.log->status(context.label, StatusKind::failure,
                            "Failure - " + step + " (continue-on-error)");
    } else {
        context.log->status(context.label, StatusKind::failure, "Failure - " + step);
    }
}

// The step could not start: nothing ran.
StepResult not_started(const StepSpec& spec, const StepContext& context,
                       const std::string& message) {
    StepResult result;
    result.outcome = Outcome::failure;
    result.error = context.masker->mask(message);
    result.annotations.push_back(error_annotation(result.error));
    context.log->annotation(context.label, result.annotations.back());
    result.conclusion =
        spec.continue_on_error == ContinueOnError::yes ? Outcome::success : Outcome::failure;
    log_finish(context, result);
    return result;
}

void record_run(const sandbox::RunResult& run, StepResult& result) {
    result.duration = run.duration;
    result.stdout_bytes = run.out.bytes;
    result.stderr_bytes = run.err.bytes;
    result.truncated = run.out.truncated || run.err.truncated;
    result.skip_markers = run.skip_markers;
    result.timed_out = run.timed_out;
    result.sandbox_json = sandbox::posture_text(run);
    result.egress = run.egress;
    if (run.exit_code || run.signal || run.timed_out) result.exit_code = run.exit_status();
}

// The step's command line: its own argv, or the shell's argv for its script, which is
// written under temp_dir and removed with the scratch files.
common::Expected<std::vector<std::string>> step_argv(const StepSpec& spec,
                                                     const sandbox::SafeDir& temp,
                                                     const sandbox::CreateOptions& options,
                                                     const sandbox::Environment& env,
                                                     ScratchFiles& scratch) {
    if (!spec.argv.empty()) return spec.argv;
    const auto* path = lookup(env, "PATH");
    auto command =
        SANDGATE_TRY(prepare_script(spec.shell, spec.script, temp, options,
                                    path ? std::string_view(*path) : std::string_view()));
    scratch.set_script(&temp, command.script_name);
    return std::move(command.argv);
}

// The runner's switches in the step's environment: ACTIONS_ALLOW_UNSECURE_COMMANDS allows
// set-env and add-path, ACTIONS_STEP_DEBUG echoes commands.
UnsecureCommands unsecure_commands(const sandbox::Environment& env) {
    const auto* unsecure = lookup(env, "ACTIONS_ALLOW_UNSECURE_COMMANDS");
    return unsecure && parse_bool_true(*unsecure) ? UnsecureCommands::enabled
                                                  : UnsecureCommands::disabled;
}

Echo command_echo(const sandbox::Environment& env) {
    const auto* step_debug = lookup(env, "ACTIONS_STEP_DEBUG");
    return step_debug && parse_bool_true(*step_debug) ? Echo::on : Echo::off;
}

// What the sandbox runs; a wrapped step may also write the step's temp dir (its script
// and file commands live there).
sandbox::RunRequest step_request(const StepSpec& spec, const StepContext& context,
                                 std::vector<std::string> argv, const sandbox::Environment& env,
                                 StepObserver& observer) {
    sandbox::RunRequest request;
    request.argv = std::move(argv);
    request.cwd = spec.working_directory;
    request.env = env;
    request.timeout = spec.timeout;
    request.output_limit = context.output_limit;
    request.policy = context.policy;
    if (request.policy.mode != sandbox::SandboxMode::off &&
        std::find(request.policy.writable.begin(), request.policy.writable.end(),
                  context.temp_dir) == request.policy.writable.end()) {
        request.policy.writable.push_back(context.temp_dir);
    }
    request.observer = &observer;
    request.cancel = context.cancel;
    return request;
}

// Folds the live command effects and the file commands into the result and the job.
void apply_effects(CommandEffects& effects, FileCommandResults& files, const StepContext& context,
                   StepResult& result, JobState& job, std::vector<std::string>& failures) {
    const Masker& masker = *context.masker;
    merge_into(job.env, effects.env);
    merge_into(job.env, files.env);
    for (const auto& dir : effects.path) job.path.add(dir);
    for (const auto& dir : files.path) job.path.add(dir);
    result.outputs = std::move(effects.outputs);
    merge_into(result.outputs, files.outputs);
    result.state = std::move(effects.state);
    merge_into(result.state, files.state);
    result.annotations = std::move(effects.annotations);
    for (auto& annotation : files.annotations) {
        annotation.message = masker.mask(annotation.message);
        context.log->annotation(context.label, annotation);
        result.annotations.push_back(std::move(annotation));
    }
    result.summary = masker.mask(files.summary);
    failures.insert(failures.end(), effects.failures.begin(), effects.failures.end());
    for (const auto& failure : files.failures) failures.push_back(masker.mask(failure));
}

void finish_outcome(const StepSpec& spec, const sandbox::RunResult& run, StepResult& result,
                    std::vector<std::string>& failures, const StepContext& context) {
    if (run.error && run.error->kind == sandbox::RunErrorKind::cancelled) {
        // The runner's "The operation was canceled.": neither a success nor a failure.
        result.outcome = result.conclusion = Outcome::cancelled;
        result.error = "The operation was canceled.";
        result.annotations.push_back(error_annotation(result.error));
        context.log->annotation(context.label, result.annotations.back());
        return;
    }
    if (run.timed_out) {
        failures.insert(failures.begin(),
                        "The step has timed out after " +
                            describe_timeout(spec.timeout.value_or(std::chrono::milliseconds(0))) +
                            ".");
    } else if (run.error) {
        failures.insert(failures.begin(), context.masker->mask(run.error->message));
    } else if (run.signal) {
        failures.insert(failures.begin(),
                        "Process was killed by signal " + std::to_string(*run.signal) + ".");
    } else if (run.exit_code && *run.exit_code != 0) {
        failures.insert(failures.begin(),
                        "Process completed with exit code " + std::to_string(*run.exit_code) + ".");
    }
    if (!failures.empty() &&
        (run.timed_out || run.error || run.signal || (run.exit_code && *run.exit_code != 0))) {
        result.annotations.push_back(error_annotation(failures.front()));
        context.log->annotation(context.label, result.annotations.back());
    }
    result.outcome = failures.empty() ? Outcome::success : Outcome::failure;
    std::string joined;
    for (const auto& failure : failures) joined += (joined.empty() ? "" : " ") + failure;
    result.error = joined;
    result.conclusion =
        result.outcome == Outcome::failure && spec.continue_on_error == ContinueOnError::yes
            ? Outcome::success
            : result.outcome;
}

}  // namespace

std::string_view to_string(Outcome outcome) {
    switch (outcome) {
        case Outcome::success:
            return "success";
        case Outcome::failure:
            return "failure";
        case Outcome::cancelled:
            return "cancelled";
        case Outcome::skipped:
            return "skipped";
    }
    return "failure";
}

std::string input_variable_name(std::string_view input) {
    std::string name = "INPUT_";
    for (const char c : input) {
        name += c == ' ' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    return name;
}

sandbox::Environment input_environment(const NamedValues& inputs) {
    sandbox::Environment env;
    for (const auto& [name, value] : inputs) set_named(env, input_variable_name(name), value);
    return env;
}

sandbox::Environment state_environment(const NamedValues& state) {
    sandbox::Environment env;
    for (const auto& [name, value] : state) set_named(env, "STATE_" + name, value);
    return env;
}

sandbox::Environment step_environment(const sandbox::Environment& host, const JobState& job,
                                      const sandbox::Environment& step_env,
                                      const sandbox::Environment& extra) {
    sandbox::Environment set = job.env;
    merge_into(set, step_env);
    merge_into(set, extra);
    const std::string* base = lookup(set, "PATH");
    if (base == nullptr) base = lookup(host, "PATH");
    const auto path = job.path.apply(base ? std::string_view(*base) : std::string_view());
    if (!path.empty()) set_named(set, "PATH", path);
    return sandbox::child_environment(host, {}, set);
}

StepResult run_step(const StepSpec& spec, const StepContext& context, JobState& job) {
    const auto started = Clock::now();
    context.log->status(context.label, StatusKind::start, "Run " + context.label.step);
    // Everything the step may write to is created for the sandbox's host identity.
    const sandbox::CreateOptions options{0644, sandbox::sandbox_owner(context.policy)};
    auto temp = open_temp(context, options);
    if (!temp) return not_started(spec, context, temp.error().message);
    ScratchFiles scratch;
    auto files = FileCommandFiles::create(*temp, "_runner_file_commands", options);
    if (!files) return not_started(spec, context, files.error().message);
    scratch.set_files(std::move(*files));

    const auto env = step_environment(context.host, job, spec.env,
                                      file_command_environment(scratch.files().paths()));
    auto argv = step_argv(spec, *temp, options, env, scratch);
    if (!argv) return not_started(spec, context, argv.error().message);
    if (auto error = working_directory_error(spec, context))
        return not_started(spec, context, *error);
    // A step sent elsewhere (the agent's job sandbox, started once) writes as the sandbox's host
    // identity too: what the trusted side put in the workspace since (a checkout) is given to it
    // here, as the wrap does for the trees of each run it starts.
    if (context.executor != nullptr && options.owner && !context.workspace.empty()) {
        auto workspace = sandbox::SafeDir::open_trusted(context.workspace, "the workspace");
        if (!workspace) return not_started(spec, context, workspace.error().message);
        if (auto given = workspace->chown_tree(*options.owner); !given)
            return not_started(spec, context, given.error().message);
    }

    CommandProcessor processor(*context.masker, *context.log, context.label, unsecure_commands(env),
                               command_echo(env));
    processor.set_workspace(context.workspace.string());
    processor.set_action_trees(context.action_trees.string());
    processor.set_matchers(job.matchers);
    StepObserver observer(processor);
    const auto request = step_request(spec, context, std::move(*argv), env, observer);
    const auto run = context.executor ? context.executor->run(request) : sandbox::run(request);
    observer.flush();
    processor.finish();

    StepResult result;
    record_run(run, result);
    auto file_results = scratch.files().read();
    std::vector<std::string> failures;
    apply_effects(processor.effects(), file_results, context, result, job, failures);
    finish_outcome(spec, run, result, failures, context);
    if (result.duration.count() == 0) {
        result.duration =
            std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started);
    }
    log_finish(context, result);
    return result;
}

}  // namespace jobs
