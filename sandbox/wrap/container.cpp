#include "sandbox/wrap/container.hpp"

#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <nlohmann/json.hpp>

#include "common/temp_dir.hpp"
#include "sandbox/process/limits.hpp"
#include "sandbox/wrap/mounts.hpp"
#include "sandbox/wrap/offline.hpp"
#include "sandbox/wrap/probe.hpp"

namespace sandbox {
namespace {

std::atomic<unsigned> g_counter{0};

class ContainerResources : public WrapResources {
public:
    std::optional<std::filesystem::path> owned_scratch;
    ~ContainerResources() override {
        if (owned_scratch) (void)remove_tree(*owned_scratch);
    }
};

std::string unique_name() {
    char host[64] = {};
    ::gethostname(host, sizeof host - 1);
    return "sandgate-" + std::to_string(::getpid()) + "-" + std::to_string(g_counter.fetch_add(1)) +
           "-" + std::to_string(std::hash<std::string>{}(host) % 100000);
}

Expected<std::filesystem::path> owned_scratch_root() {
    return common::make_host_temp_dir("sandgate-run-");
}

void volume(std::vector<std::string>& argv, const std::filesystem::path& path, const char* mode) {
    argv.insert(argv.end(), {"-v", path.string() + ":" + path.string() + ":" + mode});
}

}  // namespace

Expected<std::filesystem::path> find_container_runtime(const Policy& policy) {
    if (!policy.container_runtime.empty()) {
        if (::access(policy.container_runtime.c_str(), X_OK) != 0)
            return fail(ErrorKind::unavailable, "--container-runtime " +
                                                    policy.container_runtime.string() +
                                                    ": not an executable file");
        return policy.container_runtime;
    }
    for (const char* name : {"podman", "docker"}) {
        if (auto found = find_on_path(name, host_path_list())) return *found;
    }
    return fail(ErrorKind::unavailable,
                "--sandbox container: neither podman nor docker is on PATH; install one, pass "
                "--container-runtime PATH, or use --sandbox bwrap");
}

namespace {

// The run's scratch on the host: --scratch DIR (kept), else a per-run root that `resources`
// removes after the run.
Expected<std::filesystem::path> container_scratch(const Policy& policy,
                                                  ContainerResources& resources) {
    if (policy.scratch) {
        std::error_code ec;
        // trusted path: --scratch, the caller's
        std::filesystem::create_directories(*policy.scratch, ec);
        return checked_bind_path(*policy.scratch, "--scratch", MustExist::yes);
    }
    auto made = owned_scratch_root();
    if (made) resources.owned_scratch = *made;
    return made;
}

// The policy's extra binds as --volume options: read-only, writable, binds, the toolchain cache.
Expected<void> add_policy_volumes(const Policy& policy, std::vector<std::string>& argv) {
    const auto add = [&](const std::filesystem::path& path, std::string_view flag,
                         const char* mode) -> Expected<void> {
        auto checked = SANDGATE_TRY(checked_bind_path(path, flag, MustExist::yes));
        volume(argv, checked, mode);
        return {};
    };
    for (const auto& path : policy.read_only)
        if (auto ok = add(path, "--read-only", "ro"); !ok) return ok;
    for (const auto& path : policy.writable)
        if (auto ok = add(path, "--writable", "rw"); !ok) return ok;
    for (const auto& bind : policy.binds) {  // a host path shown elsewhere (the hooks' /__w)
        auto checked = SANDGATE_TRY(checked_bind_path(bind.source, "bind source", MustExist::yes));
        argv.insert(argv.end(),
                    {"-v", checked.string() + ":" + bind.destination.lexically_normal().string() +
                               ":" + (bind.access == Access::writable ? "rw" : "ro")});
    }
    // The cache's allowlisted directories only, never the whole directory (credentials).
    if (policy.toolchain_cache)
        for (const auto& dir : toolchain_cache_binds(*policy.toolchain_cache))
            if (auto ok = add(dir, "--toolchain-cache", "ro"); !ok) return ok;
    return {};
}

// `run --rm -i --read-only --network ... --cap-drop ALL ... --name NAME` and the limits.
std::vector<std::string> run_options(const std::filesystem::path& runtime, const Policy& policy,
                                     const std::string& name, std::uint64_t tmp_size) {
    std::vector<std::string> argv = {
        runtime.string(),
        "run",
        "--rm",
        "-i",
        "--read-only",
        "--network",
        policy.network == NetworkMode::host ? "host" : "none",
        "--cap-drop",
        "ALL",
        "--security-opt",
        "no-new-privileges",
        "--name",
        name,
        "--pids-limit",
        std::to_string(policy.pids.value_or(4096)),
        "--tmpfs",
        "/tmp:rw,nosuid,nodev,size=" + std::to_string(tmp_size) + ",mode=1777"};
    if (policy.memory_bytes)
        argv.insert(argv.end(), {"--memory", std::to_string(*policy.memory_bytes)});
    return argv;
}

nlohmann::ordered_json describe_container(const std::filesystem::path& runtime,
                                          const Policy& policy, const std::string& name,
                                          OfflineEnv offline,
                                          const std::filesystem::path& scratch_root) {
    nlohmann::ordered_json doc;
    doc["mode"] = "container";
    doc["runtime"] = runtime.string();
    doc["image"] = policy.image;
    doc["name"] = name;
    doc["network"] = (policy.network == NetworkMode::host ? "host" : "none");
    doc["offline"] = offline == OfflineEnv::on;
    doc["scratch"] = scratch_root.string();
    return doc;
}

Expected<void> check_image(const Policy& policy) {
    if (policy.image.empty())
        return fail(ErrorKind::invalid_input, "--sandbox container needs --image IMAGE");
    if (policy.image.starts_with("-"))
        return fail(ErrorKind::invalid_input, "--image " + policy.image + ": not an image name");
    return {};
}

}  // namespace

Expected<WrapPlan> plan_container(const RunRequest& request) {
    const Policy& policy = request.policy;
    if (request.argv.empty()) return fail(ErrorKind::invalid_input, "empty command");
    SANDGATE_CHECK(check_image(policy));
    auto runtime = SANDGATE_TRY(find_container_runtime(policy));
    std::error_code ec;
    auto cwd =
        checked_bind_path(request.cwd.empty() ? std::filesystem::current_path(ec) : request.cwd,
                          "--cwd", MustExist::yes);
    if (!cwd) return std::unexpected(cwd.error());
    auto limits = plan_limits(Policy{});  // only the values: the runtime enforces them
    if (!limits) return std::unexpected(limits.error());

    auto resources = std::make_unique<ContainerResources>();
    auto scratch_root = SANDGATE_TRY(container_scratch(policy, *resources));
    const ScratchLayout layout = scratch_layout(scratch_root);
    auto fresh = SANDGATE_TRY(create_scratch(layout, std::nullopt));
    const OfflineEnv offline = offline_enabled(policy) ? OfflineEnv::on : OfflineEnv::off;
    if (fresh) {
        if (auto ok =
                seed_toolchain_home(*fresh, layout, offline, policy.toolchain_cache, std::nullopt);
            !ok)
            return std::unexpected(ok.error());
    }

    const std::string name = unique_name();
    WrapPlan plan;
    plan.env = wrapped_environment(request.env, layout, offline, policy.toolchain_cache);
    plan.argv =
        run_options(runtime, policy, name, policy.tmp_size_bytes.value_or(limits->tmp_size));
    volume(plan.argv, *cwd, "rw");
    volume(plan.argv, scratch_root, "rw");
    SANDGATE_CHECK(add_policy_volumes(policy, plan.argv));
    plan.argv.insert(plan.argv.end(), {"-w", cwd->string()});
    for (const auto& [key, value] : plan.env) plan.argv.insert(plan.argv.end(), {"-e", key});
    plan.argv.push_back(policy.image);
    plan.argv.insert(plan.argv.end(), request.argv.begin(), request.argv.end());
    plan.on_timeout_argv = {runtime.string(), "rm", "-f", name};
    plan.tree_kill = TreeKill::subreaper;
    plan.description = describe_container(runtime, policy, name, offline, scratch_root);
    plan.resources = std::move(resources);
    return plan;
}

}  // namespace sandbox
