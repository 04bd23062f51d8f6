// The runner's side of the container hooks, played for whole jobs against the real
// contrib/runner-hooks/index.js under node and the real `sandgate hook`, the way actions/runner
// drives them (../shared/corpora/runner-container-hooks/README.md): `node index.js` with one
// JSON document on stdin naming a response file, the runner's mounts, its argument strings
// split on spaces, a node action's script path in literal quotes; on cancellation a signal to
// the node process only. Every response is checked against the runner's types, and after the
// job nothing of it may run and its scratch must be gone.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "sandbox/process/run.hpp"
#include "tests/support/processes.hpp"
#include "tests/support/runner_types.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const fs::path k_index_js = fs::path(SANDGATE_SOURCE_DIR) / "contrib/runner-hooks/index.js";

// The node on PATH, its real file (the runner ships its own in externals/node20).
fs::path host_node() {
    const std::string path = std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin";
    std::size_t start = 0;
    while (start <= path.size()) {
        const std::size_t end = std::min(path.find(':', start), path.size());
        const fs::path candidate = fs::path(path.substr(start, end - start)) / "node";
        if (::access(candidate.c_str(), X_OK) == 0) return fs::canonical(candidate);
        start = end + 1;
    }
    return {};
}

bool wait_until(const std::function<bool()>& done, std::chrono::seconds within) {
    const auto deadline = std::chrono::steady_clock::now() + within;
    while (!done()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return true;
}

// A runner's layout (_work, externals, the _temp directories it mounts) and its driver.
class FakeRunner {
public:
    fs::path root = tests::make_temp_dir("conformance");
    fs::path work = root / "_work";
    fs::path externals = root / "externals";
    fs::path temp = work / "_temp";
    fs::path state = root / "state";
    std::string marker = tests::unique_marker();  // in the action's path: on its command lines
    std::string action = "/__w/_actions/octo/" + marker + " act/v1";  // with a space in it

    FakeRunner() {
        for (const auto& dir :
             {work / "repo/repo", temp / "_github_home", temp / "_github_workflow",
              temp / "_runner_file_commands", work / "_tool/mytool/1.0/x64/bin", externals})
            fs::create_directories(dir);
        fs::create_directories(externals / "node20/bin");
        fs::create_symlink(host_node(), externals / "node20/bin/node");
        tests::write_file(work / "_tool/mytool/1.0/x64/bin/mytool", "#!/bin/sh\necho mytool $1\n");
        fs::permissions(work / "_tool/mytool/1.0/x64/bin/mytool", fs::perms::owner_all);
        const fs::path act = host(action);
        tests::write_file(
            act / "pre.js",
            "const fs = require('fs');\n"
            "fs.appendFileSync(process.env.GITHUB_STATE, 'pre=done\\n');\n"
            "console.log('pre at ' + process.cwd() + ' home ' + process.env.HOME);\n");
        // The main part runs until cancelled, with a child and a detached daemon of its own.
        tests::write_file(act / "main.js",
                          "const { spawn } = require('child_process');\n"
                          "const fs = require('fs');\n"
                          "const forever = ['-e', 'setInterval(() => {}, 1000)', '" +
                              marker +
                              "'];\n"
                              "spawn(process.execPath, forever, { stdio: 'ignore' });\n"
                              "spawn(process.execPath, forever, { detached: true, stdio: "
                              "'ignore' }).unref();\n"
                              "setTimeout(() => fs.writeFileSync('/__w/_temp/main-started', "
                              "''), 300);\n"
                              "setInterval(() => {}, 1000);\n");
        tests::write_file(act / "post.js",
                          "if (process.env.STATE_pre !== 'done') process.exit(9);\n"
                          "console.log('post ok');\n");
    }

    // The host path of a container path under /__w.
    fs::path host(const std::string& inside) const {
        return work / fs::path(inside).lexically_relative("/__w");
    }

    json mounts() const {
        const auto mount = [](const fs::path& source, const char* target, bool read_only) {
            return json{{"sourceVolumePath", source.string()},
                        {"targetVolumePath", target},
                        {"readOnly", read_only}};
        };
        return {mount(work, "/__w", false),
                mount(externals, "/__e", true),
                mount(temp, "/__w/_temp", false),
                mount(work / "_actions", "/__w/_actions", false),
                mount(work / "_tool", "/__w/_tool", false),
                mount(temp / "_github_home", "/github/home", false),
                mount(temp / "_github_workflow", "/github/workflow", false),
                mount(temp / "_runner_file_commands", "/github/file_commands", false)};
    }

    json input(const std::string& command, const json& job_state, const json& args) {
        return {
            {"command", command},
            {"responseFile", (temp / ("response-" + std::to_string(++m_calls) + ".json")).string()},
            {"state", job_state},
            {"args", args}};
    }

    json prepare_args() const {
        return {{"container",
                 {{"image", "node:20"},
                  {"workingDirectory", "/__w/repo/repo"},
                  {"createOptions", ""},
                  {"environmentVariables", json::object()},
                  {"userMountVolumes", json::array()},
                  {"systemMountVolumes", mounts()},
                  {"registry", nullptr},
                  {"portMappings", json::array()}}},
                {"services", json::array()}};
    }

    // A run_script_step's args: `command` is the runner's argument string, split as it does.
    json step_args(const std::string& entry, const std::string& command, json env,
                   json prepend = json::array()) const {
        json pieces = json::array();
        std::size_t start = 0;
        for (;;) {
            const std::size_t end = command.find(' ', start);
            pieces.push_back(command.substr(start, end - start));
            if (end == std::string::npos) break;
            start = end + 1;
        }
        env["GITHUB_WORKSPACE"] = "/__w/repo/repo";
        env["RUNNER_TEMP"] = "/__w/_temp";
        env["GITHUB_ENV"] = "/github/file_commands/set_env_1";
        env["GITHUB_STATE"] = "/github/file_commands/save_state_1";
        env["CI"] = "true";
        return {{"entryPoint", entry},
                {"entryPointArgs", pieces},
                {"environmentVariables", env},
                {"prependPath", prepend},
                {"workingDirectory", "/__w/repo/repo"}};
    }

    json node_action(const std::string& script, json env = json::object()) const {
        return step_args("/__e/node20/bin/node", "\"" + action + "/" + script + "\"",
                         std::move(env));
    }

    // `node index.js` with the input on stdin, as the runner starts it; returns node's pid.
    pid_t start(const json& input) {
        const fs::path file = root / ("input-" + std::to_string(m_calls) + ".json");
        tests::write_file(file, input.dump());
        std::vector<std::string> env = {"PATH=" + std::string(std::getenv("PATH")),
                                        std::string("SANDGATE_BIN=") + SANDGATE_BINARY,
                                        "SANDGATE_HOOK_ARGS=--state-dir " + state.string()};
        return tests::start_with_files({host_node().string(), k_index_js.string()}, env, file,
                                       root / "hook.log");
    }

    // Runs one hook command to its end: node's exit status (128+N when a signal ended it).
    int call(const json& input) {
        const int status = tests::wait_for(start(input));
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }

    // A run step wrote no response, or one that is empty (the runner reads none).
    void check_no_response(const json& input) const {
        const fs::path response = input.at("responseFile").get<std::string>();
        if (fs::exists(response)) CHECK(tests::read_file(response).empty());
    }

    // Nothing of the job runs: no process with the action's marker, no `sandgate hook` of it.
    std::vector<int> survivors() const {
        auto found = tests::processes_with(marker);
        for (int pid : tests::processes_with(state.string())) found.push_back(pid);
        return found;
    }

    std::string log() const {
        return fs::exists(root / "hook.log") ? tests::read_file(root / "hook.log") : "";
    }

private:
    int m_calls = 0;
};

// node's exit status once it ends within `within`, or -1 (then it is killed).
int exit_status_within(pid_t pid, std::chrono::seconds within) {
    int status = 0;
    const bool ended = wait_until([&] { return ::waitpid(pid, &status, WNOHANG) == pid; }, within);
    if (!ended) {
        tests::signal_and_wait(pid, SIGKILL);
        return -1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

TEST_CASE("a whole job as the runner drives it: prepare, steps, a node action cancelled, cleanup") {
    SKIP_UNDER_WRAP("runs bwrap, which cannot mount a new /proc inside the wrap");
    REQUIRE_FALSE(host_node().empty());
    FakeRunner runner;

    const json prepare = runner.input("prepare_job", json::object(), runner.prepare_args());
    REQUIRE(runner.call(prepare) == 0);
    INFO(runner.log());
    const fs::path response_file = prepare.at("responseFile").get<std::string>();
    const json response = json::parse(tests::read_file(response_file));
    tests::check_prepare_response(response);
    const json state = response.at("state");  // handed back verbatim from here on
    const std::string job = response.at("context").at("container").at("id");
    const fs::path job_dir = runner.state / "hook-jobs" / job;
    CHECK(fs::is_directory(job_dir));

    // A `run:` step: bash with the runner's options, the script under /__w/_temp, a tool of
    // prependPath, the file commands at /github/file_commands, HOME at /github/home.
    tests::write_file(runner.temp / "step1.sh",
                      "test \"$(pwd)\" = /__w/repo/repo || exit 11\n"
                      "test \"$HOME\" = /github/home || exit 12\n"
                      "test \"$GITHUB_WORKSPACE\" = \"$PWD\" || exit 13\n"
                      "mytool works\n"
                      "echo FOO=bar >> \"$GITHUB_ENV\"\n"
                      "echo cached > \"$HOME/.cache-ok\"\n");
    const json run = runner.input(
        "run_script_step", state,
        runner.step_args("bash", "--noprofile --norc -e -o pipefail /__w/_temp/step1.sh",
                         json::object(), {"/__w/_tool/mytool/1.0/x64/bin"}));
    CHECK(runner.call(run) == 0);
    runner.check_no_response(run);
    CHECK(runner.log().find("mytool works") != std::string::npos);
    CHECK(tests::read_file(runner.temp / "_runner_file_commands/set_env_1") == "FOO=bar\n");
    CHECK(tests::read_file(runner.temp / "_github_home/.cache-ok") == "cached\n");

    // A failing step fails with its own status.
    tests::write_file(runner.temp / "step2.sh", "exit 3\n");
    CHECK(runner.call(
              runner.input("run_script_step", state,
                           runner.step_args("sh", "-e /__w/_temp/step2.sh", json::object()))) == 3);

    // The node action: pre, then main (cancelled mid-step), then post.
    const json pre = runner.input("run_script_step", state, runner.node_action("pre.js"));
    CHECK(runner.call(pre) == 0);
    runner.check_no_response(pre);
    CHECK(runner.log().find("pre at /__w/repo/repo home /github/home") != std::string::npos);
    CHECK(tests::read_file(runner.temp / "_runner_file_commands/save_state_1") == "pre=done\n");

    const pid_t main =
        runner.start(runner.input("run_script_step", state, runner.node_action("main.js")));
    REQUIRE(main > 0);
    const bool started = wait_until([&] { return fs::exists(runner.temp / "main-started"); },
                                    std::chrono::seconds(60));
    if (!started) tests::signal_and_wait(main, SIGKILL);
    REQUIRE(started);
    CHECK(tests::processes_with(runner.marker).size() >= 3);  // main, its child, its daemon
    // The runner cancels: SIGINT to the node process it started, nothing else.
    REQUIRE(::kill(main, SIGINT) == 0);
    CHECK(exit_status_within(main, std::chrono::seconds(30)) == 128 + SIGINT);
    CHECK(wait_until([&] { return runner.survivors().empty(); }, std::chrono::seconds(10)));

    CHECK(runner.call(runner.input("run_script_step", state,
                                   runner.node_action("post.js", {{"STATE_pre", "done"}}))) == 0);
    CHECK(runner.log().find("post ok") != std::string::npos);

    const json cleanup = runner.input("cleanup_job", state, json::object());
    CHECK(runner.call(cleanup) == 0);
    CHECK_FALSE(fs::exists(job_dir));
    CHECK(runner.survivors().empty());
    CHECK(runner.call(cleanup) == 0);  // a runner may call it again
}

TEST_CASE("the runner's final kill of node takes the step with it; cleanup_job then finds none") {
    SKIP_UNDER_WRAP("runs bwrap, which cannot mount a new /proc inside the wrap");
    REQUIRE_FALSE(host_node().empty());
    FakeRunner runner;
    const json prepare = runner.input("prepare_job", json::object(), runner.prepare_args());
    REQUIRE(runner.call(prepare) == 0);
    const json response =
        json::parse(tests::read_file(prepare.at("responseFile").get<std::string>()));
    tests::check_prepare_response(response);
    const json state = response.at("state");
    const pid_t main =
        runner.start(runner.input("run_script_step", state, runner.node_action("main.js")));
    REQUIRE(main > 0);
    const bool started = wait_until([&] { return fs::exists(runner.temp / "main-started"); },
                                    std::chrono::seconds(60));
    INFO(runner.log());
    // SIGKILL: nothing is forwarded; `sandgate hook` learns of it by its parent's death.
    CHECK(tests::signal_and_wait(main, SIGKILL) != -1);
    REQUIRE(started);
    CHECK(wait_until([&] { return runner.survivors().empty(); }, std::chrono::seconds(20)));
    CHECK(runner.call(runner.input("cleanup_job", state, json::object())) == 0);
    CHECK_FALSE(fs::exists(runner.state / "hook-jobs" /
                           response.at("context").at("container").at("id").get<std::string>()));
    CHECK(runner.survivors().empty());
}
