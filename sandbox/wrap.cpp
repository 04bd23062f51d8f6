// Placeholder until the wrap lands (issue 3): every wrapped mode fails closed.
#include "sandbox/wrap.hpp"

namespace sandbox {

Expected<WrapPlan> plan_wrap(const RunRequest& request) {
    return fail(ErrorKind::unavailable,
                std::string("--sandbox ") + std::string(to_string(request.policy.mode)) +
                    " is not available in this build; use --sandbox off explicitly");
}

}  // namespace sandbox
