#pragma once
// The egress proxy's reading of a request head (egress_proxy.hpp): the bytes a step sends
// first on a connection to the proxy, hostile. Two forms are served and nothing else:
//
//   CONNECT host:port HTTP/1.1          a tunnel (TLS); the port is required
//   GET http://host[:port]/path HTTP/1.1  plain HTTP forwarding (absolute form; port 80 by default)
//
// Any method may be forwarded in absolute form; a request in origin form (`GET / HTTP/1.1`)
// or another scheme is refused (400), and so are obsolete line folding, a NUL, CR or LF inside
// a line, and a head that is not HTTP/1.0 or 1.1. The forwarded head is rewritten: the request
// line in origin form, the Host header set from the URL's authority (a client cannot name
// another virtual host than the one allowed), Proxy-* and hop-by-hop headers dropped and
// `Connection: close` added (one request per upstream connection).

#include <cstddef>
#include <cstdint>
#include <expected>
#include <string>
#include <string_view>

namespace sandbox {

enum class ProxyMethod { connect, forward };

struct ProxyRequest {
    ProxyMethod method = ProxyMethod::connect;
    std::string host;  // normalised name (normal_host_name) or an IP literal without brackets
    std::uint16_t port = 0;
    std::string upstream_head;  // forward only: the head to send to the destination
};

struct HeadRefusal {
    int status = 400;    // the HTTP status to answer with (400, 405)
    std::string reason;  // one line, for the evidence
};

// Where the head ends in `buffer` (the offset just after "\r\n\r\n"), or npos while incomplete.
std::size_t request_head_end(std::string_view buffer);

// Parses a complete head (up to and including the blank line). Never throws on any input.
std::expected<ProxyRequest, HeadRefusal> parse_request_head(std::string_view head);

}  // namespace sandbox
