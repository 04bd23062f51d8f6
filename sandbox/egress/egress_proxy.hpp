#pragma once
// The filtering proxy of one `--network allowlist` run, on the trusted side.
//
// The step keeps its loopback-only network namespace. Inside it, the wrap's forwarder
// (gen/egress_forwarder.cpp) listens on 127.0.0.1:3128 and passes every connection it accepts
// (the socket itself, SCM_RIGHTS) over a SOCK_SEQPACKET socket pair to this proxy, which then
// serves it directly: it reads the request head (bounded in bytes and time), decides by the
// requested host name (egress_rule.hpp), resolves the name once, refuses a name any of whose
// addresses is special (loopback, link-local, private, unique-local, reserved) unless it lies
// in one of the run's ranges, connects to exactly the address it resolved, and relays bytes
// both ways through pipes (splice: no body is ever held in memory). A refusal is answered
// (403, 405, 400 or 503), recorded, and sent back to the forwarder as one line for the step's
// stderr: `egress refused: example.org:443 (not on the allowlist)`.
//
// One thread polls everything; a second resolves names (getaddrinfo blocks). Both end in
// finish() (or the destructor), which closes every connection still open.

#include <memory>
#include <vector>

#include "sandbox/base.hpp"
#include "sandbox/egress/egress_rule.hpp"

namespace sandbox {

// The forwarder's address inside the wrap, and the URL the step's proxy variables name.
inline constexpr std::string_view k_egress_listen_address = "127.0.0.1";
inline constexpr std::uint16_t k_egress_listen_port = 3128;
inline constexpr std::string_view k_egress_proxy_url = "http://127.0.0.1:3128";

struct EgressSettings {
    std::vector<EgressRule> rules;
    std::vector<EgressRange> ranges;
    EgressLimits limits;
};

class EgressProxy {
public:
    // Starts serving connections that arrive on `forwarder` (the trusted end of the pair; the
    // other end goes into the wrap). unavailable when a thread, an eventfd or the like cannot
    // be had: the run must then not start (fail closed).
    static Expected<std::unique_ptr<EgressProxy>> start(EgressSettings settings, Fd forwarder);

    virtual ~EgressProxy() = default;

    // Stops both threads, closes every connection (an open one is recorded as ended by the
    // run's end) and hands over the evidence. Later calls return an empty report.
    virtual EgressReport finish() = 0;
};

// The environment that points a step's tools at the proxy: HTTP(S)_PROXY, ALL_PROXY (and
// lower case), npm's, pip's, cargo's and apt's variables; NO_PROXY names loopback only.
std::vector<std::pair<std::string, std::string>> egress_proxy_environment();

}  // namespace sandbox
