// The isolation flags (agent/cli/policy_options.cpp) as `sandgate exec` takes them, end to end.
#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <string>

#include "agent/cli/policy_options.hpp"
#include "sandbox/process/run.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"

namespace {

// `sandgate exec ARGS` through sh (unwrapped), its stdout and exit status.
sandbox::RunResult sandgate_exec(const std::string& args, const std::string& path_override = {}) {
    sandbox::RunRequest request;
    const std::string env = path_override.empty() ? "" : "env PATH=" + path_override + " ";
    request.argv = {"/bin/sh", "-c", env + std::string(SANDGATE_BINARY) + " exec " + args};
    request.env = sandbox::current_environment();
    request.policy.mode = sandbox::SandboxMode::off;
    return sandbox::run(request);
}

common::Expected<sandbox::Policy> parse(std::vector<std::string> args) {
    CLI::App app;
    agent::PolicyOptions options;
    agent::add_policy_options(app, options);
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    app.parse(reversed);
    return agent::to_policy(options);
}

}  // namespace

TEST_CASE("the flags become the policy; defaults are the safe ones") {
    auto defaults = parse({});
    REQUIRE(defaults);
    CHECK(defaults->mode == sandbox::SandboxMode::bwrap);
    CHECK(defaults->network == sandbox::NetworkMode::none);
    CHECK(defaults->offline == sandbox::Offline::automatic);
    auto full = parse(
        {"--network",  "host", "--read-only", "/a", "--read-only",       "/b",   "--writable", "/c",
         "--hide",     "/d",   "--scratch",   "/e", "--memory",          "512M", "--pids",     "64",
         "--tmp-size", "1G",   "--offline",   "on", "--toolchain-cache", "/f"});
    REQUIRE(full);
    CHECK(full->network == sandbox::NetworkMode::host);
    CHECK(full->read_only.size() == 2);
    CHECK(full->writable.front() == "/c");
    CHECK(full->hide.front() == "/d");
    CHECK(full->scratch == std::filesystem::path("/e"));
    CHECK(full->memory_bytes == (512ull << 20));
    CHECK(full->pids == 64u);
    CHECK(full->tmp_size_bytes == (1ull << 30));
    CHECK(full->offline == sandbox::Offline::on);
    CHECK(full->toolchain_cache == std::filesystem::path("/f"));
    auto container = parse(
        {"--sandbox", "container", "--image", "debian:12", "--container-runtime", "/x/podman"});
    REQUIRE(container);
    CHECK(container->image == "debian:12");
    CHECK(container->container_runtime == "/x/podman");
}

TEST_CASE("bad flag values are refused, naming the flag") {
    for (const auto& args :
         std::vector<std::vector<std::string>>{{"--memory", "lots"},
                                               {"--pids", "0"},
                                               {"--pids", "12x"},
                                               {"--tmp-size", "0"},
                                               {"--image", "debian:12"},
                                               {"--sandbox", "off", "--read-only", "/a"},
                                               {"--sandbox", "off", "--memory", "1G"}}) {
        auto policy = parse(args);
        INFO(args[0]);
        REQUIRE_FALSE(policy);
        CHECK(policy.error().kind == common::ErrorKind::invalid_input);
        CHECK(policy.error().message.find("--") == 0);
    }
}

TEST_CASE("sandgate exec: bad flags exit 125 with one line; missing bwrap is sandbox_unavailable") {
    const auto dir = tests::make_temp_dir("policy");
    auto bad = sandgate_exec("--cwd " + dir.string() + " --memory lots -- true");
    CHECK(bad.exit_status() == 125);
    CHECK(bad.err.head.find("--memory") != std::string::npos);
    auto unavailable =
        sandgate_exec("--json --cwd " + dir.string() + " -- true", dir.string() + ":/nonexistent");
    // sh itself is found through the absolute path of the shell; sandgate then lacks bwrap.
    CHECK(unavailable.exit_status() == 125);
    CHECK(unavailable.out.head.find("\"sandbox_unavailable\"") != std::string::npos);
    CHECK(unavailable.out.head.find("bubblewrap") != std::string::npos);
}

TEST_CASE("sandgate exec defaults to the wrap: no network, a private HOME, the flags honoured") {
    SKIP_UNDER_WRAP("nested bwrap cannot mount a new /proc inside the wrap");
    const auto dir = tests::make_temp_dir("policy");
    const auto ro = tests::make_temp_dir("policy-ro");
    tests::write_file(ro / "data", "readonly-data");
    // Readable by anyone: as root the sandbox is an unprivileged host uid, which root's 0700
    // temp dir would shut out (as in test_wrap.cpp).
    ::chmod(ro.c_str(), 0755);
    auto result = sandgate_exec("--json --cwd " + dir.string() + " --read-only " + ro.string() +
                                " --tmp-size 8M -- sh -c 'id -u; cat " + (ro / "data").string() +
                                "; echo; touch " + (ro / "x").string() +
                                " 2>/dev/null || echo ro; "
                                "df -k /tmp | tail -1'");
    CHECK(result.exit_status() == 0);
    CHECK(result.out.head.find("1000\\nreadonly-data\\nro\\n") != std::string::npos);
    CHECK(result.out.head.find("\"mode\":\"bwrap\"") != std::string::npos);
    CHECK(result.out.head.find("\"network\":\"none\"") != std::string::npos);
    CHECK(result.out.head.find(" 8192 ") != std::string::npos);
}

