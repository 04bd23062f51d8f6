// action.yml's scripts (scripts/action/setup.sh and run.sh), run as the composite action runs
// them: inputs as SANDGATE_INPUT_* variables, GITHUB_OUTPUT and GITHUB_STEP_SUMMARY files,
// RUNNER_TEMP and RUNNER_TOOL_CACHE directories of a fresh temp dir; a release served by a
// real HTTP server on 127.0.0.1; a cancelled step signalled as the runner signals it.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <string>

#include "agent/api/http_server.hpp"
#include "sandbox/process/run.hpp"
#include "tests/helpers/git_fixture.hpp"
#include "tests/support/processes.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"

namespace {

const std::filesystem::path k_build_dir = std::filesystem::path(SANDGATE_BINARY).parent_path();

struct Action {
    std::filesystem::path dir = tests::make_temp_dir("action");
    sandbox::Environment inputs;
    sandbox::Environment pass_through;  // the step's own `env:`, beside the inputs

    sandbox::Environment environment() const {
        sandbox::Environment set = {{"SANDGATE_BIN", SANDGATE_BINARY},
                                    {"GITHUB_OUTPUT", (dir / "output").string()},
                                    {"GITHUB_STEP_SUMMARY", (dir / "summary.md").string()},
                                    {"RUNNER_TEMP", dir.string()},
                                    {"RUNNER_TOOL_CACHE", (dir / "tool-cache").string()}};
        set.insert(set.end(), inputs.begin(), inputs.end());
        set.insert(set.end(), pass_through.begin(), pass_through.end());
        return sandbox::child_environment(sandbox::current_environment(), {}, set);
    }

    sandbox::RunResult run(const std::string& script, const std::string& phase = {}) {
        sandbox::RunRequest request;
        request.argv = {"bash", SANDGATE_SOURCE_DIR "/scripts/action/" + script};
        if (!phase.empty()) request.argv.push_back(phase);
        request.cwd = dir;
        request.policy.mode = sandbox::SandboxMode::off;
        request.env = environment();
        return sandbox::run(request);
    }

    // NAME=VALUE lines of GITHUB_OUTPUT, the last of each name winning.
    std::map<std::string, std::string> outputs() const {
        std::map<std::string, std::string> found;
        std::istringstream lines(tests::read_file(dir / "output"));
        for (std::string line; std::getline(lines, line);)
            if (const auto eq = line.find('='); eq != std::string::npos)
                found[line.substr(0, eq)] = line.substr(eq + 1);
        return found;
    }
};

// Static files over HTTP on 127.0.0.1 (agent/api/http_server.hpp): path -> body, 404 otherwise.
struct ReleaseServer {
    std::map<std::string, std::string> files;
    std::uint16_t port = 0;
    std::unique_ptr<agent::HttpServer> server;

    ReleaseServer() {
        auto listener = agent::listen_loopback(0, &port);
        REQUIRE(listener);
        auto started = agent::HttpServer::start(
            std::move(*listener),
            [this](const agent::HttpRequest& request) {
                agent::HttpResponse response;
                response.content_type = "application/octet-stream";
                if (const auto it = files.find(request.path); it != files.end())
                    response.body = it->second;
                else
                    response.status = 404;
                return response;
            },
            1 << 10);
        REQUIRE(started);
        server = std::move(*started);
    }
    std::string url() const { return "http://127.0.0.1:" + std::to_string(port); }
};

// This build packaged as the release workflow packages it (scripts/action/package-release.sh):
// the asset's path, its .sha256 beside it.
std::filesystem::path release_asset(const std::filesystem::path& dir) {
    return tests::sh(SANDGATE_SOURCE_DIR "/scripts/action/package-release.sh " +
                     k_build_dir.string() + " " + (dir / "release").string());
}

}  // namespace

