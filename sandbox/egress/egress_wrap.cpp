// The bwrap arm's egress pieces (see egress_wrap.hpp).
#include "sandbox/egress/egress_wrap.hpp"

#include <sys/socket.h>

namespace sandbox {

extern const unsigned char k_egress_forwarder_program[];
extern const std::size_t k_egress_forwarder_program_size;

std::string_view egress_forwarder_program() {
    return {reinterpret_cast<const char*>(k_egress_forwarder_program),
            k_egress_forwarder_program_size};
}

Expected<EgressWrap> start_egress(const Policy& policy) {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0)
        return fail(ErrorKind::unavailable,
                    errno_message("--network allowlist: socketpair for the egress proxy"));
    EgressWrap wrap;
    wrap.wrap_end = Fd(fds[0]);
    Fd ours(fds[1]);
    auto proxy = EgressProxy::start({policy.egress, policy.egress_ranges, policy.egress_limits},
                                    std::move(ours));
    if (!proxy)
        return fail(ErrorKind::unavailable, "--network allowlist: " + proxy.error().message);
    wrap.proxy = std::move(*proxy);
    return wrap;
}

nlohmann::ordered_json describe_egress(const Policy& policy) {
    nlohmann::ordered_json doc;
    auto& allow = doc["allow"] = nlohmann::ordered_json::array();
    for (const auto& rule : policy.egress) allow.push_back(describe(rule));
    auto& ranges = doc["ranges"] = nlohmann::ordered_json::array();
    for (const auto& range : policy.egress_ranges) ranges.push_back(range.text);
    doc["proxy"] = std::string(k_egress_proxy_url);
    return doc;
}

}  // namespace sandbox