TEST_CASE(
    "--network allowlist takes --allow-egress HOST[:PORT] and --allow-egress-range, each needing "
    "the other") {
    auto policy = parse({"--network", "allowlist", "--allow-egress", "crates.io", "--allow-egress",
                         "*.Example.ORG:8080", "--allow-egress-range", "127.0.0.1/32"});
    REQUIRE(policy);
    CHECK(policy->network == sandbox::NetworkMode::none);  // loopback only, plus the proxy
    REQUIRE(policy->egress.size() == 2);
    CHECK(policy->egress[0].host == "crates.io");
    CHECK(policy->egress[0].port == 443);
    CHECK(policy->egress[1].host == "*.example.org");
    CHECK(policy->egress[1].port == 8080);
    REQUIRE(policy->egress_ranges.size() == 1);
    CHECK(policy->egress_ranges[0].text == "127.0.0.1/32");
    for (const char* bad :
         {"crates.io:0", "crates.io:65536", "crates.io:", "crates.io:https", ":443", "bad host",
          ".x", "10.0.0.7", "[2001:db8::1]:8080", "fe80::1", "a.*.org", "*.org"}) {
        INFO(bad);
        auto refused = parse({"--network", "allowlist", "--allow-egress", bad});
        REQUIRE_FALSE(refused);
        CHECK(refused.error().kind == common::ErrorKind::invalid_input);
        CHECK(refused.error().message.starts_with(std::string("--allow-egress '") + bad + "'"));
        CHECK(refused.error().message.find('\n') == std::string::npos);
    }
    auto preset =
        parse({"--network", "allowlist", "--allow-egress", "@crates", "--allow-egress", "a.org"});
    REQUIRE(preset);
    CHECK(preset->egress.size() == 4);  // crates.io, index.crates.io, static.crates.io, a.org
    auto unknown = parse({"--network", "allowlist", "--allow-egress", "@nope"});
    REQUIRE_FALSE(unknown);
    CHECK(unknown.error().message.starts_with("--allow-egress '@nope': unknown preset"));
    auto none = parse({"--allow-egress", "crates.io"});
    REQUIRE_FALSE(none);
    CHECK(none.error().message == "--allow-egress crates.io: needs --network allowlist");
    auto empty = parse({"--network", "allowlist"});
    REQUIRE_FALSE(empty);
    CHECK(empty.error().message.starts_with("--network allowlist: name the hosts"));
    auto range = parse({"--network", "allowlist", "--allow-egress", "a.org", "--allow-egress-range",
                        "10.0.0.0/33"});
    REQUIRE_FALSE(range);
    CHECK(range.error().message.starts_with("--allow-egress-range '10.0.0.0/33'"));
    auto off = parse({"--sandbox", "off", "--network", "allowlist", "--allow-egress", "crates.io"});
    REQUIRE_FALSE(off);
    CHECK(off.error().message.find("--allow-egress") != std::string::npos);
}

TEST_CASE("sandgate exec: a malformed --allow-egress is one line and exit 125, nothing run") {
    const auto dir = tests::make_temp_dir("policy");
    const auto marker = dir / "ran";
    for (const char* bad : {"crates.io:99999", "exa mple.org", "192.168.1.1:443"}) {
        INFO(bad);
        auto refused =
            sandgate_exec("--cwd " + dir.string() + " --network allowlist --allow-egress '" + bad +
                          "' -- touch " + marker.string());
        CHECK(refused.exit_status() == 125);
        CHECK(refused.err.head.find(std::string("--allow-egress '") + bad + "'") !=
              std::string::npos);
        CHECK(std::count(refused.err.head.begin(), refused.err.head.end(), '\n') == 1);
        CHECK_FALSE(std::filesystem::exists(marker));
    }
    auto off =
        sandgate_exec("--sandbox off --cwd " + dir.string() +
                      " --network allowlist --allow-egress crates.io -- touch " + marker.string());
    CHECK(off.exit_status() == 125);
    CHECK(off.err.head.find("--allow-egress") != std::string::npos);
    auto usage =
        sandgate_exec("--cwd " + dir.string() + " --network some -- touch " + marker.string());
    CHECK(usage.exit_status() == 125);  // exec refuses bad flags with 125, as it does every request
    CHECK_FALSE(std::filesystem::exists(marker));
}
