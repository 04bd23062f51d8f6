// The egress proxy's request-head parser (sandbox/egress/egress_request.hpp): the first bytes a
// step sends on a connection to the proxy. Also the --allow-egress and --allow-egress-range parsers
// over the same bytes.
#include "sandbox/egress/egress_request.hpp"

#include "fuzz/fuzz_target.hpp"
#include "sandbox/egress/egress_rule.hpp"

SANDGATE_FUZZ_TARGET(egress_request) {
    const std::string_view input = fuzz::text(data, size);
    const std::size_t end = sandbox::request_head_end(input);
    auto request =
        sandbox::parse_request_head(end == std::string_view::npos ? input : input.substr(0, end));
    if (request) {
        fuzz::check(!request->host.empty() && request->port != 0,
                    "a parsed request names a host and a port");
        fuzz::check(sandbox::is_ip_literal(request->host) ||
                        sandbox::normal_host_name(request->host) == request->host,
                    "the host is normalised or an address");
        if (request->method == sandbox::ProxyMethod::forward) {
            fuzz::check(request->upstream_head.ends_with("Connection: close\r\n\r\n"),
                        "the forwarded head closes");
            fuzz::check(
                sandbox::request_head_end(request->upstream_head) == request->upstream_head.size(),
                "the forwarded head is one head");
        }
    } else {
        fuzz::check_one_line(request.error().reason);
    }
    auto rule = sandbox::parse_egress_rule(input);
    if (rule)
        fuzz::check(
            sandbox::egress_allowed(
                {*rule}, rule->host.starts_with("*.") ? "a" + rule->host.substr(1) : rule->host,
                rule->port),
            "a rule allows what it names");
    else
        fuzz::check_one_line(rule.error().message);
    auto range = sandbox::parse_egress_range(input);
    if (!range) fuzz::check_one_line(range.error().message);
    return 0;
}
