// The seam's dispatcher: each wrapped mode goes to its arm; none degrades to an unwrapped run.
#include "sandbox/wrap/wrap.hpp"

#include <unistd.h>

#include "sandbox/wrap/container.hpp"
#include "sandbox/wrap/probe.hpp"
#include "sandbox/wrap/wrap_bwrap.hpp"

namespace sandbox {

namespace {

// The container arm has no proxy of its own yet: refuse rather than widen to the whole network
// or narrow to none silently. The bwrap arm enforces the allowlist (egress_wrap.hpp).
Expected<void> refuse_egress(const Policy& policy) {
    if (policy.egress.empty()) return {};
    if (policy.network == NetworkMode::host)
        return fail(ErrorKind::invalid_input,
                    "--allow-egress " + describe(policy.egress.front()) +
                        ": --network host reaches everything; use --network allowlist");
    if (policy.mode != SandboxMode::container) return {};
    return fail(
        ErrorKind::unavailable,
        "--allow-egress " + describe(policy.egress.front()) +
            ": the container arm cannot filter egress yet (it runs with --network none or host); "
            "use --sandbox bwrap for --network allowlist");
}

}  // namespace

std::optional<std::string> diagnose_wrap_failure(WrapPlan& plan, std::optional<int> exit_code) {
    // bwrap reports a failure of its own with exit status 1, like a payload's `exit 1`; only
    // its status channel tells them apart: {"exit-code": N} comes once the payload has run.
    if (!plan.status || exit_code != 1) return std::nullopt;
    std::string status;
    char buffer[1024];
    for (ssize_t n; (n = ::read(plan.status.get(), buffer, sizeof buffer)) > 0;)
        status.append(buffer, static_cast<std::size_t>(n));
    if (status.find("\"exit-code\"") != std::string::npos) return std::nullopt;
    if (auto ok = check_user_namespaces(); !ok) return ok.error().message;
    if (auto ok = check_seccomp(); !ok) return ok.error().message;
    // Something else stopped bwrap before the payload (a bind source gone since the plan, a
    // kernel refusing a mount): still a wrapper failure, never the payload's exit 1.
    return "bwrap could not build the sandbox and ran nothing (its own message is on stderr); "
           "`sandgate doctor` says what this machine allows";
}

Expected<WrapPlan> plan_wrap(const RunRequest& request, PlanTiming timing) {
    if (request.policy.mode != SandboxMode::off) {
        SANDGATE_CHECK(refuse_egress(request.policy));
    }
    switch (request.policy.mode) {
        case SandboxMode::bwrap:
            return plan_bwrap(request, timing);
        case SandboxMode::container:
            return plan_container(request);
        case SandboxMode::off:
            break;
    }
    return fail(ErrorKind::invalid_input, "plan_wrap called for --sandbox off");
}

}  // namespace sandbox
