// The hosted tool cache (sandbox/wrap/tool_cache.hpp): built from this machine's toolchains in
// @actions/tool-cache's layout, bound read-only into the wrap, and found there by the real
// actions/setup-python (../shared/corpora/actions) with no download.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "sandbox/process/run.hpp"
#include "sandbox/wrap/tool_cache.hpp"
#include "tests/support/run_helpers.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"
#include "tests/support/wrap_spawn.hpp"

namespace {

constexpr const char* k_path = "/usr/local/bin:/usr/bin:/bin";

sandbox::RunResult run_unwrapped(const std::filesystem::path& cwd, std::vector<std::string> argv) {
    sandbox::RunRequest request = tests::request_in(cwd, std::move(argv));
    request.policy.mode = sandbox::SandboxMode::off;
    request.timeout = std::chrono::seconds(60);
    return sandbox::run(request);
}

// The version `argv` prints after `prefix` (its first line), as this test reads it.
std::string host_version(const std::vector<std::string>& argv, const std::string& prefix) {
    const auto result = run_unwrapped("/", argv);
    REQUIRE(result.exit_status() == 0);
    const std::string line = result.out.head.substr(0, result.out.head.find('\n'));
    REQUIRE(line.starts_with(prefix));
    return line.substr(prefix.size());
}

const sandbox::MachineTool* find_tool(const std::vector<sandbox::MachineTool>& tools,
                                      const std::string& name) {
    auto it = std::find_if(tools.begin(), tools.end(),
                           [&](const auto& tool) { return tool.tool == name; });
    return it == tools.end() ? nullptr : &*it;
}

// A cache built from this machine under `dir`; returns its path and the Python version.
std::filesystem::path build_cache(const std::filesystem::path& dir) {
    std::vector<std::string> notes;
    const auto tools = sandbox::find_machine_tools(k_path, notes);
    const auto cache = dir / "tool-cache";
    auto added = sandbox::add_machine_tools(cache, tools);
    REQUIRE(added);
    return cache;
}

sandbox::RunResult wrapped(const std::filesystem::path& cwd, const std::filesystem::path& cache,
                           std::vector<std::string> argv, const sandbox::Environment& extra = {}) {
    sandbox::RunRequest request = tests::request_in(cwd, std::move(argv));
    request.policy.tool_cache = cache;
    request.timeout = std::chrono::seconds(120);
    for (const auto& pair : extra) request.env.push_back(pair);
    auto result = sandbox::run(request);
    UNSCOPED_INFO("stdout: " << result.out.head << "\nstderr: " << result.err.head);
    if (result.error) UNSCOPED_INFO("error: " << result.error->message);
    return result;
}

}  // namespace