TEST_CASE("the action refuses bad inputs by name, before anything runs") {
    const std::pair<sandbox::Environment, std::string> cases[] = {
        {{}, "input 'run'"},
        {{{"SANDGATE_INPUT_RUN", "true"}, {"SANDGATE_INPUT_NETWORK", "everywhere"}},
         "input 'network'"},
        {{{"SANDGATE_INPUT_RUN", "true"}, {"SANDGATE_INPUT_OUTPUT_LIMIT", "lots"}},
         "input 'output-limit'"},
        {{{"SANDGATE_INPUT_RUN", "true"}, {"SANDGATE_INPUT_TIMEOUT", "soon"}}, "input 'timeout'"},
        {{{"SANDGATE_INPUT_RUN", "true"}, {"SANDGATE_INPUT_SHELL", "fish"}}, "input 'shell'"},
        {{{"SANDGATE_INPUT_RUN", "true"}, {"SANDGATE_INPUT_WORKING_DIRECTORY", "/nonexistent"}},
         "input 'working-directory'"},
        {{{"SANDGATE_INPUT_RUN", "true"}, {"SANDGATE_INPUT_OFFLINE", "maybe"}}, "input 'offline'"},
        {{{"SANDGATE_INPUT_RUN", "true"}, {"SANDGATE_INPUT_ENV", "A=1\nsecret-value"}},
         "input 'env': line 2: expected NAME=VALUE"},
        {{{"SANDGATE_INPUT_RUN", "true"}, {"SANDGATE_INPUT_ENV", "1A=x"}}, "input 'env': line 1"},
        {{{"SANDGATE_INPUT_RUN", "true"}, {"SANDGATE_INPUT_PASS_ENV", "OK, not-a-name"}},
         "input 'pass-env': 'not-a-name'"},
    };
    for (const auto& [inputs, message] : cases) {
        Action action;
        action.inputs = inputs;
        const auto result = action.run("run.sh");
        INFO(message << ": " << result.out.head << result.err.head);
        CHECK(result.exit_status() == 2);
        CHECK(result.out.head.find("::error title=sandgate::" + message) != std::string::npos);
        CHECK_FALSE(std::filesystem::exists(action.dir / "output"));
        CHECK(result.out.head.find("secret-value") == std::string::npos);
    }
}

TEST_CASE("the action runs the script in the wrap and publishes its outcome") {
    SKIP_UNDER_WRAP("runs bwrap, which cannot mount a new /proc inside the wrap");
    Action action;
    action.inputs = {{"SANDGATE_INPUT_RUN",
                      "echo \"in $PWD\"\necho 'SKIP-UNDER-WRAP(demo)'\n"
                      "head -c 100000 /dev/zero | tr '\\0' x\nexit 3"},  // past limit + 64 KiB tail
                     {"SANDGATE_INPUT_SHELL", "bash"},
                     {"SANDGATE_INPUT_WORKING_DIRECTORY", action.dir.string()},
                     {"SANDGATE_INPUT_NETWORK", "none"},
                     {"SANDGATE_INPUT_TIMEOUT", "60s"},
                     {"SANDGATE_INPUT_OUTPUT_LIMIT", "4"}};
    const auto result = action.run("run.sh");
    INFO(result.out.head << result.err.head);
    CHECK(result.exit_status() == 3);
    CHECK(result.out.head.find("in " + action.dir.string()) != std::string::npos);  // live output
    const std::string outputs = tests::read_file(action.dir / "output");
    CHECK(outputs.find("exit-code=3\n") != std::string::npos);
    CHECK(outputs.find("truncated=true\n") != std::string::npos);
    CHECK(outputs.find("skip-markers=1\n") != std::string::npos);
    const std::string summary = tests::read_file(action.dir / "summary.md");
    CHECK(summary.find("### sandgate") != std::string::npos);
    CHECK(summary.find("| sandbox | bwrap |") != std::string::npos);
}

TEST_CASE("setup fails clearly where user namespaces are restricted and sudo cannot lift it") {
    Action action;
    tests::write_file(action.dir / "restrict", "1\n");
    action.inputs = {{"SANDGATE_USERNS_SYSCTL", (action.dir / "restrict").string()}};
    const auto result = action.run("setup.sh", "locate");
    INFO(result.out.head << result.err.head);
    // This kernel has no such sysctl, so `sudo -n sysctl -w` fails whether or not sudo exists.
    CHECK(result.exit_status() == 1);
    CHECK(result.out.head.find("kernel.apparmor_restrict_unprivileged_userns=1") !=
          std::string::npos);
}

