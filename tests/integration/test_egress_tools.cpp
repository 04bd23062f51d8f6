// --network allowlist with the tools a job downloads with, through `sandgate run`: curl,
// python's urllib, git (dumb HTTP) and pip against a real server on the host's 127.0.0.1
// (tests/helpers/egress_server.py), and a real `npm ci` of a small lockfile against this
// machine's configured npm registry. The allowed names are reached, the others refused, and
// every connection is evidence in the step's report ("egress") and, refused, a line of its log.
#include <netdb.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sandbox/egress/egress_rule.hpp"
#include "sandbox/process/run.hpp"
#include "tests/support/egress_server.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"

namespace {

using nlohmann::json;

// Through the proxy even for "localhost" (the wrap's NO_PROXY names loopback, for a step's own
// servers inside the sandbox).
constexpr const char* k_via_proxy = "env -u NO_PROXY -u no_proxy ";

// The host side's fixtures under DIR/served: a bare repository ready for dumb HTTP
// (served/repo.git) and a pip index with one wheel (served/simple/demo/); DIR/npm holds a
// package.json and the lockfile of one dependency-free package.
void make_fixtures(const std::filesystem::path& dir) {
    const auto served = dir / "served";
    const std::string script =
        "set -e; cd '" + dir.string() +
        "'; git init -q -b main work; "
        "git -C work -c user.name=t -c user.email=t@example.com commit -q --allow-empty "
        "-m 'through the proxy'; git clone -q --bare work served/repo.git; "
        "git -C served/repo.git update-server-info; mkdir -p served/simple/demo npm; "
        "/usr/bin/python3 -c '\n"
        "import zipfile\n"
        "with zipfile.ZipFile(\"served/simple/demo/demo-1.0-py3-none-any.whl\", \"w\") as w:\n"
        "    w.writestr(\"demo/__init__.py\", \"\")\n"
        "    w.writestr(\"demo-1.0.dist-info/METADATA\", "
        "\"Metadata-Version: 2.1\\nName: demo\\nVersion: 1.0\\n\")\n"
        "    w.writestr(\"demo-1.0.dist-info/WHEEL\", \"Wheel-Version: 1.0\\nGenerator: t\\n"
        "Root-Is-Purelib: true\\nTag: py3-none-any\\n\")\n"
        "    w.writestr(\"demo-1.0.dist-info/RECORD\", \"\")\n'";
    REQUIRE(std::system(script.c_str()) == 0);
    tests::write_file(served / "simple/demo/index.html",
                      "<html><body><a href=\"demo-1.0-py3-none-any.whl\">"
                      "demo-1.0-py3-none-any.whl</a></body></html>\n");
    tests::write_file(
        dir / "npm/package.json",
        R"({"name": "probe", "version": "1.0.0", "dependencies": {"is-number": "7.0.0"}})");
    tests::write_file(dir / "npm/package-lock.json", R"({
  "name": "probe", "version": "1.0.0", "lockfileVersion": 3, "requires": true,
  "packages": {
    "": {"name": "probe", "version": "1.0.0", "dependencies": {"is-number": "7.0.0"}},
    "node_modules/is-number": {
      "version": "7.0.0",
      "integrity": "sha512-41Cifkg6e8TylSpdtTpeLVMqvSBEVzTttHvERD741+pnZ8ANv0004MRL43QKPDlK9cGvNp6NZWZUBlbGXYxxng=="
    }
  }
}
)");
}

// The addresses this machine resolves `host` to, each as a one-address range when it is a
// special one (a mirror or an interception proxy in a documentation range, say), so that the
// configured registry is reachable as it is configured.
std::vector<std::string> special_ranges(const std::string& host) {
    std::vector<std::string> out;
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (::getaddrinfo(host.c_str(), "443", &hints, &found) != 0) return out;
    for (auto* a = found; a != nullptr; a = a->ai_next)
        if (sandbox::special_address(a->ai_addr))
            out.push_back(sandbox::address_text(a->ai_addr) +
                          (a->ai_family == AF_INET ? "/32" : "/128"));
    ::freeaddrinfo(found);
    return out;
}

const json* step(const json& report, const std::string& id) {
    for (const auto& s : report["workflows"][0]["jobs"][0]["steps"])
        if (s["id"] == id) return &s;
    return nullptr;
}

}  // namespace

