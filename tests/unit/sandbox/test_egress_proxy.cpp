// --network allowlist end to end (sandbox/egress/egress_proxy.hpp): real HTTP and HTTPS servers on
// the host's 127.0.0.1 (tests/helpers/egress_server.py), outside the step's network namespace;
// the step under real bwrap reaching them with curl and python's urllib through the wrap's
// forwarder and the trusted side's proxy.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "sandbox/egress/egress_proxy.hpp"
#include "sandbox/process/result_json.hpp"
#include "sandbox/process/run.hpp"
#include "tests/support/egress_server.hpp"
#include "tests/support/read_fd.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"

extern char** environ;

namespace {

#define K_NESTED "nested bwrap cannot mount a new /proc inside the wrap"

using tests::EgressServer;

sandbox::EgressRule rule(const std::string& text) {
    auto parsed = sandbox::parse_egress_rule(text);
    REQUIRE(parsed);
    return *parsed;
}

sandbox::EgressRange range(const std::string& text) {
    auto parsed = sandbox::parse_egress_range(text);
    REQUIRE(parsed);
    return *parsed;
}

// A step under bwrap with --network allowlist; `ranges` the loopback of the host (the test
// servers) unless told otherwise.
sandbox::RunRequest step(const std::filesystem::path& dir, const std::string& script,
                         std::vector<sandbox::EgressRule> rules, bool loopback_range = true) {
    sandbox::RunRequest request;
    request.argv = {"/bin/sh", "-c", script};
    request.cwd = dir;
    request.env = {{"PATH", "/usr/bin:/bin"}, {"LANG", "C.UTF-8"}};
    request.timeout = std::chrono::seconds(120);
    request.output_limit = 1 << 20;
    request.policy.egress = std::move(rules);
    if (loopback_range) request.policy.egress_ranges = {range("127.0.0.1/32"), range("::1")};
    return request;
}

// curl and python, through the proxy even for "localhost" (the wrap's NO_PROXY names loopback
// for a step's own servers inside the sandbox).
std::string curl(const std::string& args) {
    return "env -u NO_PROXY -u no_proxy curl -sS --max-time 60 " + args;
}

const sandbox::EgressConnection* find(const sandbox::RunResult& result, const std::string& host,
                                      int port) {
    if (!result.egress) return nullptr;
    for (const auto& c : result.egress->connections)
        if (c.host == host && c.port == port) return &c;
    return nullptr;
}

void make_certificate(const std::filesystem::path& dir) {
    sandbox::RunRequest openssl;
    openssl.argv = {"openssl",  "req",
                    "-x509",    "-newkey",
                    "rsa:2048", "-nodes",
                    "-subj",    "/CN=localhost",
                    "-addext",  "subjectAltName=DNS:localhost",
                    "-days",    "2",
                    "-keyout",  (dir / "key.pem").string(),
                    "-out",     (dir / "cert.pem").string()};
    openssl.env = sandbox::current_environment();
    openssl.policy.mode = sandbox::SandboxMode::off;
    const auto made = sandbox::run(openssl);
    INFO(made.err.head);
    REQUIRE(made.exit_code == 0);
    ::chmod((dir / "key.pem").c_str(), 0644);
}

std::size_t open_fds() {
    return static_cast<std::size_t>(
        std::distance(std::filesystem::directory_iterator("/proc/self/fd"),
                      std::filesystem::directory_iterator{}));
}

std::size_t threads() {
    return static_cast<std::size_t>(
        std::distance(std::filesystem::directory_iterator("/proc/self/task"),
                      std::filesystem::directory_iterator{}));
}

}  // namespace

