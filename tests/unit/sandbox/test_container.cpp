// The container arm (sandbox/wrap/container.cpp) against a stand-in runtime script
// (tests/helpers/fake-runtime.sh) that records its argv: podman cannot start containers here
// and no Docker engine runs, so the real runtimes are not exercised.
#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>

#include "sandbox/wrap/container.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_spawn.hpp"

namespace {

// A copy of the stand-in in a fresh directory (its logs land beside it).
std::filesystem::path fake_runtime(const std::filesystem::path& dir) {
    const auto path = dir / "fake-runtime";
    std::filesystem::copy_file(
        std::filesystem::path(SANDGATE_SOURCE_DIR) / "tests/helpers/fake-runtime.sh", path);
    ::chmod(path.c_str(), 0755);
    return path;
}

std::vector<std::string> lines(const std::string& text) {
    std::vector<std::string> result;
    std::size_t start = 0;
    while (start < text.size()) {
        const auto end = text.find('\n', start);
        result.push_back(text.substr(start, end - start));
        if (end == std::string::npos) break;
        start = end + 1;
    }
    return result;
}

bool has_sequence(const std::vector<std::string>& args, std::vector<std::string> wanted) {
    return std::search(args.begin(), args.end(), wanted.begin(), wanted.end()) != args.end();
}

sandbox::RunRequest container_request(const std::filesystem::path& cwd,
                                      const std::filesystem::path& runtime) {
    sandbox::RunRequest request;
    request.argv = {"make", "-j2", "--", "check"};
    request.cwd = cwd;
    request.env = {{"PATH", "/usr/bin:/bin"}, {"STEP_TOKEN", "CANARY-VALUE"}};
    request.policy.mode = sandbox::SandboxMode::container;
    request.policy.image = "debian:12";
    request.policy.container_runtime = runtime;
    return request;
}

}  // namespace

TEST_CASE(
    "the container argv: read-only, no network, no capabilities, a unique name, binds, env by "
    "name") {
    const auto dir = tests::make_temp_dir("container");
    const auto work = tests::make_temp_dir("container-work");
    const auto ro = tests::make_temp_dir("container-ro");
    const auto runtime = fake_runtime(dir);
    auto request = container_request(work, runtime);
    request.policy.read_only = {ro};
    request.policy.memory_bytes = 512ull << 20;
    auto plan = sandbox::plan_wrap(request);
    REQUIRE(plan);
    const auto& argv = plan->argv;
    CHECK(argv[0] == runtime.string());
    CHECK(has_sequence(argv, {"run", "--rm", "-i", "--read-only", "--network", "none", "--cap-drop",
                              "ALL", "--security-opt", "no-new-privileges", "--name"}));
    CHECK(has_sequence(argv, {"-v", work.string() + ":" + work.string() + ":rw"}));
    CHECK(has_sequence(argv, {"-v", ro.string() + ":" + ro.string() + ":ro"}));
    CHECK(has_sequence(argv, {"-w", work.string()}));
    CHECK(has_sequence(argv, {"--memory", std::to_string(512ull << 20)}));
    CHECK(has_sequence(argv, {"-e", "STEP_TOKEN"}));
    CHECK(has_sequence(argv, {"debian:12", "make", "-j2", "--", "check"}));
    const auto name = *(std::find(argv.begin(), argv.end(), "--name") + 1);
    CHECK(name.starts_with("sandgate-"));
    CHECK(plan->on_timeout_argv == std::vector<std::string>{runtime.string(), "rm", "-f", name});
    for (const auto& arg : argv) {
        CHECK(arg.find("CANARY-VALUE") == std::string::npos);  // values only through the env
        const char* home = std::getenv("HOME");
        if (home) CHECK(arg.find(std::string(home) + ":") == std::string::npos);
    }
    // A second plan gets another name.
    auto again = sandbox::plan_wrap(request);
    REQUIRE(again);
    CHECK(*(std::find(again->argv.begin(), again->argv.end(), "--name") + 1) != name);
}