TEST_CASE("the tool cache is built from this machine's toolchains in the hosted layout") {
    const auto dir = tests::make_temp_dir("tool-cache");
    const std::string arch = sandbox::tool_cache_arch();
#if defined(__x86_64__)
    CHECK(arch == "x64");
#elif defined(__aarch64__)
    CHECK(arch == "arm64");
#endif
    std::vector<std::string> notes;
    const auto tools = sandbox::find_machine_tools(k_path, notes);
    const std::string python = host_version({"python3", "--version"}, "Python ");
    const auto* found = find_tool(tools, "Python");
    REQUIRE(found != nullptr);
    CHECK(found->version == python);
    const auto* node = find_tool(tools, "node");
    REQUIRE(node != nullptr);
    CHECK("v" + node->version == host_version({"node", "--version"}, ""));

    const auto cache = dir / "tool-cache";
    auto added = sandbox::add_machine_tools(cache, tools);
    REQUIRE(added);
    CHECK(added->added.size() == tools.size());
    CHECK(added->kept.empty());
    const auto python_dir = cache / "Python" / python / arch;
    CHECK(std::filesystem::exists(cache / "Python" / python / (arch + ".complete")));
    for (const char* name : {"python", "python3"}) {
        INFO(name);
        CHECK(std::filesystem::read_symlink(python_dir / "bin" / name) ==
              std::filesystem::canonical("/usr/bin/python3"));
    }
    CHECK(std::filesystem::exists(cache / "node" / node->version / arch / "bin" / "node"));
    CHECK(std::filesystem::exists(cache / "node" / node->version / (arch + ".complete")));
    if (const auto* java = find_tool(tools, "Java_Temurin-Hotspot_jdk")) {
        // The JDK's root, as a link: its bin/java is the machine's java.
        CHECK(
            std::filesystem::equivalent(cache / java->tool / java->version / arch / "bin" / "java",
                                        std::filesystem::canonical("/usr/bin/java")));
        CHECK(std::filesystem::exists(cache / java->tool / java->version / (arch + ".complete")));
    }

    auto listed = sandbox::list_tool_cache(cache);
    REQUIRE(listed);
    CHECK(listed->size() == tools.size());
    for (const auto& entry : *listed) {
        INFO(entry.tool << "/" << entry.version);
        CHECK(entry.complete);
        CHECK(entry.arch == arch);
        CHECK(entry.target.is_absolute());
    }

    SECTION("again: complete versions are kept, an incomplete one is made again") {
        std::filesystem::remove(cache / "Python" / python / (arch + ".complete"));
        std::filesystem::remove(python_dir / "bin" / "python");
        auto listed_again = sandbox::list_tool_cache(cache);
        REQUIRE(listed_again);
        CHECK(std::count_if(listed_again->begin(), listed_again->end(),
                            [](const auto& e) { return !e.complete; }) == 1);
        auto again = sandbox::add_machine_tools(cache, tools);
        REQUIRE(again);
        REQUIRE(again->added.size() == 1);
        CHECK(again->added.front().tool == "Python");
        CHECK(again->kept.size() == tools.size() - 1);
        CHECK(std::filesystem::is_symlink(python_dir / "bin" / "python"));
        CHECK(std::filesystem::exists(cache / "Python" / python / (arch + ".complete")));
    }
    SECTION("a missing cache lists as empty; `sandgate tools` lists and adds") {
        auto empty = sandbox::list_tool_cache(dir / "none");
        REQUIRE(empty);
        CHECK(empty->empty());
        const auto other = dir / "cli-cache";
        auto ran =
            run_unwrapped(dir, {SANDGATE_BINARY, "tools", "add", "--tool-cache", other.string()});
        INFO(ran.out.head << ran.err.head);
        CHECK(ran.exit_status() == 0);
        CHECK(ran.out.head.find("added Python/" + python + "/" + arch) != std::string::npos);
        auto list =
            run_unwrapped(dir, {SANDGATE_BINARY, "tools", "list", "--tool-cache", other.string()});
        CHECK(list.exit_status() == 0);
        CHECK(list.out.head.find("  Python/" + python + "/" + arch + " -> ") != std::string::npos);
        CHECK(list.out.head.find("incomplete") == std::string::npos);
        auto usage = run_unwrapped(dir, {SANDGATE_BINARY, "tools"});
        CHECK(usage.exit_status() == 2);
    }
}

TEST_CASE("inside the wrap the tool cache is RUNNER_TOOL_CACHE, read-only even under sudo") {
    SKIP_UNDER_WRAP("the wrap refuses the nested bwrap a test would start");
    const auto dir = tests::make_temp_dir("tool-cache-wrap");
    const auto cache = build_cache(dir);
    const std::string python = host_version({"python3", "--version"}, "Python ");
    const std::string arch = sandbox::tool_cache_arch();
    const std::string bin = "$RUNNER_TOOL_CACHE/Python/" + python + "/" + arch + "/bin";
    const std::string attempts =
        "for target in $RUNNER_TOOL_CACHE/new $RUNNER_TOOL_CACHE/Python/" + python +
        "/x.complete " + bin + "/python " + bin +
        "/new; do if (echo x > $target) 2>/dev/null; then echo wrote $target; else echo "
        "refused; fi; done; mkdir $RUNNER_TOOL_CACHE/Python/9.9.9 2>/dev/null && echo made || echo "
        "refused";
    auto result =
        wrapped(dir, cache,
                {"/bin/sh", "-c",
                 "echo $RUNNER_TOOL_CACHE $AGENT_TOOLSDIRECTORY; " + bin + "/python --version; " +
                     attempts + "; sudo sh -c '" + attempts + "'"});
    CHECK(result.exit_status() == 0);
    const std::string refused = "refused\nrefused\nrefused\nrefused\nrefused\n";
    CHECK(result.out.head ==
          "/opt/hostedtoolcache /opt/hostedtoolcache\nPython " + python + "\n" + refused + refused);
    auto listed = sandbox::list_tool_cache(cache);
    REQUIRE(listed);
    for (const auto& entry : *listed) CHECK(entry.version != "9.9.9");
    CHECK_FALSE(std::filesystem::exists(cache / "new"));
}