TEST_CASE(
    "an allowed name is reached by curl and python's urllib, over HTTP and HTTPS (CONNECT), with "
    "evidence") {
    SKIP_UNDER_WRAP(K_NESTED);
    const auto dir = tests::make_temp_dir("egress");
    make_certificate(dir);
    EgressServer http(dir, "http", false);
    EgressServer https(dir, "https", true);
    const std::string python =
        "env -u NO_PROXY -u no_proxy /usr/bin/python3 -c 'import urllib.request; "
        "print(urllib.request.urlopen(\"http://localhost:" +
        http.port_text() + "/hello\", timeout=60).read().decode(), end=\"\")'";
    const std::string script =
        curl("http://localhost:" + http.port_text() + "/hello") + " && " +
        curl("--cacert cert.pem https://localhost:" + https.port_text() + "/hello") + " && " +
        python + " && " +
        curl("-o /dev/null -w '%{size_download}\\n' http://localhost:" + http.port_text() +
             "/bytes/67108864");
    const auto before_fds = open_fds();
    const auto before_threads = threads();
    const auto result = sandbox::run(
        step(dir, script,
             {rule("localhost:" + http.port_text()), rule("localhost:" + https.port_text())}));
    INFO(result.out.head << result.err.head << (result.error ? result.error->message : ""));
    REQUIRE(result.exit_code == 0);
    const std::string seen = "hello from the host (host=localhost:" + http.port_text() + ")\n";
    CHECK(result.out.head == seen + "hello from the host (host=localhost:" + https.port_text() +
                                 ")\n" + seen + "67108864\n");
    REQUIRE(result.egress);
    CHECK(result.egress->connections.size() == 4);
    for (const auto& c : result.egress->connections) {
        CHECK(c.verdict == sandbox::EgressVerdict::allowed);
        CHECK(c.address == "127.0.0.1");
        CHECK(c.host == "localhost");
        CHECK(c.bytes_in > 0);
        CHECK(c.bytes_out > 0);
    }
    const auto* tls = find(result, "localhost", https.port());
    REQUIRE(tls);
    CHECK(tls->bytes_out > 200);  // a TLS ClientHello at least, relayed as it was
    std::uint64_t largest = 0;
    for (const auto& c : result.egress->connections) largest = std::max(largest, c.bytes_in);
    CHECK(largest > 67108864);  // the whole download went through, body and all
    CHECK(result.sandbox["network"] == "allowlist");
    const auto doc = sandbox::to_json(result);
    CHECK(doc["egress"]["connections"].size() == 4);
    CHECK(doc["egress"]["connections"][0]["verdict"] == "allowed");
    CHECK(http.requests().find("GET /hello host=localhost:" + http.port_text()) !=
          std::string::npos);
    // The proxy's threads, sockets and pipes are gone with the run.
    CHECK(open_fds() == before_fds);
    CHECK(threads() == before_threads);
}

TEST_CASE(
    "names not on the list, IP literals and a name resolving to loopback without its range are "
    "refused, with evidence and a log line") {
    SKIP_UNDER_WRAP(K_NESTED);
    const auto dir = tests::make_temp_dir("egress");
    EgressServer http(dir, "http", false);
    const std::string port = http.port_text();
    const std::string script = curl("http://example.org/") + "; " +
                               curl("http://127.0.0.1:" + port + "/hello") + "; " +
                               curl("-k https://[::1]:" + port + "/") + "; " +
                               curl("http://2130706433:" + port + "/hello") + "; " +
                               curl("http://localhost:" + port + "/hello") + "; exit 0";
    const auto result = sandbox::run(
        step(dir, script, {rule("localhost:" + port), rule("example.org:443")}, false));
    INFO(result.out.head << result.err.head);
    REQUIRE(result.exit_code == 0);
    REQUIRE(result.egress);
    CHECK(result.egress->connections.size() == 5);
    for (const auto& c : result.egress->connections) {
        CHECK(c.verdict == sandbox::EgressVerdict::refused);
        CHECK(c.address.empty());
        CHECK(c.bytes_in == 0);
    }
    const auto* listed = find(result, "example.org", 80);
    REQUIRE(listed);
    CHECK(listed->reason == "not on the allowlist");
    const auto* literal = find(result, "127.0.0.1", http.port());
    REQUIRE(literal);
    CHECK(literal->reason.starts_with("an IP literal"));
    REQUIRE(find(result, "::1", http.port()));
    // 2130706433 too (curl may send it as 127.0.0.1; the proxy refuses either form).
    CHECK(std::count_if(result.egress->connections.begin(), result.egress->connections.end(),
                        [](const auto& c) { return c.reason.starts_with("an IP literal"); }) == 3);
    const auto* loopback = find(result, "localhost", http.port());
    REQUIRE(loopback);
    CHECK(loopback->reason.starts_with("resolves to loopback address "));
    CHECK(result.err.head.find("egress refused: example.org:80 (not on the allowlist)\n") !=
          std::string::npos);
    CHECK(result.err.head.find("egress refused: [::1]:" + port + " (an IP literal") !=
          std::string::npos);
    CHECK(result.err.head.find("egress refused: localhost:" + port +
                               " (resolves to loopback address") != std::string::npos);
    CHECK(result.out.head.find("sandgate: egress refused") !=
          std::string::npos);        // curl shows the 403 body
    CHECK(http.requests().empty());  // nothing reached the server
}

