// Egress rules and ranges: parsing, matching, and the address classes a name may not resolve to.
#include "sandbox/egress/egress_rule.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <charconv>
#include <cstring>

namespace sandbox {
namespace {

char lower(char c) {
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

bool label_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

std::optional<std::uint16_t> parse_port(std::string_view text) {
    unsigned value = 0;
    const auto* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (text.empty() || ec != std::errc() || ptr != end || value == 0 || value > 65535)
        return std::nullopt;
    return static_cast<std::uint16_t>(value);
}

// The IPv4 address an AF_INET or IPv4-mapped AF_INET6 address carries, host byte order.
std::optional<std::uint32_t> ipv4_of(const sockaddr* address) {
    if (address->sa_family == AF_INET)
        return ntohl(reinterpret_cast<const sockaddr_in*>(address)->sin_addr.s_addr);
    if (address->sa_family != AF_INET6) return std::nullopt;
    const auto& a6 = reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr;
    if (!IN6_IS_ADDR_V4MAPPED(&a6)) return std::nullopt;
    std::uint32_t v4 = 0;
    std::memcpy(&v4, a6.s6_addr + 12, 4);
    return ntohl(v4);
}

bool in4(std::uint32_t address, std::uint32_t network, unsigned prefix) {
    const std::uint32_t mask = prefix == 0 ? 0 : ~std::uint32_t{0} << (32 - prefix);
    return (address & mask) == (network & mask);
}

std::uint32_t v4(unsigned a, unsigned b, unsigned c, unsigned d) {
    return a << 24 | b << 16 | c << 8 | d;
}

std::optional<std::string_view> special_ipv4(std::uint32_t a) {
    if (in4(a, v4(127, 0, 0, 0), 8)) return "loopback";
    if (in4(a, v4(169, 254, 0, 0), 16)) return "link-local";
    if (in4(a, v4(10, 0, 0, 0), 8) || in4(a, v4(172, 16, 0, 0), 12) ||
        in4(a, v4(192, 168, 0, 0), 16) || in4(a, v4(100, 64, 0, 0), 10))
        return "private";
    if (in4(a, 0, 8) || in4(a, v4(224, 0, 0, 0), 4) || in4(a, v4(240, 0, 0, 0), 4) ||
        in4(a, v4(192, 0, 0, 0), 24) || in4(a, v4(192, 0, 2, 0), 24) ||
        in4(a, v4(198, 18, 0, 0), 15) || in4(a, v4(198, 51, 100, 0), 24) ||
        in4(a, v4(203, 0, 113, 0), 24))
        return "reserved";
    return std::nullopt;
}

bool prefix_matches(const unsigned char* address, const unsigned char* network, unsigned prefix) {
    const unsigned whole = prefix / 8;
    if (std::memcmp(address, network, whole) != 0) return false;
    const unsigned rest = prefix % 8;
    if (rest == 0) return true;
    const unsigned char mask = static_cast<unsigned char>(0xFF << (8 - rest));
    return (address[whole] & mask) == (network[whole] & mask);
}

}  // namespace

std::string printable(std::string_view text) {
    static constexpr char k_hex[] = "0123456789abcdef";
    std::string out;
    for (char c : text.substr(0, 200)) {
        const auto byte = static_cast<unsigned char>(c);
        if (byte >= 0x20 && byte != 0x7f) {
            out.push_back(c);
        } else {
            out += "\\x";
            out.push_back(k_hex[byte >> 4]);
            out.push_back(k_hex[byte & 15]);
        }
    }
    if (text.size() > 200) out += "...";
    return out;
}

std::optional<std::string> normal_host_name(std::string_view host) {
    if (!host.empty() && host.back() == '.') host.remove_suffix(1);
    if (host.empty() || host.size() > 253) return std::nullopt;
    std::string out;
    out.reserve(host.size());
    std::size_t label = 0;
    for (char c : host) {
        c = lower(c);
        if (c == '.') {
            if (label == 0 || out.back() == '-') return std::nullopt;
            label = 0;
        } else {
            if (!label_char(c) || (label == 0 && c == '-') || ++label > 63) return std::nullopt;
        }
        out.push_back(c);
    }
    if (out.back() == '-') return std::nullopt;
    return out;
}

bool is_ip_literal(std::string_view host) {
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
        host = host.substr(1, host.size() - 2);
    if (host.empty() || host.size() > 64) return false;
    const std::string text(host);
    in_addr a4{};
    in6_addr a6{};
    return ::inet_aton(text.c_str(), &a4) != 0 || ::inet_pton(AF_INET6, text.c_str(), &a6) == 1;
}

Expected<EgressRule> parse_egress_rule(std::string_view text) {
    auto bad = [&](std::string_view why) {
        return fail(ErrorKind::invalid_input, "--allow-egress '" + printable(text) + "': " +
                                                  std::string(why) + " (expected HOST[:PORT])");
    };
    std::string_view host = text;
    EgressRule rule;
    if (text.starts_with('[') || std::count(text.begin(), text.end(), ':') > 1)
        return bad("an IP address; name the host (the proxy refuses IP literals)");
    if (const auto colon = text.rfind(':'); colon != std::string_view::npos) {
        host = text.substr(0, colon);
        auto port = parse_port(text.substr(colon + 1));
        if (!port) return bad("port must be 1-65535");
        rule.port = *port;
    }
    if (host.empty()) return bad("empty host");
    const bool wildcard = host.starts_with("*.");
    if (wildcard) host.remove_prefix(2);
    if (host.find('*') != std::string_view::npos)
        return bad("'*' only as the whole first label ('*.example.org')");
    auto name = normal_host_name(host);
    if (!name) return bad("not a host name");
    if (is_ip_literal(*name))
        return bad("an IP address; name the host (the proxy refuses IP literals)");
    if (wildcard && name->find('.') == std::string::npos)
        return bad("a wildcard needs a domain of two labels at least ('*.example.org')");
    rule.host = wildcard ? "*." + *name : *name;
    return rule;
}

Expected<EgressRange> parse_egress_range(std::string_view text) {
    auto bad = [&](std::string_view why) {
        return fail(ErrorKind::invalid_input, "--allow-egress-range '" + printable(text) +
                                                  "': " + std::string(why) +
                                                  " (expected ADDRESS[/PREFIX])");
    };
    EgressRange range;
    range.text = std::string(text);
    const auto slash = text.find('/');
    const std::string address(text.substr(0, slash));
    if (::inet_pton(AF_INET, address.c_str(), range.bytes) == 1) {
        range.family = AF_INET;
    } else if (::inet_pton(AF_INET6, address.c_str(), range.bytes) == 1) {
        range.family = AF_INET6;
    } else {
        return bad("not an IPv4 or IPv6 address");
    }
    const unsigned bits = range.family == AF_INET ? 32 : 128;
    range.prefix = bits;
    if (slash != std::string_view::npos) {
        const std::string_view prefix = text.substr(slash + 1);
        unsigned value = 0;
        auto [ptr, ec] = std::from_chars(prefix.data(), prefix.data() + prefix.size(), value);
        if (prefix.empty() || ec != std::errc() || ptr != prefix.data() + prefix.size() ||
            value > bits)
            return bad("prefix must be 0-" + std::to_string(bits));
        range.prefix = value;
    }
    if (range.prefix == 0) return bad("a range of every address; name a narrower one");
    return range;
}

bool egress_allowed(const std::vector<EgressRule>& rules, std::string_view host,
                    std::uint16_t port) {
    for (const auto& rule : rules) {
        if (rule.port != port) continue;
        std::string_view pattern = rule.host;
        if (pattern.starts_with("*.")) {
            pattern.remove_prefix(1);  // ".example.org"
            if (host.size() > pattern.size() && host.ends_with(pattern)) return true;
        } else if (host == pattern) {
            return true;
        }
    }
    return false;
}

std::optional<std::string_view> special_address(const sockaddr* address) {
    if (auto a4 = ipv4_of(address)) return special_ipv4(*a4);
    if (address->sa_family != AF_INET6) return "reserved";
    const auto& a6 = reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr;
    const unsigned char* b = a6.s6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&a6)) return "loopback";
    if (IN6_IS_ADDR_UNSPECIFIED(&a6)) return "reserved";
    if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) return "link-local";
    if ((b[0] & 0xfe) == 0xfc) return "unique-local";
    if (b[0] == 0xff) return "reserved";                           // multicast
    if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0) return "reserved";  // site-local
    if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8)
        return "reserved";  // documentation
    // NAT64 (64:ff9b::/96) carries an IPv4 address that may be a private one.
    static const unsigned char nat64[12] = {0, 0x64, 0xff, 0x9b};
    if (std::memcmp(b, nat64, 12) == 0) {
        std::uint32_t carried = 0;
        std::memcpy(&carried, b + 12, 4);
        return special_ipv4(ntohl(carried));
    }
    return std::nullopt;
}

bool range_contains(const EgressRange& range, const sockaddr* address) {
    if (range.family == AF_INET) {
        auto a4 = ipv4_of(address);
        if (!a4) return false;
        std::uint32_t network = 0;
        std::memcpy(&network, range.bytes, 4);
        return in4(*a4, ntohl(network), range.prefix);
    }
    if (address->sa_family != AF_INET6) return false;
    return prefix_matches(reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr.s6_addr,
                          range.bytes, range.prefix);
}

std::string address_text(const sockaddr* address) {
    char text[INET6_ADDRSTRLEN] = {};
    if (address->sa_family == AF_INET)
        ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(address)->sin_addr, text,
                    sizeof text);
    else if (address->sa_family == AF_INET6)
        ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr, text,
                    sizeof text);
    return text;
}

std::string describe(const EgressRule& rule) {
    return rule.host + ":" + std::to_string(rule.port);
}

std::string_view to_string(EgressVerdict verdict) {
    switch (verdict) {
        case EgressVerdict::allowed:
            return "allowed";
        case EgressVerdict::refused:
            return "refused";
        case EgressVerdict::failed:
            return "failed";
    }
    return "refused";
}

}  // namespace sandbox
