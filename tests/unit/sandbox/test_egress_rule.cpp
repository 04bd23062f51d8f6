// Egress rules, ranges and the address classes a name may not resolve to
// (sandbox/egress/egress_rule.hpp).
#include <arpa/inet.h>
#include <netinet/in.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <string>

#include "sandbox/egress/egress_rule.hpp"

namespace {

sockaddr_storage address(const std::string& text) {
    sockaddr_storage out{};
    auto* v4 = reinterpret_cast<sockaddr_in*>(&out);
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&out);
    if (::inet_pton(AF_INET, text.c_str(), &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
    } else {
        REQUIRE(::inet_pton(AF_INET6, text.c_str(), &v6->sin6_addr) == 1);
        v6->sin6_family = AF_INET6;
    }
    return out;
}

std::string special(const std::string& text) {
    const auto a = address(text);
    const auto why = sandbox::special_address(reinterpret_cast<const sockaddr*>(&a));
    return why ? std::string(*why) : "public";
}

bool contains(const std::string& range, const std::string& text) {
    auto parsed = sandbox::parse_egress_range(range);
    REQUIRE(parsed);
    const auto a = address(text);
    return sandbox::range_contains(*parsed, reinterpret_cast<const sockaddr*>(&a));
}

}  // namespace

TEST_CASE("parse_egress_rule: names, wildcards and ports; 443 by default; names normalised") {
    auto plain = sandbox::parse_egress_rule("registry.npmjs.org");
    REQUIRE(plain);
    CHECK(plain->host == "registry.npmjs.org");
    CHECK(plain->port == 443);
    auto upper = sandbox::parse_egress_rule("Deb.Debian.ORG.:80");
    REQUIRE(upper);
    CHECK(upper->host == "deb.debian.org");
    CHECK(upper->port == 80);
    auto wild = sandbox::parse_egress_rule("*.pythonhosted.org");
    REQUIRE(wild);
    CHECK(wild->host == "*.pythonhosted.org");
    CHECK(sandbox::describe(*wild) == "*.pythonhosted.org:443");
    CHECK(sandbox::parse_egress_rule("localhost:8123"));
    CHECK(sandbox::parse_egress_rule("under_score.example:1"));
}

TEST_CASE(
    "parse_egress_rule: a malformed host or port, an IP literal or a bad wildcard is one line "
    "naming it") {
    for (const char* bad :
         {"",        ":443",      "a:",       "a:0",        "a:65536", "a:-1",       "a:44x",
          "a b",     "-a.org",    "a-.org",   "a..org",     ".a.org",  "*",          "*.org",
          "a.*.org", "*a.org",    "**.a.org", "10.0.0.1",   "127.1",   "2130706433", "0x7f.0.0.1",
          "::1",     "[::1]:443", "fe80::1",  "a.org:443:1"}) {
        INFO(bad);
        auto refused = sandbox::parse_egress_rule(bad);
        REQUIRE_FALSE(refused);
        CHECK(refused.error().kind == common::ErrorKind::invalid_input);
        CHECK(refused.error().message.starts_with(std::string("--allow-egress '") + bad + "': "));
        CHECK(refused.error().message.find('\n') == std::string::npos);
    }
    auto literal = sandbox::parse_egress_rule("10.0.0.1:443");
    REQUIRE_FALSE(literal);
    CHECK(literal.error().message.find("IP") != std::string::npos);
    auto port = sandbox::parse_egress_rule("a.org:70000");
    REQUIRE_FALSE(port);
    CHECK(port.error().message.find("port must be 1-65535") != std::string::npos);
    std::string long_label(64, 'a');
    CHECK_FALSE(sandbox::parse_egress_rule(long_label + ".org"));
    CHECK(sandbox::parse_egress_rule(std::string(63, 'a') + ".org"));
}