TEST_CASE("the env and pass-env inputs reach the command, nothing else of the step's env") {
    SKIP_UNDER_WRAP("runs bwrap, which cannot mount a new /proc inside the wrap");
    Action action;
    action.pass_through = {
        {"STEP_PASSED", "from the step"}, {"STEP_SECRET", "hush"}, {"STEP_OTHER", "also"}};
    action.inputs = {{"SANDGATE_INPUT_RUN", "env"},
                     {"SANDGATE_INPUT_WORKING_DIRECTORY", action.dir.string()},
                     {"SANDGATE_INPUT_ENV", "A=1\n\nB=x=y z\n"},
                     {"SANDGATE_INPUT_PASS_ENV", "STEP_PASSED,\nSTEP_OTHER"}};
    const auto result = action.run("run.sh");
    INFO(result.out.head << result.err.head);
    CHECK(result.exit_status() == 0);
    const std::string env = "\n" + result.out.head;
    CHECK(env.find("\nA=1\n") != std::string::npos);
    CHECK(env.find("\nB=x=y z\n") != std::string::npos);
    CHECK(env.find("\nSTEP_PASSED=from the step\n") != std::string::npos);
    CHECK(env.find("\nSTEP_OTHER=also\n") != std::string::npos);
    CHECK(env.find("hush") == std::string::npos);
    CHECK(env.find("SANDGATE_INPUT") == std::string::npos);
    const auto outputs = action.outputs();
    CHECK(outputs.at("outcome") == "success");
    CHECK(outputs.at("cancelled") == "false");
    CHECK(outputs.at("timed-out") == "false");
}

TEST_CASE("a timed-out command: outcome timed-out, exit-code 124") {
    SKIP_UNDER_WRAP("runs bwrap, which cannot mount a new /proc inside the wrap");
    Action action;
    action.inputs = {{"SANDGATE_INPUT_RUN", "sleep 30"},
                     {"SANDGATE_INPUT_WORKING_DIRECTORY", action.dir.string()},
                     {"SANDGATE_INPUT_TIMEOUT", "500ms"}};
    const auto result = action.run("run.sh");
    CHECK(result.exit_status() == 124);
    const auto outputs = action.outputs();
    CHECK(outputs.at("exit-code") == "124");
    CHECK(outputs.at("outcome") == "timed-out");
    CHECK(outputs.at("timed-out") == "true");
}

TEST_CASE("a cancelled step: the runner's signal reaches sandgate, the tree goes, outputs stay") {
    SKIP_UNDER_WRAP("runs bwrap, which cannot mount a new /proc inside the wrap");
    const int sig = GENERATE(SIGTERM, SIGINT);
    Action action;
    const std::string marker = tests::unique_marker();
    // A TERM-ignoring background process and a foreground one, both carrying the marker.
    action.inputs = {
        {"SANDGATE_INPUT_RUN",
         "python3 -c 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
         "time.sleep(600)' " +
             marker + " &\npython3 -c 'import time; time.sleep(600)' " + marker},
        {"SANDGATE_INPUT_WORKING_DIRECTORY", action.dir.string()}};
    std::vector<std::string> env_text;
    for (const auto& [name, value] : action.environment()) env_text.push_back(name + "=" + value);
    std::vector<char*> envp;
    for (auto& entry : env_text) envp.push_back(entry.data());
    envp.push_back(nullptr);
    std::string bash = "/bin/bash", script = SANDGATE_SOURCE_DIR "/scripts/action/run.sh";
    char* argv[] = {bash.data(), script.data(), nullptr};
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::execve(argv[0], argv, envp.data());
        ::_exit(127);
    }
    for (int i = 0; i < 3000 && tests::processes_with(marker).size() < 2; ++i) ::usleep(10'000);
    REQUIRE(tests::processes_with(marker).size() == 2);
    ::kill(pid, sig);  // the runner signals the step's process only
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 128 + sig);
    CHECK(tests::processes_with(marker).empty());
    const auto outputs = action.outputs();
    CHECK(outputs.at("exit-code") == std::to_string(128 + sig));
    CHECK(outputs.at("outcome") == "cancelled");
    CHECK(outputs.at("cancelled") == "true");
    CHECK(tests::read_file(action.dir / "summary.md").find("| outcome | cancelled |") !=
          std::string::npos);
}