TEST_CASE(
    "sandgate run --network allowlist: curl, urllib, git, pip and npm ci reach what is allowed; "
    "the rest is refused; each step's report holds its connections") {
    SKIP_UNDER_WRAP("nested bwrap cannot mount a new /proc inside the wrap");
    const auto dir = tests::make_temp_dir("egress-tools");
    make_fixtures(dir);
    tests::EgressServer http(dir, "http", false, dir / "served");
    const std::string base = "http://localhost:" + http.port_text();
    const std::string via = k_via_proxy;
    tests::write_file(
        dir / ".github/workflows/w.yml",
        "on: push\njobs:\n  fetch:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - id: curl\n        run: " +
            via + "curl -sS --max-time 60 " + base +
            "/hello\n"
            "      - id: urllib\n        run: >-\n          " +
            via +
            "/usr/bin/python3 -c 'import urllib.request; "
            "print(urllib.request.urlopen(\"" +
            base +
            "/hello\", timeout=60).read().decode(), end=\"\")'\n"
            "      - id: git\n        run: " +
            via + "git clone -q " + base +
            "/files/repo.git cloned && git -C cloned log --format=%s\n"
            "      - id: pip\n        run: " +
            via +
            "/usr/bin/python3 -m pip download -q --no-deps --no-cache-dir "
            "--disable-pip-version-check --trusted-host localhost --index-url " +
            base +
            "/files/simple/ -d wheels demo && ls wheels\n"
            "      - id: npm\n        working-directory: npm\n        run: >-\n"
            "          npm ci --no-audit --no-fund --loglevel=error &&\n"
            "          node -e 'console.log(\"is-number:\", require(\"is-number\")(5))'\n"
            "      - id: refused\n        run: >-\n"
            "          curl -sS --max-time 60 http://example.org/ || true;\n"
            "          curl -sS --max-time 60 -k https://203.0.113.80/ || true\n");
    std::vector<std::string> argv = {SANDGATE_BINARY,
                                     "run",
                                     "--report",
                                     (dir / "r.json").string(),
                                     "--network",
                                     "allowlist",
                                     "--allow-egress",
                                     "localhost:" + http.port_text(),
                                     "--allow-egress",
                                     "@npm",
                                     "--allow-egress-range",
                                     "127.0.0.1/32",
                                     "--allow-egress-range",
                                     "::1"};
    for (const auto& range : special_ranges("registry.npmjs.org"))
        argv.insert(argv.end(), {"--allow-egress-range", range});
    sandbox::RunRequest request;
    request.argv = argv;
    request.cwd = dir;
    request.env = sandbox::current_environment();
    request.policy.mode = sandbox::SandboxMode::off;
    request.output_limit = 1 << 20;
    request.timeout = std::chrono::minutes(5);
    const auto result = sandbox::run(request);
    const std::string log = result.out.head + result.err.head;
    INFO(log);
    CHECK(result.exit_code == 0);
    const std::string hello = "hello from the host (host=localhost:" + http.port_text() + ")";
    CHECK(log.find("through the proxy") != std::string::npos);          // git
    CHECK(log.find("demo-1.0-py3-none-any.whl") != std::string::npos);  // pip
    CHECK(log.find("is-number: true") != std::string::npos);            // npm ci
    CHECK(log.find("egress refused: example.org:80 (not on the allowlist)") != std::string::npos);
    CHECK(log.find("egress refused: 203.0.113.80:443 (an IP literal") != std::string::npos);

    const auto report = json::parse(tests::read_file(dir / "r.json"));
    for (const std::string id : {"curl", "urllib", "git", "pip"}) {
        const auto* s = step(report, id);
        REQUIRE(s);
        INFO(id << ": " << s->dump());
        CHECK((*s)["conclusion"] == "success");
        REQUIRE(s->contains("egress"));
        const auto& connections = (*s)["egress"]["connections"];
        REQUIRE(!connections.empty());
        for (const auto& c : connections) {
            CHECK(c["host"] == "localhost");
            CHECK(c["port"] == http.port());
            CHECK(c["verdict"] == "allowed");
            CHECK(c["address"] == "127.0.0.1");
            CHECK(c["bytes_out"].get<std::uint64_t>() > 0);
            CHECK(c["bytes_in"].get<std::uint64_t>() > 0);
            CHECK(c.contains("duration_ms"));
        }
    }
    const auto* npm = step(report, "npm");
    REQUIRE(npm);
    INFO(npm->dump());
    REQUIRE(npm->contains("egress"));
    bool registry = false;
    for (const auto& c : (*npm)["egress"]["connections"])
        registry = registry || (c["host"] == "registry.npmjs.org" && c["port"] == 443 &&
                                c["verdict"] == "allowed" && c["bytes_in"].get<int>() > 1000);
    CHECK(registry);
    const auto* refused = step(report, "refused");
    REQUIRE(refused);
    const auto& connections = (*refused)["egress"]["connections"];
    REQUIRE(connections.size() == 2);
    CHECK(connections[0]["host"] == "example.org");
    CHECK(connections[0]["verdict"] == "refused");
    CHECK(connections[0]["reason"] == "not on the allowlist");
    CHECK(connections[0]["bytes_in"] == 0);
    CHECK(connections[1]["verdict"] == "refused");
    CHECK(connections[1]["reason"].get<std::string>().starts_with("an IP literal"));
    CHECK(http.requests().find("GET /files/repo.git/info/refs") != std::string::npos);
    CHECK(log.find(hello) != std::string::npos);
}