TEST_CASE("limits: connections per run, bytes per run and the idle timeout") {
    SKIP_UNDER_WRAP(K_NESTED);
    const auto dir = tests::make_temp_dir("egress");
    EgressServer http(dir, "http", false);
    const std::string url = "http://localhost:" + http.port_text();
    SECTION("connections") {
        auto request = step(dir,
                            curl(url + "/hello") + " && " + curl(url + "/hello") + " && " +
                                curl("-f " + url + "/hello"),
                            {rule("localhost:" + http.port_text())});
        request.policy.egress_limits.max_connections = 2;
        const auto result = sandbox::run(request);
        INFO(result.out.head << result.err.head);
        CHECK(result.exit_code == 22);  // curl -f: the 403
        REQUIRE(result.egress);
        REQUIRE(result.egress->connections.size() == 3);
        CHECK(result.egress->connections[1].verdict == sandbox::EgressVerdict::allowed);
        CHECK(result.egress->connections[2].verdict == sandbox::EgressVerdict::refused);
        CHECK(result.egress->connections[2].reason == "connection limit reached (2 per run)");
        CHECK(result.err.head.find("egress refused: localhost:" + http.port_text() +
                                   " (connection limit reached (2 per run))") != std::string::npos);
    }
    SECTION("bytes") {
        auto request = step(dir, curl(url + "/bytes/16777216 -o out"),
                            {rule("localhost:" + http.port_text())});
        request.policy.egress_limits.max_bytes = 1 << 20;
        const auto result = sandbox::run(request);
        INFO(result.out.head << result.err.head);
        CHECK(result.exit_code != 0);
        REQUIRE(result.egress);
        REQUIRE(result.egress->connections.size() == 1);
        const auto& c = result.egress->connections[0];
        CHECK(c.reason.starts_with("byte limit reached"));
        CHECK(c.bytes_in < (16u << 20));
        CHECK(std::filesystem::file_size(dir / "out") < (16u << 20));
    }
    SECTION("idle") {
        auto request = step(dir, curl(url + "/stall/20"), {rule("localhost:" + http.port_text())});
        request.policy.egress_limits.idle_timeout = std::chrono::milliseconds(1000);
        const auto result = sandbox::run(request);
        INFO(result.out.head << result.err.head);
        CHECK(result.exit_code != 0);
        CHECK(result.duration < std::chrono::seconds(15));
        REQUIRE(result.egress);
        REQUIRE(result.egress->connections.size() == 1);
        CHECK(result.egress->connections[0].reason == "idle timeout (1s)");
    }
}

TEST_CASE(
    "sandgate exec --network allowlist: a name resolving to a private address is refused; --json "
    "carries the evidence") {
    SKIP_UNDER_WRAP(K_NESTED);
    const auto dir = tests::make_temp_dir("egress");
    EgressServer http(dir, "http", false);
    const std::string port = http.port_text();
    // The trusted side resolves through nss_wrapper (a hosts file of the test's own): a real
    // getaddrinfo, with names this machine's DNS does not have.
    tests::write_file(dir / "hosts", "10.1.2.3 private.test\n127.0.0.1 loop.test\n");
    sandbox::RunRequest request;
    // The launcher `sandgate` is linked static (no LD_PRELOAD); sandgate-full runs the same exec.
    const auto full = std::filesystem::path(SANDGATE_BINARY).parent_path() / "sandgate-full";
    request.argv = {full.string(),
                    "exec",
                    "--json",
                    "--cwd",
                    dir.string(),
                    "--network",
                    "allowlist",
                    "--allow-egress",
                    "private.test:" + port,
                    "--allow-egress",
                    "loop.test:" + port,
                    "--allow-egress-range",
                    "127.0.0.0/8",
                    "--",
                    "/bin/sh",
                    "-c",
                    curl("http://private.test:" + port + "/hello") + "; " +
                        curl("http://loop.test:" + port + "/hello")};
    request.env = sandbox::child_environment(sandbox::current_environment(), {},
                                             {{"LD_PRELOAD", "libnss_wrapper.so"},
                                              {"NSS_WRAPPER_HOSTS", (dir / "hosts").string()},
                                              {"NSS_WRAPPER_PASSWD", "/etc/passwd"},
                                              {"NSS_WRAPPER_GROUP", "/etc/group"}});
    request.policy.mode = sandbox::SandboxMode::off;
    request.output_limit = 1 << 20;
    const auto result = sandbox::run(request);
    INFO(result.out.head << result.err.head);
    REQUIRE(result.exit_code == 0);
    const std::string& json = result.out.head;
    CHECK(json.find("\"network\":\"allowlist\"") != std::string::npos);
    CHECK(
        json.find("\"host\":\"private.test\",\"port\":" + port +
                  ",\"verdict\":\"refused\",\"reason\":\"resolves to private address 10.1.2.3\"") !=
        std::string::npos);
    CHECK(json.find("\"host\":\"loop.test\",\"port\":" + port + ",\"verdict\":\"allowed\"") !=
          std::string::npos);
    CHECK(json.find("hello from the host (host=loop.test:" + port + ")") != std::string::npos);
    CHECK(json.find("egress refused: private.test:" + port +
                    " (resolves to private address 10.1.2.3)") != std::string::npos);
}

