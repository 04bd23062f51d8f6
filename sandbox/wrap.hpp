#pragma once
// The seam between the process core (run.cpp) and the isolation arms (bwrap, container).
// run() asks plan_wrap() how to start the request's argv under its policy and then spawns
// plan.argv exactly as it would spawn an unwrapped command.

#include <memory>
#include <string>
#include <vector>

#include "sandbox/fd.hpp"
#include "sandbox/run.hpp"

namespace sandbox {

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
    TreeKill tree_kill = TreeKill::pidns;
    std::string description_json;  // RunResult::sandbox_json
    // Run (unsandboxed, bounded) after a timeout besides killing the tree, e.g. `podman rm -f`.
    std::vector<std::string> on_timeout_argv;
    std::unique_ptr<WrapResources> resources;  // released after the run
};

// Plans the wrap for request.policy.mode != off. Fails closed: when bwrap is missing, user
// namespaces are refused, seccomp cannot be loaded or any asked-for protection cannot be had,
// returns ErrorKind::unavailable with a message that says what to do. Never degrades.
Expected<WrapPlan> plan_wrap(const RunRequest& request);

}  // namespace sandbox
