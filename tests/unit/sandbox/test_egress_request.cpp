// The egress proxy's request-head parser (sandbox/egress/egress_request.hpp).
#include <catch2/catch.hpp>
#include <string>

#include "sandbox/egress/egress_request.hpp"

TEST_CASE("request_head_end finds the blank line, or says the head is incomplete") {
    CHECK(sandbox::request_head_end("CONNECT a:1 HTTP/1.1\r\n\r\nxyz") == 24);
    CHECK(sandbox::request_head_end("CONNECT a:1 HTTP/1.1\r\nHost: a\r\n") == std::string::npos);
    CHECK(sandbox::request_head_end("") == std::string::npos);
}

TEST_CASE("CONNECT host:port: the name normalised, the port required, IPv6 in brackets") {
    auto tunnel = sandbox::parse_request_head(
        "CONNECT Registry.NPMjs.org.:443 HTTP/1.1\r\nHost: x\r\nUser-Agent: npm\r\n\r\n");
    REQUIRE(tunnel);
    CHECK(tunnel->method == sandbox::ProxyMethod::connect);
    CHECK(tunnel->host == "registry.npmjs.org");
    CHECK(tunnel->port == 443);
    CHECK(tunnel->upstream_head.empty());
    auto v6 = sandbox::parse_request_head("CONNECT [::1]:8443 HTTP/1.0\r\n\r\n");
    REQUIRE(v6);
    CHECK(v6->host == "::1");
    CHECK(v6->port == 8443);
    auto v4 = sandbox::parse_request_head("CONNECT 10.0.0.1:443 HTTP/1.1\r\n\r\n");
    REQUIRE(v4);
    CHECK(v4->host == "10.0.0.1");  // parsed; the proxy refuses the literal
    auto no_port = sandbox::parse_request_head("CONNECT crates.io HTTP/1.1\r\n\r\n");
    REQUIRE_FALSE(no_port);
    CHECK(no_port.error().status == 400);
}

TEST_CASE(
    "absolute-form http:// is forwarded with the head rewritten: origin form, Host from the URL, "
    "Connection: close") {
    auto get = sandbox::parse_request_head(
        "GET http://Deb.Debian.org/debian/dists/x?y=1 HTTP/1.1\r\nHost: "
        "evil.example\r\nProxy-Connection: keep-alive\r\n"
        "Proxy-Authorization: Basic eA==\r\nConnection: keep-alive\r\nAccept: */*\r\nUpgrade: "
        "h2c\r\n\r\n");
    REQUIRE(get);
    CHECK(get->method == sandbox::ProxyMethod::forward);
    CHECK(get->host == "deb.debian.org");
    CHECK(get->port == 80);
    CHECK(get->upstream_head ==
          "GET /debian/dists/x?y=1 HTTP/1.1\r\nHost: deb.debian.org\r\nAccept: */*\r\nConnection: "
          "close\r\n\r\n");
    auto port =
        sandbox::parse_request_head("POST http://a.org:8080 HTTP/1.0\r\nContent-Length: 3\r\n\r\n");
    REQUIRE(port);
    CHECK(port->port == 8080);
    CHECK(port->upstream_head ==
          "POST / HTTP/1.0\r\nHost: a.org:8080\r\nContent-Length: 3\r\nConnection: close\r\n\r\n");
    auto query = sandbox::parse_request_head("GET http://a.org?q HTTP/1.1\r\n\r\n");
    REQUIRE(query);
    CHECK(query->upstream_head.starts_with("GET /?q HTTP/1.1\r\n"));
}

TEST_CASE("everything else is refused: origin form and other schemes 405, malformed heads 400") {
    auto origin = sandbox::parse_request_head("GET / HTTP/1.1\r\nHost: a.org\r\n\r\n");
    REQUIRE_FALSE(origin);
    CHECK(origin.error().status == 405);
    auto tls = sandbox::parse_request_head("GET https://a.org/ HTTP/1.1\r\n\r\n");
    REQUIRE_FALSE(tls);
    CHECK(tls.error().status == 405);
    for (const char* bad :
         {"\r\n\r\n", "GET http://a.org/ HTTP/2\r\n\r\n", "GET  http://a.org/ HTTP/1.1\r\n\r\n",
          "GET http://a.org/ HTTP/1.1 x\r\n\r\n", "G(T http://a.org/ HTTP/1.1\r\n\r\n",
          "GET http://a.org/ HTTP/1.1\r\n folded\r\n\r\n",
          "GET http://a.org/ HTTP/1.1\r\nNo-Colon\r\n\r\n",
          "GET http://a.org/ HTTP/1.1\r\nBad Name: x\r\n\r\n",
          "GET http://a.org/ HTTP/1.1\r\nX: a\nb\r\n\r\n",
          "GET http://user:pw@a.org/ HTTP/1.1\r\n\r\n", "GET http:///x HTTP/1.1\r\n\r\n",
          "GET http://a..org/ HTTP/1.1\r\n\r\n", "GET http://a.org:0/ HTTP/1.1\r\n\r\n",
          "GET http://a.org:/ HTTP/1.1\r\n\r\n", "CONNECT [::1:443 HTTP/1.1\r\n\r\n",
          "CONNECT [zz]:443 HTTP/1.1\r\n\r\n", "CONNECT a b:443 HTTP/1.1\r\n\r\n",
          "CONNECT a.org:443 HTTP/1.1\r\n"}) {
        INFO(bad);
        auto refused = sandbox::parse_request_head(bad);
        REQUIRE_FALSE(refused);
        CHECK(refused.error().status == 400);
        CHECK_FALSE(refused.error().reason.empty());
        CHECK(refused.error().reason.find('\n') == std::string::npos);
    }
    const char raw[] = "GET http://a.org/ HTTP/1.1\r\nX: a\0b\r\n\r\n";
    const std::string nul(raw, sizeof raw - 1);
    CHECK_FALSE(sandbox::parse_request_head(nul));
}
