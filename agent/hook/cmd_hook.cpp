// `sandgate hook`: the official runner's container hooks, answered by the wrap.
// The runner's thin script (contrib/runner-hooks/index.js) pipes the hook's JSON input to
// `sandgate hook [OPTIONS]` on stdin. Exit status: the step's for run_*_step; 0 for
// prepare_job/cleanup_job; 1 with one line on stderr when the input or a flag is wrong or
// the step could not be started (the runner fails the job); 128+N when signal N (SIGINT,
// SIGTERM, or the parent's death) stopped the step's tree.

#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "agent/cli/cli11.hpp"
#include "agent/cli/commands.hpp"
#include "agent/cli/interrupts.hpp"
#include "agent/daemon/agent_config.hpp"
#include "agent/hook/runner_hook.hpp"

namespace agent {
namespace {

constexpr int k_exit_hook_failed = 1;
constexpr std::size_t k_max_input_bytes = 16 * 1024 * 1024;

int hook_failed(const std::string& message) {
    std::fprintf(stderr, "sandgate hook: %s\n", message.c_str());
    return k_exit_hook_failed;
}

// The runner signals only the node process it started, and index.js forwards SIGINT/SIGTERM
// here; should node die without forwarding (a kill), the kernel sends SIGTERM instead. Both
// fire the guard's token: the step's tree is stopped before the hook exits. A parent gone
// before the prctl took effect (we were reparented already) fires it at once.
common::Expected<std::unique_ptr<InterruptGuard>> die_with_parent() {
    const pid_t parent = ::getppid();
    auto guard = InterruptGuard::install();
    if (!guard) return guard;
    if (::prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || ::getppid() != parent)
        (*guard)->token().cancel();
    return guard;
}

}  // namespace

int hook_command(CommandArgs args) {
    CLI::App app{"Answer the GitHub Actions runner's container hooks with sandgate's wrap",
                 "sandgate hook"};
    std::string sandbox_mode = "bwrap";
    std::string network = "none";
    std::string state_dir;
    std::vector<std::string> allowed_volumes;
    pid_t job_owner = ::getppid();
    app.add_option("--sandbox", sandbox_mode, "bwrap (default) or container (runs images)");
    app.add_option("--network", network, "none (default: loopback only) or host");
    app.add_option("--state-dir", state_dir,
                   "where job scratch directories live (default: $XDG_STATE_HOME/sandgate)");
    app.add_option("--allow-volume", allowed_volumes,
                   "a host directory the workflow's container.volumes may bind (read-only); "
                   "repeatable");
    app.add_option("--job-owner", job_owner,
                   "prepare_job: the process whose end marks the job abandoned, its scratch "
                   "reaped (index.js passes the runner's worker; default: the parent)")
        ->check(CLI::PositiveNumber);
    try {
        app.parse(static_cast<int>(args.size()), args.data());
    } catch (const CLI::CallForHelp&) {
        std::printf("%s", app.help().c_str());
        return 0;
    } catch (const CLI::ParseError& error) {
        return hook_failed(error.what());
    }
    if (sandbox_mode != "bwrap" && sandbox_mode != "container")
        return hook_failed("--sandbox: must be bwrap or container, not '" + sandbox_mode + "'");
    if (network != "none" && network != "host")
        return hook_failed("--network: must be none or host, not '" + network + "'");

    std::string input_text;
    char buffer[65536];
    while (std::size_t n = std::fread(buffer, 1, sizeof buffer, stdin)) {
        input_text.append(buffer, n);
        if (input_text.size() > k_max_input_bytes) return hook_failed("input larger than 16 MiB");
    }

    auto input = parse_hook_input(input_text);
    if (!input) return hook_failed(input.error().message);
    auto interrupts = die_with_parent();
    if (!interrupts) return hook_failed(interrupts.error().message);
    HookOptions options;
    options.cancel = &(*interrupts)->token();
    options.policy.mode =
        sandbox_mode == "container" ? sandbox::SandboxMode::container : sandbox::SandboxMode::bwrap;
    options.policy.network =
        network == "host" ? sandbox::NetworkMode::host : sandbox::NetworkMode::none;
    options.state_dir = state_dir.empty() ? default_state_dir() : std::filesystem::path(state_dir);
    options.job_owner = job_owner;
    for (const auto& path : allowed_volumes) {
        if (!path.starts_with("/"))
            return hook_failed("--allow-volume: '" + path + "' is not an absolute path");
        options.allowed_volumes.emplace_back(path);
    }
    auto status = run_hook(*input, options);
    if (const auto sig = (*interrupts)->received(); sig && (!status || *status != 0))
        return 128 + *sig;
    if (!status) return hook_failed(status.error().message);
    return *status;
}

}  // namespace agent