TEST_CASE("the runtime client gets the sanitized environment and runs the container") {
    const auto dir = tests::make_temp_dir("container");
    const auto work = tests::make_temp_dir("container-work");
    auto request = container_request(work, fake_runtime(dir));
    auto plan = sandbox::plan_wrap(request);
    REQUIRE(plan);
    auto result = tests::spawn_plan(*plan);
    CHECK(result.status == 0);
    CHECK(result.out == "container ran\n");
    const auto env = tests::read_file(dir / "env.log");
    CHECK(env.find("STEP_TOKEN=CANARY-VALUE\n") != std::string::npos);
    CHECK(env.find("HOME=") != std::string::npos);
    CHECK(env.find("CARGO_NET_OFFLINE=true") != std::string::npos);
    const auto log = lines(tests::read_file(dir / "argv.log"));
    CHECK(log.front() == "== run");
}

TEST_CASE("the container arm fails closed: no runtime, no image, a bad runtime path") {
    const auto work = tests::make_temp_dir("container-work");
    const auto empty = tests::make_temp_dir("container-path");
    auto request = container_request(work, {});
    const char* old_path = std::getenv("PATH");
    const std::string saved = old_path ? old_path : "";
    ::setenv("PATH", empty.c_str(), 1);
    auto none = sandbox::plan_wrap(request);
    ::setenv("PATH", saved.c_str(), 1);
    REQUIRE_FALSE(none);
    CHECK(none.error().kind == common::ErrorKind::unavailable);
    CHECK(none.error().message.find("podman") != std::string::npos);
    request.policy.container_runtime = work / "missing-runtime";
    auto missing = sandbox::plan_wrap(request);
    REQUIRE_FALSE(missing);
    CHECK(missing.error().kind == common::ErrorKind::unavailable);
    request.policy.container_runtime = fake_runtime(tests::make_temp_dir("container"));
    request.policy.image = "";
    auto no_image = sandbox::plan_wrap(request);
    REQUIRE_FALSE(no_image);
    CHECK(no_image.error().kind == common::ErrorKind::invalid_input);
    request.policy.image = "--privileged";
    CHECK_FALSE(sandbox::plan_wrap(request));
}

TEST_CASE("on timeout the client is killed and the named container force-removed") {
    const auto dir = tests::make_temp_dir("container");
    const auto work = tests::make_temp_dir("container-work");
    auto request = container_request(work, fake_runtime(dir));
    request.argv = {"sleep", "hang"};
    request.timeout = std::chrono::milliseconds(1500);
    request.kill_grace = std::chrono::milliseconds(1000);
    const auto result = sandbox::run(request);
    CHECK(result.timed_out);
    CHECK(result.exit_status() == 124);
    const auto log = lines(tests::read_file(dir / "argv.log"));
    const auto run_at = std::find(log.begin(), log.end(), "== run");
    REQUIRE(run_at != log.end());
    const auto name = *(std::find(run_at, log.end(), "--name") + 1);
    const auto rm_at = std::find(log.begin(), log.end(), "== rm");
    REQUIRE(rm_at != log.end());
    CHECK(std::vector<std::string>(rm_at + 1, log.end()) ==
          std::vector<std::string>{"rm", "-f", name});
    CHECK(sandbox::posture_text(result).find("\"mode\":\"container\"") != std::string::npos);
}

TEST_CASE(
    "sandgate exec --sandbox container: refusals exit 125 with sandbox_unavailable or "
    "invalid_request") {
    const auto work = tests::make_temp_dir("container-work");
    const std::string exec = std::string(SANDGATE_BINARY) + " exec --json --cwd " + work.string();
    auto no_image = sandbox::run([&] {
        sandbox::RunRequest r;
        r.argv = {"sh", "-c", exec + " --sandbox container -- true"};
        r.env = sandbox::current_environment();
        r.policy.mode = sandbox::SandboxMode::off;
        return r;
    }());
    CHECK(no_image.exit_status() == 125);
    CHECK(no_image.out.head.find("\"invalid_request\"") != std::string::npos);
}
