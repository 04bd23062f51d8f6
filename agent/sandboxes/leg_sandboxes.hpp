#pragma once
// One persistent sandbox per job leg for `sandgate run` and `sandgate gate` run by hand: the
// leg's steps are exec requests to a broker in one bwrap (agent/sandboxes/sandbox_manager.hpp)
// instead of a wrap each, so they share one set of namespaces (a /tmp, a loopback, processes
// a step leaves for the next are stopped only with the leg) and pay bwrap's start-up once.
//
// Contract:
// - The leg's sandbox is started at its first step, with that step's posture (the run's
//   isolation flags, the leg's workspace, RUNNER_TEMP, scratch and HOME, the action trees),
//   the leg's root (its workspace) bound writable; it is destroyed when the leg's executor is
//   (the job runner drops it when the leg ends: its broker is stopped, its tree killed).
// - A step whose posture the sandbox cannot give runs in a wrap of its own through
//   sandbox::run, as without this module, never with less isolation: `--sandbox off`, the
//   container arm, `--network allowlist` (the job sandbox has no egress proxy), a posture
//   other than the sandbox's, a working directory outside the leg's root, and a step that
//   starts while another step of the leg (a background one) holds the sandbox.
// - A sandbox that cannot be started (bwrap missing, a refused namespace) is said once per
//   leg on stderr; the leg's steps then run in wraps of their own (which fail as they would).
// - Output reaches the step's observer as it is written (the broker streams it).
// Thread-safe: legs run in parallel, each with its own sandbox.

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>

#include "agent/sandboxes/sandbox_manager.hpp"
#include "jobs/run/run_context.hpp"
#include "jobs/run/step_runner.hpp"

namespace agent {

// True when `step` can run in a sandbox made for `made`: the same mode, network, binds,
// scratch, caches, limits and identity, and no egress rules on either.
bool same_posture(const sandbox::Policy& made, const sandbox::Policy& step);

class LegSandboxes final : public jobs::LegExecutors {
public:
    // The sandboxes' private directory (records, sockets) is made under $TMPDIR, outside every
    // tree a step can write, and removed when this object ends. `repository` and `sha` name the
    // run's commit in the sandboxes' identities (empty: "local", "worktree").
    // `sandgate_binary`: the broker's program (empty: found as the agent finds it,
    // ManagerConfig::sandgate_binary).
    static common::Expected<std::unique_ptr<LegSandboxes>> create(
        std::string repository, std::string sha, std::filesystem::path sandgate_binary = {});
    ~LegSandboxes() override;
    LegSandboxes(const LegSandboxes&) = delete;
    LegSandboxes& operator=(const LegSandboxes&) = delete;

    std::unique_ptr<jobs::StepExecutor> open_leg(const std::string& label,
                                                 const std::filesystem::path& root) override;

    // Sandboxes alive now (for tests: none once every leg has ended).
    std::size_t alive() { return m_manager.alive(); }

private:
    LegSandboxes(std::filesystem::path dir, std::string repository, std::string sha,
                 std::filesystem::path sandgate_binary);

    std::filesystem::path m_dir;
    std::string m_repository;
    std::string m_sha;
    SandboxManager m_manager;
    std::atomic<std::int64_t> m_legs{0};
};

// The leg sandboxes of a run by hand (`who`: "sandgate run", "sandgate gate"): null, each step
// wrapped on its own, when settings.policy is not bwrap's or has egress rules, or when they
// cannot be had (said on stderr).
std::unique_ptr<LegSandboxes> open_leg_sandboxes(const jobs::RunSettings& settings,
                                                 std::string_view who);

}  // namespace agent
