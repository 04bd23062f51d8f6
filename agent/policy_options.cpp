#include "agent/policy_options.hpp"

namespace agent {

void add_policy_options(CLI::App& app, PolicyOptions& options) {
    app.add_option("--sandbox", options.sandbox,
                   "isolation: off (none), bwrap (the default: a bubblewrap sandbox) or "
                   "container (an OCI runtime)")
        ->check(CLI::IsMember({"off", "bwrap", "container"}));
}

sandbox::Expected<sandbox::Policy> to_policy(const PolicyOptions& options) {
    sandbox::Policy policy;
    if (options.sandbox == "off") {
        policy.mode = sandbox::SandboxMode::off;
    } else if (options.sandbox == "bwrap") {
        policy.mode = sandbox::SandboxMode::bwrap;
    } else if (options.sandbox == "container") {
        policy.mode = sandbox::SandboxMode::container;
    } else {
        return sandbox::fail(sandbox::ErrorKind::invalid_input,
                             "--sandbox: expected off, bwrap or container, not '" +
                                 options.sandbox + "'");
    }
    return policy;
}

}  // namespace agent