TEST_CASE(
    "the real actions/setup-python finds the machine's Python in the tool cache, no download") {
    SKIP_UNDER_WRAP("the wrap refuses the nested bwrap a test would start");
    const auto dir = tests::make_temp_dir("tool-cache-setup-python");
    const auto cache = build_cache(dir);
    const std::string python = host_version({"python3", "--version"}, "Python ");
    const std::string minor = python.substr(0, python.rfind('.'));
    const std::string archive = std::string(SANDGATE_SHARED_DIR) +
                                "/corpora/actions/archive-cache/actions_setup-python/"
                                "5fda3b95a4ea91299a34e894583c3862153e4b97.tar.gz";
    REQUIRE(std::filesystem::exists(archive));
    const auto work = dir / "work";
    std::filesystem::create_directories(work / "action");
    REQUIRE(run_unwrapped(work, {"tar", "-xzf", archive, "-C", "action", "--strip-components=1"})
                .exit_status() == 0);
    for (const char* file : {"output", "path", "env", "state"}) tests::write_file(work / file, "");
    std::filesystem::create_directories(work / "temp");
    // The inputs as the runner sets them from action.yml: the given one and every default.
    const sandbox::Environment env = {
        {"INPUT_PYTHON-VERSION", minor},
        {"INPUT_CHECK-LATEST", "false"},
        {"INPUT_TOKEN", ""},
        {"INPUT_UPDATE-ENVIRONMENT", "true"},
        {"INPUT_ALLOW-PRERELEASES", "false"},
        {"INPUT_FREETHREADED", "false"},
        {"GITHUB_OUTPUT", (work / "output").string()},
        {"GITHUB_PATH", (work / "path").string()},
        {"GITHUB_ENV", (work / "env").string()},
        {"GITHUB_STATE", (work / "state").string()},
        {"GITHUB_ACTION_PATH", (work / "action").string()},
        {"GITHUB_WORKSPACE", work.string()},
        {"RUNNER_TEMP", (work / "temp").string()},
        {"RUNNER_OS", "Linux"},
        {"GITHUB_ACTIONS", "true"},
    };
    auto result =
        wrapped(work, cache, {"node", (work / "action/dist/setup/index.js").string()}, env);
    CHECK(result.exit_status() == 0);
    CHECK(result.out.head.find("Successfully set up CPython (" + python + ")") !=
          std::string::npos);
    CHECK(result.out.head.find("not found in the local cache") == std::string::npos);
    CHECK(result.out.head.find("##[add-matcher]") != std::string::npos);
    const std::string install =
        "/opt/hostedtoolcache/Python/" + python + "/" + sandbox::tool_cache_arch();
    const std::string outputs = tests::read_file(work / "output");
    CHECK(outputs.find("python-version") != std::string::npos);
    CHECK(outputs.find(python) != std::string::npos);
    CHECK(outputs.find(install + "/bin/python") != std::string::npos);
    const std::string paths = tests::read_file(work / "path");
    CHECK(paths.find(install + "/bin") != std::string::npos);
}

TEST_CASE("a workflow's runner.tool_cache is the RUNNER_TOOL_CACHE its steps see") {
    SKIP_UNDER_WRAP("the wrap refuses the nested bwrap a test would start");
    const auto dir = tests::make_temp_dir("tool-cache-runner-context");
    const auto cache = build_cache(dir);
    tests::write_file(dir / "w/t.yml", R"(on: push
jobs:
  t:
    runs-on: ubuntu-latest
    steps:
      - run: |
          echo "context=${{ runner.tool_cache }} env=$RUNNER_TOOL_CACHE"
          test "${{ runner.tool_cache }}" = "$RUNNER_TOOL_CACHE" && echo same
)");
    auto bound = tests::run_workflows(dir, {"-W", "w", "--tool-cache", cache.string()});
    CHECK(bound.exit_code == 0);
    CHECK(bound.output.find("context=/opt/hostedtoolcache env=/opt/hostedtoolcache") !=
          std::string::npos);
    CHECK(bound.output.find("same") != std::string::npos);
}
