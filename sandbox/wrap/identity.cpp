#include "sandbox/wrap/identity.hpp"

#include <unistd.h>

#include <charconv>

namespace sandbox {
namespace {

std::optional<unsigned> number(std::string_view text) {
    unsigned value = 0;
    const auto* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
    return value;
}

}  // namespace

std::optional<Owner> sandbox_owner(const Policy& policy) {
    if (policy.mode != SandboxMode::bwrap || ::geteuid() != 0) return std::nullopt;
    return policy.host_identity.value_or(Owner{k_default_host_uid, k_default_host_gid});
}

Expected<Owner> parse_host_identity(std::string_view text, std::string_view flag) {
    const std::string prefix = std::string(flag) + " " + std::string(text) + ": ";
    Owner owner;
    const auto colon = text.find(':');
    auto uid = number(text.substr(0, colon));
    if (!uid) return fail(ErrorKind::invalid_input, prefix + "expected UID[:GID] (numbers)");
    owner.uid = *uid;
    owner.gid = *uid;
    if (colon != std::string_view::npos) {
        auto gid = number(text.substr(colon + 1));
        if (!gid) return fail(ErrorKind::invalid_input, prefix + "expected UID[:GID] (numbers)");
        owner.gid = *gid;
    }
    if (owner.uid == 0 || owner.gid == 0)
        return fail(ErrorKind::invalid_input,
                    prefix + "the sandbox's host identity must not be root");
    return owner;
}

std::string to_string(const Owner& owner) {
    return std::to_string(owner.uid) + ":" + std::to_string(owner.gid);
}

}  // namespace sandbox