TEST_CASE("sandgate exec: --allow-egress without --network allowlist, or malformed, runs nothing") {
    const auto dir = tests::make_temp_dir("egress");
    const auto marker = dir / "ran";
    for (const std::vector<std::string>& flags :
         {std::vector<std::string>{"--allow-egress", "crates.io"},
          std::vector<std::string>{"--network", "allowlist", "--allow-egress", "crates.io:0"},
          std::vector<std::string>{"--network", "allowlist", "--allow-egress", "[::1]:443"},
          std::vector<std::string>{"--network", "allowlist", "--allow-egress", "a.org",
                                   "--allow-egress-range", "nope"},
          std::vector<std::string>{"--network", "allowlist"}}) {
        sandbox::RunRequest request;
        request.argv = {SANDGATE_BINARY, "exec", "--cwd", dir.string()};
        request.argv.insert(request.argv.end(), flags.begin(), flags.end());
        request.argv.insert(request.argv.end(), {"--", "touch", marker.string()});
        request.env = sandbox::current_environment();
        request.policy.mode = sandbox::SandboxMode::off;
        const auto result = sandbox::run(request);
        INFO(flags.back() << ": " << result.err.head);
        CHECK(result.exit_code == 125);
        CHECK(std::count(result.err.head.begin(), result.err.head.end(), '\n') == 1);
        CHECK(result.err.head.find("--") != std::string::npos);
        CHECK_FALSE(std::filesystem::exists(marker));
    }
}

TEST_CASE(
    "sandgate run --network allowlist: a workflow's steps reach the allowed name, a refusal is in "
    "the step's log") {
    SKIP_UNDER_WRAP(K_NESTED);
    const auto dir = tests::make_temp_dir("egress");
    EgressServer http(dir, "http", false);
    const std::string port = http.port_text();
    tests::write_file(dir / ".github/workflows/w.yml",
                      "on: push\njobs:\n  fetch:\n    runs-on: ubuntu-latest\n    steps:\n"
                      "      - run: " +
                          curl("http://localhost:" + port + "/hello") +
                          " > got.txt\n"
                          "      - run: " +
                          curl("http://example.org/") + " || true\n");
    sandbox::RunRequest request;
    request.argv = {SANDGATE_BINARY,
                    "run",
                    "--bind",  // got.txt lands in the repository directory
                    "--report",
                    (dir / "r.json").string(),
                    "--network",
                    "allowlist",
                    "--allow-egress",
                    "localhost:" + port,
                    "--allow-egress",
                    "example.org",
                    "--allow-egress-range",
                    "127.0.0.1/32",
                    "--allow-egress-range",
                    "::1"};
    request.cwd = dir;
    request.env = sandbox::current_environment();
    request.policy.mode = sandbox::SandboxMode::off;
    request.output_limit = 1 << 20;
    const auto result = sandbox::run(request);
    INFO(result.out.head << result.err.head);
    CHECK(result.exit_code == 0);
    CHECK(tests::read_file(dir / "got.txt") ==
          "hello from the host (host=localhost:" + port + ")\n");
    CHECK((result.out.head + result.err.head)
              .find("egress refused: example.org:80 (not on the allowlist)") != std::string::npos);
}