TEST_CASE("egress_allowed: exact names, and a wildcard matches the names below its domain only") {
    std::vector<sandbox::EgressRule> rules = {*sandbox::parse_egress_rule("crates.io"),
                                              *sandbox::parse_egress_rule("*.example.org:8080")};
    CHECK(sandbox::egress_allowed(rules, "crates.io", 443));
    CHECK_FALSE(sandbox::egress_allowed(rules, "crates.io", 80));
    CHECK_FALSE(sandbox::egress_allowed(rules, "static.crates.io", 443));
    CHECK_FALSE(sandbox::egress_allowed(rules, "notcrates.io", 443));
    CHECK(sandbox::egress_allowed(rules, "a.example.org", 8080));
    CHECK(sandbox::egress_allowed(rules, "b.c.example.org", 8080));
    CHECK_FALSE(sandbox::egress_allowed(rules, "example.org", 8080));
    CHECK_FALSE(sandbox::egress_allowed(rules, "badexample.org", 8080));
    CHECK_FALSE(sandbox::egress_allowed(rules, "a.example.org", 443));
    CHECK_FALSE(sandbox::egress_allowed(rules, "a.example.org.evil.net", 8080));
}

TEST_CASE("is_ip_literal: every form the resolver would read as an address") {
    for (const char* literal : {"10.0.0.1", "127.1", "2130706433", "0x7f000001", "0177.0.0.1",
                                "::1", "[::1]", "fe80::1", "::ffff:10.0.0.1", "[2001:db8::1]"})
        CHECK(sandbox::is_ip_literal(literal));
    for (const char* name : {"localhost", "crates.io", "1.2.3.4.nip.io", "a1", "[]", "[crates.io]"})
        CHECK_FALSE(sandbox::is_ip_literal(name));
}

TEST_CASE(
    "special_address: loopback, link-local, private, unique-local and reserved; mapped IPv4 judged "
    "as IPv4") {
    CHECK(special("127.0.0.1") == "loopback");
    CHECK(special("127.255.0.9") == "loopback");
    CHECK(special("::1") == "loopback");
    CHECK(special("169.254.169.254") == "link-local");
    CHECK(special("fe80::1") == "link-local");
    CHECK(special("febf::1") == "link-local");
    CHECK(special("10.1.2.3") == "private");
    CHECK(special("172.16.0.1") == "private");
    CHECK(special("172.31.255.255") == "private");
    CHECK(special("192.168.1.1") == "private");
    CHECK(special("100.64.0.1") == "private");
    CHECK(special("100.127.255.255") == "private");
    CHECK(special("fc00::1") == "unique-local");
    CHECK(special("fdff::1") == "unique-local");
    CHECK(special("0.0.0.0") == "reserved");
    CHECK(special("::") == "reserved");
    CHECK(special("224.0.0.1") == "reserved");
    CHECK(special("255.255.255.255") == "reserved");
    CHECK(special("ff02::1") == "reserved");
    CHECK(special("::ffff:127.0.0.1") == "loopback");
    CHECK(special("::ffff:10.0.0.1") == "private");
    CHECK(special("64:ff9b::a9fe:a9fe") == "link-local");  // NAT64 of 169.254.169.254
    CHECK(special("172.32.0.1") == "public");
    CHECK(special("100.128.0.1") == "public");
    CHECK(special("93.184.216.34") == "public");
    CHECK(special("2a00:1450:4001::1") == "public");
    CHECK(special("::ffff:93.184.216.34") == "public");
}

TEST_CASE("parse_egress_range and range_contains") {
    CHECK(contains("127.0.0.1/32", "127.0.0.1"));
    CHECK_FALSE(contains("127.0.0.1/32", "127.0.0.2"));
    CHECK(contains("127.0.0.1", "::ffff:127.0.0.1"));
    CHECK(contains("10.20.0.0/16", "10.20.255.1"));
    CHECK_FALSE(contains("10.20.0.0/16", "10.21.0.1"));
    CHECK(contains("fd00::/8", "fd12:3456::1"));
    CHECK_FALSE(contains("fd00::/8", "fc00::1"));
    CHECK_FALSE(contains("fd00::/8", "10.0.0.1"));
    CHECK(contains("172.16.0.0/12", "172.31.0.1"));
    for (const char* bad : {"", "10.0.0.0/", "10.0.0.0/33", "::/129", "10.0.0/8", "x/8",
                            "0.0.0.0/0", "::/0", "10.0.0.0/8x"}) {
        INFO(bad);
        auto refused = sandbox::parse_egress_range(bad);
        REQUIRE_FALSE(refused);
        CHECK(
            refused.error().message.starts_with(std::string("--allow-egress-range '") + bad + "'"));
    }
}
