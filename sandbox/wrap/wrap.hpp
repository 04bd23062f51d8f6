#pragma once
// The seam between the process core (run.cpp) and the isolation arms (bwrap, container).
// run() asks plan_wrap() how to start the request's argv under its policy and then spawns
// plan.argv exactly as it would spawn an unwrapped command; for a pending plan (bwrap) it
// completes the plan while the wrapper starts, then hands the wrapper its options.

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sandbox/base.hpp"
#include "sandbox/egress/egress_proxy.hpp"
#include "sandbox/process/run.hpp"
#include "sandbox/process/spawn.hpp"

namespace sandbox {

struct WrapPlan;

// The rest of a plan whose wrapper may be started before the plan is complete: bwrap reads its
// options from a socket, and blocks there until release() writes them, so that its own
// start-up (exec, loader, libraries: ~0.8 ms) runs while the plan is completed. Until
// release() the wrapper has been given nothing and has done nothing; killing it then is the
// whole clean-up.
class PendingWrap {
public:
    virtual ~PendingWrap() = default;
    // Completes `plan` for `request`, the request it was started for: the description, and the
    // argv, which changes when the payload cannot run inside (a stand-in payload then says so,
    // and the wrapper started for the first argv must be killed and plan.argv started).
    // Fails as plan_wrap() would have; the wrapper must then be killed. Called once, on any
    // thread, while nothing else touches `plan` (the spawn works from its own copy).
    virtual Expected<void> complete(const RunRequest& request, WrapPlan& plan) = 0;
    // Hands the wrapper its options (after complete()). Only one wrapper may be waiting for
    // them: kill a replaced one first.
    virtual Expected<void> release() = 0;
};

// Owns whatever the plan created for one run (a per-run scratch root, say) and removes it
// when destroyed, after the run. Never follows a symlink out of what it created.
class WrapResources {
public:
    virtual ~WrapResources() = default;
};

struct WrapPlan {
    std::vector<std::string> argv;  // the whole command: wrapper, its options, "--", payload
    Environment env;                // the environment the wrapper itself starts with (clean)
    // Descriptors the wrapper must inherit: inherited_fds[i] is dup'ed to fd 3+i in the
    // child before every other fd above 2 is closed. argv refers to them by those numbers.
    std::vector<Fd> inherited_fds;
    // Limits the process core applies to the wrapper itself, between fork and exec (no launcher
    // process): rlimits, per-run v1 cgroups to join (their cgroup.procs, open for writing), and
    // cgroup v2 limit files (pids.max, memory.max) for the run's own cgroup leaf. run() refuses
    // to start when cgroup2_limits is not empty and it has no leaf to write them to.
    std::vector<ResourceLimit> rlimits;
    std::vector<Fd> join_cgroups;
    std::vector<std::pair<std::string, std::string>> cgroup2_limits;
    TreeKill tree_kill = TreeKill::pidns;
    // A network namespace the wrapper starts in (joined between fork and exec), already set
    // up for the policy; invalid when the wrapper makes its own.
    Fd netns;
    nlohmann::ordered_json
        description;  // the posture: RunResult::sandbox (posture_text renders it)
    // Run (unsandboxed, bounded) after a timeout besides killing the tree, e.g. `podman rm -f`.
    std::vector<std::string> on_timeout_argv;
    std::unique_ptr<WrapResources> resources;  // released after the run
    // The wrapper's status channel (bwrap's --json-status-fd), read end, non-blocking: it
    // tells a payload that ran from a wrapper that failed to build the sandbox. Empty for
    // arms without one.
    Fd status;
    // The wrapper's host identity when it is not the caller's (sandgate as root: identity.hpp),
    // a fresh session keyring, and the portal of paths that identity needs bound but cannot
    // reach (SpawnSpec::portal): an O_PATH fd each, bound at portal_dir/<index>.
    std::optional<Owner> identity;
    bool fresh_session_keyring = false;
    std::vector<Fd> portal_fds;
    std::vector<bool> portal_directories;
    std::string portal_dir;
    // The payload reporter's pipe (payload_status.hpp), read end, non-blocking: how the payload
    // ended ("signal N"), which the wrapper's exit code cannot say. Empty for other arms.
    Fd payload_status;
    // --network allowlist (bwrap): the run's filtering proxy, serving until run() calls
    // finish() once the tree is gone (the evidence goes into RunResult::egress).
    std::unique_ptr<EgressProxy> egress;
    // PlanTiming::pending only (bwrap): what completes the plan once the wrapper is started.
    // env, inherited_fds, the limits and tree_kill are final already; argv changes only when
    // the payload cannot run inside (see PendingWrap::complete).
    std::unique_ptr<PendingWrap> pending;
};

// The bwrap arm's private scratch (the default: HOME, TMPDIR, XDG_* point into it): a directory
// in the sandbox's own /tmp tmpfs, which exists only inside a sandbox.
inline constexpr std::string_view k_private_scratch = "/tmp/sandgate-run";

// invalid_input naming `flag` when `path` (made absolute and normal) is k_private_scratch or
// lies below it: a working directory there cannot be bound from the host (it would land in,
// or over, the run's own scratch).
Expected<void> refuse_private_scratch(const std::filesystem::path& path, std::string_view flag);

// After a wrapped run that ended with `exit_code`: when the wrapper failed before starting
// the payload because this machine refuses what the wrap needs (user namespaces, seccomp),
// the cause and what to do; when the probes find nothing refused, a message saying bwrap
// failed before the payload (bwrap's own message on stderr says why). nullopt when the
// payload ran (bwrap's status channel carries its exit code) or the exit was not 1: the run's
// result stands. The probes run here, after a failure, rather than before every run: bwrap
// fails closed by itself.
std::optional<std::string> diagnose_wrap_failure(WrapPlan& plan, std::optional<int> exit_code);

// complete: the plan can be started as it is, as often as wanted (its fds rewound); bwrap makes
// its own network namespace. pending: the arm may leave the plan's completion to
// WrapPlan::pending (run() starts the wrapper first), and under --network none bwrap starts in
// a namespace the plan made meanwhile (WrapPlan::netns, sandbox/wrap/netns.hpp) when it can.
enum class PlanTiming { complete, pending };

// Plans the wrap for request.policy.mode != off. Fails closed: when bwrap is missing or any
// asked-for protection cannot be had (an egress allowlist in the container arm, a proxy that
// cannot be started),
// returns ErrorKind::unavailable with a message that says what to do. Never degrades: what
// only the kernel can refuse (namespaces, seccomp) bwrap itself refuses, and run() turns that
// refusal into sandbox_unavailable through diagnose_wrap_failure.
Expected<WrapPlan> plan_wrap(const RunRequest& request, PlanTiming timing = PlanTiming::complete);

}  // namespace sandbox
