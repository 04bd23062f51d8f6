#pragma once
// Selective egress (`--network allowlist`): what a step may reach through the run's filtering
// proxy (egress_proxy.hpp), and the evidence of every connection it made.
//
// A rule names a host and a port: `crates.io` (port 443), `deb.debian.org:80`, or
// `*.example.org:443`, which matches the names below example.org (a.example.org,
// b.c.example.org) but not example.org itself. Rules name hosts, never addresses: the proxy
// refuses every IP literal, and a name that resolves to a loopback, link-local, private,
// unique-local or otherwise special address unless that address lies in a range the run
// names explicitly (`--allow-egress-range 10.20.0.0/16` for an internal mirror,
// `--allow-egress-range 127.0.0.1/32` for a test server on the host's loopback).

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sandbox/base.hpp"

namespace sandbox {

inline constexpr std::uint16_t k_default_egress_port = 443;

struct EgressRule {
    std::string host;  // lower case, no trailing dot; "*.suffix" for the names below suffix
    std::uint16_t port = k_default_egress_port;
};

// An address range (CIDR) that allowed names may resolve into although it is special.
struct EgressRange {
    int family = AF_INET;  // AF_INET or AF_INET6
    unsigned char bytes[16] = {};
    unsigned prefix = 0;
    std::string text;  // as given, for messages and the posture
};

// What the proxy may use, per run. The defaults are far above what a dependency install needs.
struct EgressLimits {
    std::uint64_t max_connections = 65536;  // accepted per run; later ones are refused
    std::uint64_t max_concurrent = 256;     // open at once; more are refused (503)
    std::uint64_t max_bytes = 64ULL << 30;  // both ways together, per run; then all are closed
    std::chrono::milliseconds idle_timeout{
        300'000};                                    // no byte either way: the connection is closed
    std::chrono::milliseconds head_timeout{30'000};  // to send the request head
    std::chrono::milliseconds connect_timeout{30'000};
    std::size_t max_head_bytes = 32 * 1024;
};

enum class EgressVerdict { allowed, refused, failed };  // failed: allowed, but not reachable

// One connection the step made to the proxy, as the run's evidence (RunResult::egress).
struct EgressConnection {
    std::string host;  // as requested (normalised); empty when the request named none
    std::uint16_t port = 0;
    EgressVerdict verdict = EgressVerdict::refused;
    std::string
        reason;  // why refused or failed; how an allowed one ended ("closed", "idle timeout")
    std::string address;  // the address connected to, when one was
    std::uint64_t bytes_out =
        0;  // step -> destination (a forwarded request's rewritten head included)
    std::uint64_t bytes_in = 0;  // destination -> step (not the proxy's own answers)
    std::chrono::milliseconds duration{0};
};

struct EgressReport {
    std::vector<EgressConnection> connections;
    std::uint64_t unrecorded = 0;  // connections beyond the record cap, closed unanswered
};

// Parses HOST[:PORT] as typed after --allow-egress. invalid_input, one line naming `text`, for
// an empty or malformed host, an IP literal, a bad wildcard or a port outside 1-65535.
Expected<EgressRule> parse_egress_rule(std::string_view text);

// Parses ADDRESS/PREFIX (or a bare address: the one address). invalid_input naming `text`.
Expected<EgressRange> parse_egress_range(std::string_view text);

// `host` lower-cased without a trailing dot when it is a syntactically valid DNS name (labels
// of 1-63 letters, digits, '-' and '_', not starting or ending with '-'; at most 253
// characters); nullopt otherwise. IP literals pass too (they are names syntactically);
// see is_ip_literal.
std::optional<std::string> normal_host_name(std::string_view host);

// True for anything the system would read as an address rather than a name: dotted IPv4 in
// every form inet_aton takes (127.1, 0x7f.1, 2130706433) and IPv6 (with or without brackets).
bool is_ip_literal(std::string_view host);

// Whether some rule allows `host` (normalised) on `port`.
bool egress_allowed(const std::vector<EgressRule>& rules, std::string_view host,
                    std::uint16_t port);

// Why an address is not an ordinary public one: "loopback", "link-local", "private",
// "unique-local", "reserved" (unspecified, multicast, broadcast, documentation...); nullopt
// for a public address. IPv4-mapped IPv6 addresses are judged as the IPv4 address they carry.
std::optional<std::string_view> special_address(const sockaddr* address);

// Whether `range` contains `address` (an IPv4-mapped IPv6 address counts as its IPv4 one).
bool range_contains(const EgressRange& range, const sockaddr* address);

// The numeric text of an AF_INET/AF_INET6 address ("10.0.0.1", "fe80::1").
std::string address_text(const sockaddr* address);

// `text` as one printable line for a message built from input: control bytes as \xNN, at
// most 200 bytes of it (like jobs::one_line, which the sandbox library cannot reach).
std::string printable(std::string_view text);

// "host:port" ("*.example.org:443").
std::string describe(const EgressRule& rule);

std::string_view to_string(EgressVerdict verdict);

}  // namespace sandbox
