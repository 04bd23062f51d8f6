// Carrying out the runner's container-hook commands (see runner_hook.hpp).
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <iterator>
#include <nlohmann/json.hpp>

#include "agent/cli/random_id.hpp"
#include "agent/hook/runner_hook.hpp"
#include "agent/hook/runner_hook_jobs.hpp"
#include "sandbox/access/safe_access.hpp"
#include "sandbox/wrap/identity.hpp"
#include "sandbox/wrap/mounts.hpp"

namespace agent {
namespace {

using common::ErrorKind;
using common::fail;

constexpr std::string_view k_github_home = "/github/home";
constexpr std::string_view k_default_path =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

nlohmann::ordered_json mounts_json(const std::vector<HookMount>& mounts) {
    auto out = nlohmann::ordered_json::array();
    for (const auto& m : mounts)
        out.push_back({{"sourceVolumePath", m.source},
                       {"targetVolumePath", m.target},
                       {"readOnly", m.access == sandbox::Access::read_only}});
    return out;
}

// Writes next to the destination, then renames, through the directory's fd: the runner never
// reads half a response, and a link planted at either name (the runner's temp directory is
// bound into its steps) is replaced, never followed.
common::Expected<void> write_atomically(const std::filesystem::path& path,
                                        const std::string& text) {
    auto dir = SANDGATE_TRY(sandbox::SafeDir::open_trusted(
        path.parent_path().empty() ? "." : path.parent_path(), "the response file's directory"));
    return dir.replace_file(path.filename().string(), text, {0644, std::nullopt},
                            "the response file");
}

// userMountVolumes come from the workflow's container.volumes, which a pull request controls:
// only a host path within one of --allow-volume's, and then read-only.
common::Expected<std::vector<HookMount>> allowed_user_mounts(const std::vector<HookMount>& asked,
                                                             const HookOptions& options,
                                                             std::string_view field) {
    std::vector<HookMount> out;
    for (const auto& m : asked) {
        const std::filesystem::path source(m.source);
        const bool allowed =
            source.is_absolute() &&
            std::any_of(options.allowed_volumes.begin(), options.allowed_volumes.end(),
                        [&](const std::filesystem::path& root) {
                            return sandbox::path_within(source.lexically_normal(),
                                                        root.lexically_normal());
                        });
        if (!allowed)
            return fail(ErrorKind::invalid_input,
                        std::string(field) + ": volume '" + m.source +
                            "' is not allowed (the workflow's container.volumes; a host admin "
                            "allows a directory with --allow-volume PATH in SANDGATE_HOOK_ARGS)");
        out.push_back({source.lexically_normal().string(), m.target, sandbox::Access::read_only});
    }
    return out;
}

common::Expected<int> prepare_job(const HookInput& input, const HookOptions& options) {
    if (!input.services.empty())
        return fail(ErrorKind::invalid_input,
                    "args.services: service containers need a container engine, which sandgate's "
                    "hook does not run (service '" +
                        input.services.front() + "')");
    auto user =
        allowed_user_mounts(input.prepare_user_mounts, options, "args.container.userMountVolumes");
    if (!user) return std::unexpected(user.error());
    const HookJobs jobs(options.state_dir);
    jobs.reap_stale();  // jobs of a runner that died before their cleanup_job
    const auto owner = process_mark(options.job_owner);
    if (!owner)
        return fail(ErrorKind::invalid_input,
                    "--job-owner: no process " + std::to_string(options.job_owner) + " runs");
    auto id = random_id("", 16);
    if (!id) return std::unexpected(id.error());
    HookJob job = input.prepare;
    job.id = *id;
    job.mounts.insert(job.mounts.end(), user->begin(), user->end());
    // The job's scratch (HOME, TMPDIR) is the sandbox's: made for its host identity.
    (void)SANDGATE_TRY(jobs.create(job.id, *owner, sandbox::sandbox_owner(options.policy)));
    if (!job.image.empty() && options.policy.mode != sandbox::SandboxMode::container)
        spdlog::warn(
            "job image {} is not pulled: steps run on this machine's userland inside the wrap",
            job.image);
    const std::string network =
        options.policy.network == sandbox::NetworkMode::none ? "none" : "host";
    nlohmann::ordered_json response = {
        {"state",
         {{"sandgate",
           {{"job", job.id},
            {"image", job.image},
            {"mounts", mounts_json(job.mounts)},
            {"env", job.env}}}}},
        {"context",
         {{"container", {{"id", job.id}, {"network", "sandgate-" + network}}},
          // The runner's type is a list: an object fails its deserialization, and the job.
          {"services", nlohmann::ordered_json::array()}}},
        {"isAlpine", false}};
    if (auto ok = write_atomically(input.response_file, response.dump()); !ok) {
        (void)jobs.finish(job.id);
        return std::unexpected(ok.error());
    }
    return 0;
}

// The host path of a container path, through the longest mount that holds it.
common::Expected<std::filesystem::path> host_path(const std::vector<HookMount>& mounts,
                                                  const std::filesystem::path& inside) {
    const HookMount* best = nullptr;
    for (const auto& m : mounts) {
        const auto rel = inside.lexically_normal().lexically_relative(m.target);
        if (rel.empty() || *rel.begin() == "..") continue;
        if (!best || m.target.size() > best->target.size()) best = &m;
    }
    if (!best)
        return fail(ErrorKind::invalid_input, "args.workingDirectory: '" + inside.string() +
                                                  "' lies in none of the job's mounts");
    return (std::filesystem::path(best->source) /
            inside.lexically_normal().lexically_relative(best->target))
        .lexically_normal();
}

// HOME inside: the step's or the job's HOME when they set one, else the runner's /github/home
// when it is mounted (the job container's env sets HOME there); else the scratch's.
std::optional<std::filesystem::path> step_home(const HookJob& job, const HookStep& step,
                                               const std::vector<HookMount>& mounts) {
    for (const auto* env : {&step.env, &job.env}) {
        if (auto it = env->find("HOME"); it != env->end() && it->second.starts_with("/"))
            return std::filesystem::path(it->second);
    }
    for (const auto& m : mounts)
        if (std::filesystem::path(m.target).lexically_normal() == k_github_home)
            return std::filesystem::path(k_github_home);
    return std::nullopt;
}

// The wrap starts a command in the host path of its working directory (bound at itself too)
// with the scratch's HOME; a step starts at its container path (GITHUB_WORKSPACE and the like
// say /__w/...) with the job container's HOME. coreutils' env inside does both, by absolute
// path (prependPath is the step's to fill) and after `--`; it looks the entry point up inside,
// where the container paths are, and exits 127/126 as execvp's verdict says.
std::vector<std::string> started_inside(const HookStep& step,
                                        const std::optional<std::filesystem::path>& home,
                                        std::vector<std::string> command) {
    std::vector<std::string> argv = {"/usr/bin/env", "-C", step.working_directory, "--",
                                     "PWD=" + step.working_directory};  // shells trust PWD
    if (home) argv.push_back("HOME=" + home->string());
    argv.insert(argv.end(), std::make_move_iterator(command.begin()),
                std::make_move_iterator(command.end()));
    return argv;
}

// The job's environment, the step's over it, PATH with prependPath (container paths) first.
sandbox::Environment step_environment(const HookJob& job, const HookStep& step) {
    std::string path;
    for (const auto& p : step.prepend_path) path += p + ":";
    path += k_default_path;
    std::map<std::string, std::string> env = job.env;
    for (const auto& [name, value] : step.env) env[name] = value;
    env["PATH"] = path;
    return {env.begin(), env.end()};
}

class LiveOutput : public sandbox::OutputObserver {
public:
    void on_output(sandbox::Stream stream, std::string_view chunk) override {
        std::FILE* to = stream == sandbox::Stream::out ? stdout : stderr;
        std::fwrite(chunk.data(), 1, chunk.size(), to);
        std::fflush(to);
    }
};

// The command: entryPoint and its arguments; a container step with no entry point runs the
// image's own entrypoint with the arguments (the container arm names no --entrypoint).
common::Expected<std::vector<std::string>> step_argv(const HookInput& input) {
    const HookStep& step = input.step;
    std::vector<std::string> argv;
    if (!step.entry_point.empty()) argv.push_back(step.entry_point);
    argv.insert(argv.end(), step.entry_point_args.begin(), step.entry_point_args.end());
    if (argv.empty())
        return fail(ErrorKind::invalid_input,
                    "args.entryPoint: null with no entryPointArgs: the image's default command "
                    "is not known to sandgate's container arm; give the action's `entrypoint:` "
                    "or `args:`");
    return argv;
}

common::Expected<int> run_step(const HookInput& input, const HookOptions& options) {
    if (!input.state)
        return fail(ErrorKind::invalid_input,
                    "state.sandgate: missing (prepare_job did not run through sandgate)");
    const HookJob& job = *input.state;
    const HookStep& step = input.step;
    sandbox::RunRequest request;
    request.policy = options.policy;
    std::vector<HookMount> mounts = job.mounts;
    if (input.command == HookCommand::run_container_step) {
        if (options.policy.mode != sandbox::SandboxMode::container)
            return fail(ErrorKind::unavailable,
                        "run_container_step: image '" + step.image +
                            "' needs a container runtime; start the hook with "
                            "--sandbox container");
        request.policy.image = step.image;
        auto user =
            SANDGATE_TRY(allowed_user_mounts(step.user_mounts, options, "args.userMountVolumes"));
        mounts = step.mounts;
        mounts.insert(mounts.end(), user.begin(), user.end());
    }
    auto argv = step_argv(input);
    if (!argv) return std::unexpected(argv.error());
    request.argv = std::move(*argv);
    const HookJobs jobs(options.state_dir);
    // cleanup_job stops the step through this record should it still run by then.
    const auto record = SANDGATE_TRY(jobs.record_step(job.id));  // held until the step ends
    request.policy.scratch = jobs.scratch(job.id);  // HOME and TMPDIR persist across the steps
    for (const auto& m : mounts) request.policy.binds.push_back({m.source, m.target, m.access});
    auto cwd = host_path(mounts, step.working_directory);
    if (!cwd) return std::unexpected(cwd.error());
    request.cwd = *cwd;
    if (input.command == HookCommand::run_script_step)
        request.argv = started_inside(step, step_home(job, step, mounts), std::move(request.argv));
    request.cancel = options.cancel;
    request.env = step_environment(job, step);
    request.timeout = options.step_timeout;
    LiveOutput live;
    request.observer = &live;
    const sandbox::RunResult result = sandbox::run(request);
    if (result.error && result.error->kind != sandbox::RunErrorKind::timeout)
        spdlog::error("{}", result.error->message);
    return result.exit_status();
}

// Stops whatever of the job still runs and removes its directory; idempotent.
common::Expected<int> cleanup_job(const HookInput& input, const HookOptions& options) {
    if (!input.state) return 0;  // nothing of ours to clean
    SANDGATE_CHECK(HookJobs(options.state_dir).finish(input.state->id));
    return 0;
}

}  // namespace

common::Expected<int> run_hook(const HookInput& input, const HookOptions& options) {
    switch (input.command) {
        case HookCommand::prepare_job:
            return prepare_job(input, options);
        case HookCommand::cleanup_job:
            return cleanup_job(input, options);
        case HookCommand::run_script_step:
        case HookCommand::run_container_step:
            return run_step(input, options);
    }
    return fail(ErrorKind::invalid_input, "unknown hook command");
}

}  // namespace agent