TEST_CASE("setup: a prebuilt SANDGATE_BIN is used as it is") {
    Action action;
    const auto result = action.run("setup.sh", "locate");
    INFO(result.out.head << result.err.head);
    REQUIRE(result.exit_status() == 0);
    const auto outputs = action.outputs();
    CHECK(outputs.at("found") == "true");
    CHECK(outputs.at("source") == "prebuilt");
    CHECK(outputs.at("dir") == k_build_dir.string());
}

TEST_CASE("setup: the release asset of the action's ref, its sha256 checked") {
    SKIP_UNDER_WRAP("the release server needs a free port on the host's loopback");
    // Packaged once (it compresses the unstripped binaries), then fetched by three steps.
    const auto packaged = tests::make_temp_dir("release");
    ReleaseServer release;
    const auto path = release_asset(packaged);
    const std::string asset = path.filename().string();
    const std::string tarball = tests::read_file(path);
    const std::string sha = tests::read_file(path.string() + ".sha256");
    CHECK(sha == tests::sh("cd " + path.parent_path().string() + " && sha256sum " + asset) + "\n");
    // What the asset holds: the binaries, and the packages of the libraries they link.
    const std::string listing = tests::sh("tar -tzf " + path.string() + " | sort");
    CHECK(listing == "runtime-packages\nsandgate\nsandgate-agent\nsandgate-broker\nsandgate-full");
    const std::string packages = tests::sh("tar -xzOf " + path.string() + " runtime-packages");
    CHECK(packages.find("libgit2") != std::string::npos);
    CHECK(packages.find("libsqlite3") != std::string::npos);
    release.files["/v9.9.9/" + asset] = tarball;
    release.files["/v9.9.9/" + asset + ".sha256"] = sha;
    release.files["/v6.6.6/" + asset] = tarball;
    release.files["/v6.6.6/" + asset + ".sha256"] = std::string(64, '0') + "  " + asset + "\n";
    const sandbox::Environment inputs = {{"SANDGATE_BIN", ""},
                                         {"SANDGATE_RELEASE_URL", release.url()},
                                         {"SANDGATE_ACTION_REPOSITORY", "owner/sandgate"}};

    {  // a matching checksum: the binaries are unpacked into the cache directory
        Action action;
        action.inputs = inputs;
        action.inputs.emplace_back("SANDGATE_ACTION_REF", "v9.9.9");
        const auto result = action.run("setup.sh", "locate");
        INFO(result.out.head << result.err.head);
        REQUIRE(result.exit_status() == 0);
        const auto outputs = action.outputs();
        CHECK(outputs.at("source") == "release");
        CHECK(outputs.at("found") == "true");
        const std::filesystem::path dir = outputs.at("dir");
        CHECK(dir.string().starts_with((action.dir / "tool-cache/sandgate/sandgate-").string()));
        CHECK(tests::read_file(dir / "sandgate") == tests::read_file(SANDGATE_BINARY));
        CHECK(std::filesystem::exists(dir / "sandgate-agent"));
        CHECK(result.out.head.find("sha256 " + sha.substr(0, 64)) != std::string::npos);
        CHECK(tests::read_file(dir / "runtime-packages") == packages + "\n");
    }
    {  // a wrong checksum fails the step, nothing unpacked
        Action action;
        action.inputs = inputs;
        action.inputs.emplace_back("SANDGATE_ACTION_REF", "v6.6.6");
        const auto result = action.run("setup.sh", "locate");
        CHECK(result.exit_status() == 1);
        CHECK(result.out.head.find("::error title=sandgate setup::release asset " + asset +
                                   " of v6.6.6: sha256") != std::string::npos);
        CHECK(result.out.head.find("does not match") != std::string::npos);
        CHECK_FALSE(std::filesystem::exists(action.dir / "tool-cache" / "sandgate"));
    }
    {  // a ref without a release: a cached build is looked for, else one is built
        Action action;
        action.inputs = inputs;
        action.inputs.emplace_back("SANDGATE_ACTION_REF", "main");
        const auto first = action.run("setup.sh", "locate");
        INFO(first.out.head << first.err.head);
        REQUIRE(first.exit_status() == 0);
        CHECK(first.out.head.find("no release asset " + asset + " for main") != std::string::npos);
        auto outputs = action.outputs();
        CHECK(outputs.at("found") == "false");
        CHECK(outputs.at("source") == "build");
        const std::filesystem::path dir = outputs.at("dir");
        CHECK(outputs.at("key") == dir.filename().string());

        // What actions/cache (or an earlier job on this runner) put there is found next time.
        std::filesystem::create_directories(dir);
        for (const char* name : {"sandgate", "sandgate-full", "sandgate-broker", "sandgate-agent"})
            std::filesystem::create_symlink(k_build_dir / name, dir / name);
        std::filesystem::remove(action.dir / "output");
        const auto second = action.run("setup.sh", "locate");
        REQUIRE(second.exit_status() == 0);
        outputs = action.outputs();
        CHECK(outputs.at("found") == "true");
        CHECK(outputs.at("source") == "cache");
        CHECK(outputs.at("dir") == dir.string());
    }
}

