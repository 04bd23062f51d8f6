// The seam's dispatcher: each wrapped mode goes to its arm; none degrades to an unwrapped run.
#include "sandbox/wrap.hpp"

#include "sandbox/container.hpp"
#include "sandbox/wrap_bwrap.hpp"

namespace sandbox {

Expected<WrapPlan> plan_wrap(const RunRequest& request) {
    switch (request.policy.mode) {
        case SandboxMode::bwrap: return plan_bwrap(request);
        case SandboxMode::container: return plan_container(request);
        case SandboxMode::off: break;
    }
    return fail(ErrorKind::invalid_input, "plan_wrap called for --sandbox off");
}

}  // namespace sandbox
