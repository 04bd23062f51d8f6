// The proxy's request-head parser (see egress_request.hpp).
#include "sandbox/egress/egress_request.hpp"

#include <charconv>

#include "common/strings.hpp"
#include "sandbox/egress/egress_rule.hpp"

namespace sandbox {
namespace {

using Result = std::expected<ProxyRequest, HeadRefusal>;

std::unexpected<HeadRefusal> refuse(std::string reason, int status = 400) {
    return std::unexpected(HeadRefusal{status, std::move(reason)});
}

bool token_char(char c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
    for (char allowed : std::string_view("!#$%&'*+-.^_`|~"))
        if (c == allowed) return true;
    return false;
}

// The headers a forwarded request loses: the proxy's own and the hop-by-hop ones.
bool dropped_header(std::string_view name) {
    for (std::string_view dropped :
         {"host", "connection", "proxy-connection", "proxy-authorization", "proxy-authenticate",
          "keep-alive", "te", "trailer", "upgrade"})
        if (common::ascii_iequals(name, dropped)) return true;
    return false;
}

struct Authority {
    std::string host;
    std::uint16_t port = 0;
};

// host[:port] or [v6][:port]; `default_port` 0: the port is required.
std::expected<Authority, HeadRefusal> parse_authority(std::string_view text,
                                                      std::uint16_t default_port) {
    Authority out;
    std::string_view host = text;
    std::string_view port;
    if (text.starts_with('[')) {
        const auto close = text.find(']');
        if (close == std::string_view::npos)
            return refuse("malformed host '" + printable(text.substr(0, 80)) + "'");
        host = text.substr(1, close - 1);
        const std::string_view rest = text.substr(close + 1);
        if (!rest.empty()) {
            if (rest.front() != ':')
                return refuse("malformed host '" + printable(text.substr(0, 80)) + "'");
            port = rest.substr(1);
            if (port.empty()) return refuse("empty port");
        }
        if (!is_ip_literal(host))
            return refuse("malformed host '" + printable(text.substr(0, 80)) + "'");
        out.host = std::string(host);
    } else {
        const auto colon = text.rfind(':');
        if (colon != std::string_view::npos) {
            host = text.substr(0, colon);
            port = text.substr(colon + 1);
            if (port.empty()) return refuse("empty port");
        }
        auto name = normal_host_name(host);
        if (!name) return refuse("malformed host '" + printable(host.substr(0, 80)) + "'");
        out.host = std::move(*name);
    }
    if (port.empty()) {
        if (default_port == 0) return refuse("CONNECT needs host:port");
        out.port = default_port;
        return out;
    }
    unsigned value = 0;
    auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || ptr != port.data() + port.size() || value == 0 || value > 65535)
        return refuse("port must be 1-65535");
    out.port = static_cast<std::uint16_t>(value);
    return out;
}

// One line: no NUL, CR or LF inside.
bool clean_line(std::string_view line) {
    for (char c : line)
        if (c == '\0' || c == '\r' || c == '\n') return false;
    return true;
}

}  // namespace

std::size_t request_head_end(std::string_view buffer) {
    const auto at = buffer.find("\r\n\r\n");
    return at == std::string_view::npos ? std::string_view::npos : at + 4;
}

Result parse_request_head(std::string_view head) {
    if (!head.ends_with("\r\n\r\n")) return refuse("incomplete request head");
    head.remove_suffix(2);  // each line now ends with "\r\n"
    const auto first_end = head.find("\r\n");
    const std::string_view line = head.substr(0, first_end);
    if (!clean_line(line)) return refuse("control character in the request line");
    const auto sp1 = line.find(' ');
    const auto sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
        return refuse("malformed request line");
    const std::string_view method = line.substr(0, sp1);
    const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    const std::string_view version = line.substr(sp2 + 1);
    if (method.empty() || target.empty()) return refuse("malformed request line");
    for (char c : method)
        if (!token_char(c)) return refuse("malformed method");
    if (version != "HTTP/1.1" && version != "HTTP/1.0") return refuse("not HTTP/1.0 or HTTP/1.1");

    ProxyRequest request;
    std::string_view path;
    std::string_view authority_text;
    if (method == "CONNECT") {
        request.method = ProxyMethod::connect;
        authority_text = target;
    } else {
        request.method = ProxyMethod::forward;
        constexpr std::string_view scheme = "http://";
        if (target.size() < scheme.size() ||
            !common::ascii_iequals(target.substr(0, scheme.size()), scheme))
            return refuse("only CONNECT and absolute http:// requests are served", 405);
        const std::string_view rest = target.substr(scheme.size());
        const auto path_at = rest.find_first_of("/?#");
        authority_text = rest.substr(0, path_at);
        path = path_at == std::string_view::npos ? std::string_view("/") : rest.substr(path_at);
        if (path.front() == '#') return refuse("malformed URL");
        if (authority_text.find('@') != std::string_view::npos)
            return refuse("credentials in the URL");
    }
    if (authority_text.empty()) return refuse("no host");
    auto authority =
        parse_authority(authority_text, request.method == ProxyMethod::connect ? 0 : 80);
    if (!authority) return std::unexpected(authority.error());
    request.host = std::move(authority->host);
    request.port = authority->port;

    std::string rewritten;
    if (request.method == ProxyMethod::forward) {
        rewritten.reserve(head.size() + 32);
        rewritten.append(method).append(" ");
        if (path.front() == '?') rewritten.append("/");
        rewritten.append(path).append(" ").append(version).append("\r\n");
        const bool v6 = request.host.find(':') != std::string::npos;
        rewritten.append("Host: ").append(v6 ? "[" + request.host + "]" : request.host);
        if (request.port != 80) rewritten.append(":").append(std::to_string(request.port));
        rewritten.append("\r\n");
    }
    std::size_t at = first_end + 2;
    while (at < head.size()) {
        const auto end = head.find("\r\n", at);
        const std::string_view header = head.substr(at, end - at);
        at = end + 2;
        if (!clean_line(header)) return refuse("control character in a header");
        if (header.empty() || header.front() == ' ' || header.front() == '\t')
            return refuse("folded or empty header line");
        const auto colon = header.find(':');
        if (colon == std::string_view::npos || colon == 0) return refuse("malformed header");
        const std::string_view name = header.substr(0, colon);
        for (char c : name)
            if (!token_char(c)) return refuse("malformed header name");
        if (request.method == ProxyMethod::forward && !dropped_header(name))
            rewritten.append(header).append("\r\n");
    }
    if (request.method == ProxyMethod::forward) {
        rewritten.append("Connection: close\r\n\r\n");
        request.upstream_head = std::move(rewritten);
    }
    return request;
}

}  // namespace sandbox
