// The isolation flags (agent/policy_options.cpp) as `sandgate exec` takes them, end to end.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <string>

#include "agent/policy_options.hpp"
#include "sandbox/run.hpp"
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

sandbox::Expected<sandbox::Policy> parse(std::vector<std::string> args) {
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
    auto full = parse({"--network", "host", "--read-only", "/a", "--read-only", "/b", "--writable", "/c",
                       "--hide", "/d", "--scratch", "/e", "--memory", "512M", "--pids", "64",
                       "--tmp-size", "1G", "--offline", "on", "--toolchain-cache", "/f"});
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
    auto container = parse({"--sandbox", "container", "--image", "debian:12", "--container-runtime", "/x/podman"});
    REQUIRE(container);
    CHECK(container->image == "debian:12");
    CHECK(container->container_runtime == "/x/podman");
}

TEST_CASE("bad flag values are refused, naming the flag") {
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"--memory", "lots"}, {"--pids", "0"}, {"--pids", "12x"}, {"--tmp-size", "0"},
             {"--image", "debian:12"}, {"--sandbox", "off", "--read-only", "/a"},
             {"--sandbox", "off", "--memory", "1G"}}) {
        auto policy = parse(args);
        INFO(args[0]);
        REQUIRE_FALSE(policy);
        CHECK(policy.error().kind == sandbox::ErrorKind::invalid_input);
        CHECK(policy.error().message.find("--") == 0);
    }
}

TEST_CASE("sandgate exec: bad flags exit 125 with one line; missing bwrap is sandbox_unavailable") {
    const auto dir = tests::make_temp_dir("policy");
    auto bad = sandgate_exec("--cwd " + dir.string() + " --memory lots -- true");
    CHECK(bad.exit_status() == 125);
    CHECK(bad.err.head.find("--memory") != std::string::npos);
    auto unavailable = sandgate_exec("--json --cwd " + dir.string() + " -- true", dir.string() + ":/nonexistent");
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
                                "; echo; touch " + (ro / "x").string() + " 2>/dev/null || echo ro; "
                                "df -k /tmp | tail -1'");
    CHECK(result.exit_status() == 0);
    CHECK(result.out.head.find("1000\\nreadonly-data\\nro\\n") != std::string::npos);
    CHECK(result.out.head.find("\"mode\":\"bwrap\"") != std::string::npos);
    CHECK(result.out.head.find("\"network\":\"none\"") != std::string::npos);
    CHECK(result.out.head.find(" 8192 ") != std::string::npos);
}

TEST_CASE("--allow-egress takes HOST[:PORT], repeatable, and refuses what is not one") {
    auto policy = parse({"--allow-egress", "crates.io:443", "--allow-egress", "10.0.0.7",
                         "--allow-egress", "[2001:db8::1]:8080", "--allow-egress", "fe80::1"});
    REQUIRE(policy);
    REQUIRE(policy->egress.size() == 4);
    CHECK(policy->egress[0].host == "crates.io");
    CHECK(policy->egress[0].port == std::optional<std::uint16_t>(443));
    CHECK(policy->egress[1].host == "10.0.0.7");
    CHECK_FALSE(policy->egress[1].port);
    CHECK(policy->egress[2].host == "2001:db8::1");
    CHECK(policy->egress[2].port == std::optional<std::uint16_t>(8080));
    CHECK(policy->egress[3].host == "fe80::1");
    CHECK_FALSE(policy->egress[3].port);
    for (const char* bad : {"crates.io:0", "crates.io:65536", "crates.io:", "crates.io:https",
                                  ":443", "bad host", ".x", "[::1", "[::1]443", "[zz::1]:1"}) {
        INFO(bad);
        auto refused = parse({"--allow-egress", bad});
        REQUIRE_FALSE(refused);
        CHECK(refused.error().kind == sandbox::ErrorKind::invalid_input);
        CHECK(refused.error().message.starts_with("--allow-egress"));
    }
    auto off = parse({"--sandbox", "off", "--allow-egress", "crates.io"});
    REQUIRE_FALSE(off);
    CHECK(off.error().message.find("--allow-egress") != std::string::npos);
}

TEST_CASE("sandgate exec --allow-egress: refused with 125 and sandbox_unavailable, nothing run") {
    const auto dir = tests::make_temp_dir("policy");
    const auto marker = dir / "ran";
    auto refused = sandgate_exec("--json --cwd " + dir.string() +
                                 " --allow-egress crates.io:443 -- touch " + marker.string());
    CHECK(refused.exit_status() == 125);
    INFO(refused.out.head << refused.err.head);
    CHECK(refused.out.head.find("\"sandbox_unavailable\"") != std::string::npos);
    CHECK(refused.out.head.find("--allow-egress crates.io:443") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(marker));
    auto off = sandgate_exec("--sandbox off --cwd " + dir.string() +
                             " --allow-egress crates.io -- touch " + marker.string());
    CHECK(off.exit_status() == 125);
    CHECK(off.err.head.find("--allow-egress") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(marker));
}
