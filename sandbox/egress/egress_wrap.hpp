#pragma once
// What the bwrap arm adds to a wrap under `--network allowlist` (internal to wrap_bwrap.cpp):
// the run's proxy (egress_proxy.hpp), started before the wrapper, and the pieces inside the
// wrap that reach it: the forwarder program at k_egress_forwarder_path and its end of the
// socket pair, inherited by bwrap and handed to the forwarder by number.

#include <memory>
#include <string_view>

#include "sandbox/base.hpp"
#include "sandbox/egress/egress_proxy.hpp"
#include "sandbox/process/run.hpp"

namespace sandbox {

inline constexpr std::string_view k_egress_forwarder_path = "/.sandgate-egress-forwarder";

// The forwarder's executable (static, freestanding: gen/egress_forwarder.cpp).
std::string_view egress_forwarder_program();

struct EgressWrap {
    Fd wrap_end;  // the forwarder's end of the pair (SOCK_SEQPACKET), for the wrapper to inherit
    std::unique_ptr<EgressProxy> proxy;
};

// Starts the proxy of `policy` (egress rules, ranges, limits). unavailable when it cannot be
// had: the run must then be refused (fail closed).
Expected<EgressWrap> start_egress(const Policy& policy);

// The posture's "egress" member: the rules and ranges as given.
nlohmann::ordered_json describe_egress(const Policy& policy);

}  // namespace sandbox