TEST_CASE("setup finish: a restored cache is used, not rebuilt, and put on PATH") {
    SKIP_UNDER_WRAP("sandgate doctor's sandbox checks run bwrap");
    Action action;
    const auto dir = action.dir / "tool-cache" / "sandgate" / "sandgate-key";
    std::filesystem::create_directories(dir);
    for (const char* name : {"sandgate", "sandgate-full", "sandgate-broker", "sandgate-agent"})
        std::filesystem::create_symlink(k_build_dir / name, dir / name);
    tests::write_file(dir / "runtime-packages", "bubblewrap\n");
    action.inputs = {{"SANDGATE_CACHE_DIR", dir.string()},
                     {"SANDGATE_SOURCE", "build"},
                     {"GITHUB_PATH", (action.dir / "path").string()}};
    const auto result = action.run("setup.sh", "finish");
    INFO(result.out.head << result.err.head);
    REQUIRE(result.exit_status() == 0);
    const auto outputs = action.outputs();
    CHECK(outputs.at("source") == "cache");
    CHECK(outputs.at("save") == "false");
    CHECK(outputs.at("bin") == (dir / "sandgate").string());
    CHECK(tests::read_file(action.dir / "path") == dir.string() + "\n");
    CHECK(result.out.head.find("building") == std::string::npos);
}

TEST_CASE("setup: an unknown phase is refused with exit 2") {
    Action action;
    const auto result = action.run("setup.sh", "everything");
    CHECK(result.exit_status() == 2);
    CHECK(result.err.head.find("unknown phase 'everything'") != std::string::npos);
}

TEST_CASE("workflows and the action: top-level permissions, every action pinned by its SHA") {
    std::vector<std::filesystem::path> files = {SANDGATE_SOURCE_DIR "/action.yml"};
    for (const auto& entry :
         std::filesystem::directory_iterator(SANDGATE_SOURCE_DIR "/.github/workflows"))
        files.push_back(entry.path());
    REQUIRE(files.size() >= 5);  // ci, nightly, uses-action, release
    const std::regex uses(R"(^\s*(- )?uses:\s*(\S+)(.*)$)");
    const std::regex pinned(R"(^[\w.-]+/[\w./-]+@[0-9a-f]{40}$)");
    const std::regex tag_comment(R"(^\s+# v\d+(\.\d+)*$)");
    int pins = 0;
    for (const auto& file : files) {
        const std::string text = tests::read_file(file);
        if (file.filename() != "action.yml" || file.parent_path().filename() == "workflows")
            CHECK(text.find("\npermissions:\n") != std::string::npos);
        std::istringstream lines(text);
        int number = 0;
        for (std::string line; std::getline(lines, line);) {
            ++number;
            std::smatch match;
            if (!std::regex_match(line, match, uses)) continue;
            INFO(file.string() << ":" << number << ": " << line);
            if (match[2].str() == "./") continue;  // this repository's own action
            CHECK(std::regex_match(match[2].str(), pinned));
            CHECK(std::regex_match(match[3].str(), tag_comment));
            ++pins;
        }
    }
    CHECK(pins >= 8);
}
