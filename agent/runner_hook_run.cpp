// Carrying out the runner's container-hook commands (see runner_hook.hpp).
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "agent/random_id.hpp"
#include "agent/runner_hook.hpp"
#include "jobs/git_remove.hpp"
#include "sandbox/identity.hpp"
#include "sandbox/safe_access.hpp"

namespace agent {
namespace {

using sandbox::ErrorKind;
using sandbox::fail;

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
sandbox::Expected<void> write_atomically(const std::filesystem::path& path,
                                         const std::string& text) {
    auto dir = sandbox::SafeDir::open_trusted(path.parent_path().empty() ? "." : path.parent_path(),
                                              "the response file's directory");
    if (!dir) return std::unexpected(dir.error());
    return dir->replace_file(path.filename().string(), text, {0644, std::nullopt},
                             "the response file");
}

sandbox::Expected<int> prepare_job(const HookInput& input, const HookOptions& options) {
    if (!input.services.empty())
        return fail(ErrorKind::invalid_input,
                    "args.services: service containers need a container engine, which sandgate's "
                    "hook does not run (service '" +
                        input.services.front() + "')");
    auto id = random_id("", 16);
    if (!id) return std::unexpected(id.error());
    HookJob job = input.prepare;
    job.id = *id;
    job.scratch = options.state_dir / "hook-jobs" / job.id;
    std::error_code ec;
    // trusted path: the hook's state
    std::filesystem::create_directories(job.scratch.parent_path(), ec);
    if (ec)
        return fail(ErrorKind::permanent,
                    "cannot create " + job.scratch.parent_path().string() + ": " + ec.message());
    // The job's scratch (HOME, TMPDIR) is the sandbox's: made for its host identity.
    auto scratch = sandbox::SafeDir::make_trusted(
        job.scratch, {0700, sandbox::sandbox_owner(options.policy)}, "the job's scratch");
    if (!scratch) return std::unexpected(scratch.error());
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
            {"scratch", job.scratch.string()},
            {"mounts", mounts_json(job.mounts)},
            {"env", job.env}}}}},
        {"context",
         {{"container", {{"id", job.id}, {"network", "sandgate-" + network}}},
          {"services", nlohmann::ordered_json::object()}}},
        {"isAlpine", false}};
    if (auto ok = write_atomically(input.response_file, response.dump()); !ok)
        return std::unexpected(ok.error());
    return 0;
}

// The host path of a container path, through the longest mount that holds it.
sandbox::Expected<std::filesystem::path> host_path(const std::vector<HookMount>& mounts,
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

class LiveOutput : public sandbox::OutputObserver {
public:
    void on_output(sandbox::Stream stream, std::string_view chunk) override {
        std::FILE* to = stream == sandbox::Stream::out ? stdout : stderr;
        std::fwrite(chunk.data(), 1, chunk.size(), to);
        std::fflush(to);
    }
};

sandbox::Expected<int> run_step(const HookInput& input, const HookOptions& options) {
    if (!input.state)
        return fail(ErrorKind::invalid_input,
                    "state.sandgate: missing (prepare_job did not run through sandgate)");
    const HookJob& job = *input.state;
    const HookStep& step = input.step;
    sandbox::RunRequest request;
    request.policy = options.policy;
    request.policy.scratch = job.scratch;  // HOME and TMPDIR persist across the job's steps
    const auto& mounts =
        input.command == HookCommand::run_container_step ? step.mounts : job.mounts;
    if (input.command == HookCommand::run_container_step) {
        if (options.policy.mode != sandbox::SandboxMode::container)
            return fail(ErrorKind::unavailable,
                        "run_container_step: image '" + step.image +
                            "' needs a container runtime; start the hook with "
                            "--sandbox container");
        request.policy.image = step.image;
    }
    for (const auto& m : mounts) request.policy.binds.push_back({m.source, m.target, m.access});
    auto cwd = host_path(mounts, step.working_directory);
    if (!cwd) return std::unexpected(cwd.error());
    request.cwd = *cwd;
    std::string path;
    for (const auto& p : step.prepend_path) path += p + ":";
    path += k_default_path;
    std::map<std::string, std::string> env = job.env;
    for (const auto& [name, value] : step.env) env[name] = value;
    env["PATH"] = path;
    request.env.assign(env.begin(), env.end());
    request.argv.push_back(step.entry_point);
    request.argv.insert(request.argv.end(), step.entry_point_args.begin(),
                        step.entry_point_args.end());
    request.timeout = options.step_timeout;
    LiveOutput live;
    request.observer = &live;
    const sandbox::RunResult result = sandbox::run(request);
    if (result.error && result.error->kind != sandbox::RunErrorKind::timeout)
        spdlog::error("{}", result.error->message);
    return result.exit_status();
}

sandbox::Expected<int> cleanup_job(const HookInput& input, const HookOptions& options) {
    if (!input.state) return 0;  // nothing of ours to clean
    const auto expected = options.state_dir / "hook-jobs" / input.state->id;
    if (input.state->scratch.lexically_normal() != expected.lexically_normal())
        return fail(ErrorKind::invalid_input,
                    "state.sandgate.scratch: not this hook's job directory");
    std::error_code ec;
    if (!std::filesystem::exists(std::filesystem::symlink_status(expected, ec))) return 0;
    if (auto removed = jobs::remove_tree(expected); !removed)
        return std::unexpected(removed.error());
    return 0;
}

}  // namespace

sandbox::Expected<int> run_hook(const HookInput& input, const HookOptions& options) {
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
