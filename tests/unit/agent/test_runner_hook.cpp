// `sandgate hook`: the runner's container hooks against the example inputs of
// actions/runner-container-hooks, and against inputs built here for every field, end to end
// through the real binary and the real wrap.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "agent/hook/runner_hook.hpp"
#include "sandbox/process/run.hpp"
#include "tests/support/processes.hpp"
#include "tests/support/runner_types.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const fs::path k_examples = fs::path(SANDGATE_SHARED_DIR) / "corpora/runner-container-hooks";

std::vector<std::string> hook_argv(const fs::path& state_dir, pid_t owner = ::getpid()) {
    return {SANDGATE_BINARY,    "hook",        "--state-dir",
            state_dir.string(), "--job-owner", std::to_string(owner)};
}

sandbox::RunResult hook(const std::string& input, const fs::path& state_dir,
                        std::vector<std::string> extra = {}, const sandbox::Environment& env = {}) {
    sandbox::RunRequest request;
    request.argv = hook_argv(state_dir);
    request.argv.insert(request.argv.end(), extra.begin(), extra.end());
    request.policy.mode = sandbox::SandboxMode::off;
    request.env = sandbox::child_environment(sandbox::current_environment(), {}, env);
    request.stdin_text = input;
    return sandbox::run(request);
}

struct Runner {  // the directories a runner hands its hooks, and the container paths
    fs::path root = tests::make_temp_dir("hook");
    fs::path work = root / "_work";
    fs::path externals = root / "externals";
    fs::path state = root / "state";
    Runner() {
        fs::create_directories(work / "repo");
        fs::create_directories(work / "_temp/_github_home");
        fs::create_directories(externals / "bin");
        tests::write_file(externals / "tool.sh", "echo external tool\n");
        tests::write_file(externals / "bin/ext-tool", "#!/bin/sh\necho \"ext-tool $*\"\n");
        // 0755 as the runner's externals are: the wrap runs as an identity of its own as root.
        fs::permissions(externals / "bin/ext-tool",
                        fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec);
    }
    json prepare_input() const {
        return {{"command", "prepare_job"},
                {"responseFile", (root / "response.json").string()},
                {"state", json::object()},
                {"args",
                 {{"container",
                   {{"image", "debian:12"},
                    {"workingDirectory", "/__w/repo"},
                    {"environmentVariables", {{"JOB_LEVEL", "from-prepare"}}},
                    {"userMountVolumes", json::array()},
                    {"systemMountVolumes",
                     {{{"sourceVolumePath", "/var/run/docker.sock"},
                       {"targetVolumePath", "/var/run/docker.sock"},
                       {"readOnly", false}},
                      {{"sourceVolumePath", work.string()},
                       {"targetVolumePath", "/__w"},
                       {"readOnly", false}},
                      {{"sourceVolumePath", externals.string()},
                       {"targetVolumePath", "/__e"},
                       {"readOnly", true}},
                      {{"sourceVolumePath", (work / "_temp/_github_home").string()},
                       {"targetVolumePath", "/github/home"},
                       {"readOnly", false}}}}}},
                  {"services", json::array()}}}};
    }
    json step_input(const json& job_state, const std::string& script) const {
        tests::write_file(work / "_temp/step.sh", script);
        return {{"command", "run_script_step"},
                {"responseFile", nullptr},
                {"state", job_state},
                {"args",
                 {{"entryPoint", "sh"},
                  {"entryPointArgs", {"-e", "/__w/_temp/step.sh"}},
                  {"environmentVariables", {{"STEP_LEVEL", "from-step"}}},
                  {"prependPath", {"/__e"}},
                  {"workingDirectory", "/__w/repo"}}}};
    }
};

}  // namespace

TEST_CASE("the runner's example inputs parse, and what sandgate cannot honour is refused clearly") {
    auto prepare = agent::parse_hook_input(tests::read_file(k_examples / "prepare-job.json"));
    REQUIRE(prepare);
    CHECK(prepare->command == agent::HookCommand::prepare_job);
    CHECK(prepare->prepare.image == "node:22");
    CHECK(prepare->prepare.env.at("NODE_ENV") == "development");
    // docker.sock and the named volume are dropped; the runner's 7 other mounts stay.
    CHECK(prepare->prepare.mounts.size() == 7);
    for (const auto& mount : prepare->prepare.mounts)
        CHECK(mount.source.find("docker.sock") == std::string::npos);
    REQUIRE(prepare->services.size() == 1);
    auto refused = agent::run_hook(*prepare, {});
    REQUIRE_FALSE(refused);
    CHECK(refused.error().message.find("args.services") != std::string::npos);

    auto script = agent::parse_hook_input(tests::read_file(k_examples / "run-script-step.json"));
    REQUIRE(script);
    CHECK(script->step.entry_point == "bash");
    CHECK(script->step.entry_point_args == std::vector<std::string>{"-e", "example-script.sh"});
    CHECK(script->step.prepend_path.size() == 2);
    CHECK(script->step.working_directory == "/__w/repo/repo");
    auto no_state = agent::run_hook(*script, {});
    REQUIRE_FALSE(no_state);
    CHECK(no_state.error().message.find("state.sandgate") != std::string::npos);

    auto container =
        agent::parse_hook_input(tests::read_file(k_examples / "run-container-step.json"));
    REQUIRE(container);
    CHECK(container->command == agent::HookCommand::run_container_step);
    CHECK(container->step.image == "node:22");
}

TEST_CASE("bad hook inputs name the field and run nothing") {
    const auto check = [](const std::string& input, const std::string& field) {
        auto parsed = agent::parse_hook_input(input);
        INFO(input);
        REQUIRE_FALSE(parsed);
        CHECK(parsed.error().message.find(field) != std::string::npos);
    };
    check("{not json", "not JSON");
    check("[]", "JSON object");
    check(R"({"command": "launch_rockets"})", "command");
    check(R"({"command": "prepare_job", "responseFile": null})", "responseFile");
    check(R"({"command": "run_script_step", "state": {}})", "args");
    check(R"({"command": "run_script_step", "args": {"entryPoint": "sh", "entryPointArgs": [1],
              "workingDirectory": "/__w"}})",
          "args.entryPointArgs");
    check(R"({"command": "run_script_step", "args": {"entryPoint": "", "workingDirectory": "/"}})",
          "args.entryPoint");
    check(
        R"({"command": "run_script_step", "args": {"entryPoint": "sh", "workingDirectory": "rel"}})",
        "args.workingDirectory");
    check(R"({"command": "cleanup_job", "state": {"sandgate": {"job": "../../etc"}}})",
          "state.sandgate.job");
}

TEST_CASE("a job through the hooks: prepare, steps in the wrap at container paths, cleanup") {
    SKIP_UNDER_WRAP("runs bwrap, which cannot mount a new /proc inside the wrap");
    Runner runner;
    auto prepared = hook(runner.prepare_input().dump(), runner.state);
    INFO(prepared.err.head);
    REQUIRE(prepared.exit_status() == 0);
    const json response = json::parse(tests::read_file(runner.root / "response.json"));
    const json state = response.at("state");
    const std::string id = state.at("sandgate").at("job");
    CHECK(response.at("context").at("container").at("id") == id);
    CHECK(response.at("isAlpine") == false);
    CHECK(state.at("sandgate").at("mounts").size() == 3);  // docker.sock never bound
    const fs::path scratch = runner.state / "hook-jobs" / id;
    CHECK(fs::is_directory(scratch));

    auto step = hook(runner
                         .step_input(state,
                                     "test \"$(pwd)\" = /__w/repo || exit 5\n"
                                     "test \"$HOME\" = /github/home || exit 6\n"
                                     "echo kept > \"$HOME/kept\"\n"
                                     "echo \"$JOB_LEVEL $STEP_LEVEL\"\n"
                                     "echo built > /__w/repo/artifact.txt\n"
                                     "sh /__e/tool.sh\n"
                                     "case $PATH in /__e:*) ;; *) exit 4;; esac\n"
                                     "if touch /__e/planted 2>/dev/null; then exit 3; fi\n"
                                     "test ! -e /var/run/docker.sock\n")
                         .dump(),
                     runner.state);
    INFO(step.out.head << step.err.head);
    CHECK(step.exit_status() == 0);
    CHECK(step.out.head.find("from-prepare from-step") != std::string::npos);
    CHECK(step.out.head.find("external tool") != std::string::npos);
    CHECK(tests::read_file(runner.work / "repo/artifact.txt") == "built\n");
    CHECK(tests::read_file(runner.work / "_temp/_github_home/kept") == "kept\n");
    CHECK_FALSE(fs::exists(runner.externals / "planted"));

    auto failing = hook(runner.step_input(state, "exit 7\n").dump(), runner.state);
    CHECK(failing.exit_status() == 7);

    const json cleanup = {
        {"command", "cleanup_job"}, {"responseFile", nullptr}, {"state", state}, {"args", {}}};
    CHECK(hook(cleanup.dump(), runner.state).exit_status() == 0);
    CHECK_FALSE(fs::exists(scratch));
    CHECK(hook(cleanup.dump(), runner.state).exit_status() == 0);  // idempotent
}

TEST_CASE("prepare_job's response is what the runner deserializes, and its state comes back") {
    Runner runner;
    auto prepared = hook(runner.prepare_input().dump(), runner.state);
    INFO(prepared.err.head);
    REQUIRE(prepared.exit_status() == 0);
    const json response = json::parse(tests::read_file(runner.root / "response.json"));
    tests::check_prepare_response(response);
    CHECK(response.at("context").at("services") == json::array());
    CHECK_FALSE(response.at("context").at("container").contains("ports"));
    // The runner hands `state` back verbatim: it parses as this job's.
    json cleanup = {{"command", "cleanup_job"},
                    {"responseFile", nullptr},
                    {"state", response.at("state")},
                    {"args", json::object()}};
    auto parsed = agent::parse_hook_input(cleanup.dump());
    REQUIRE(parsed);
    REQUIRE(parsed->state);
    CHECK(parsed->state->id == response.at("context").at("container").at("id"));
    CHECK(hook(cleanup.dump(), runner.state).exit_status() == 0);
}

TEST_CASE("prependPath is taken as a list or as one ':'-joined string") {
    const auto parsed = [](const json& path) {
        const json input = {
            {"command", "run_script_step"},
            {"args", {{"entryPoint", "sh"}, {"prependPath", path}, {"workingDirectory", "/__w"}}}};
        auto result = agent::parse_hook_input(input.dump());
        REQUIRE(result);
        return result->step.prepend_path;
    };
    const std::vector<std::string> both = {"/__w/_tool/go/bin", "/__e/node20/bin"};
    CHECK(parsed({"/__w/_tool/go/bin", "/__e/node20/bin"}) == both);
    CHECK(parsed("/__w/_tool/go/bin:/__e/node20/bin") == both);
    CHECK(parsed("").empty());
    CHECK(parsed(nullptr).empty());
    auto bad = agent::parse_hook_input(
        R"({"command": "run_script_step", "args": {"entryPoint": "sh", "prependPath": 3,
            "workingDirectory": "/__w"}})");
    REQUIRE_FALSE(bad);
    CHECK(bad.error().message.find("args.prependPath") != std::string::npos);
}

TEST_CASE("entry points, arguments and prependPath are container paths, found through the binds") {
    SKIP_UNDER_WRAP("runs bwrap, which cannot mount a new /proc inside the wrap");
    Runner runner;
    tests::write_file(runner.externals / "bin/ext-tool",
                      "#!/bin/sh\npwd\nfor a in \"$@\"; do echo \"[$a]\"; done\n");
    auto prepared = hook(runner.prepare_input().dump(), runner.state);
    INFO(prepared.err.head);
    REQUIRE(prepared.exit_status() == 0);
    const json state = json::parse(tests::read_file(runner.root / "response.json")).at("state");
    // As the runner sends a node action: the script path in literal quotes, split on spaces.
    const json split = {"\"/__w/my", "action/index.js\"", "plain"};
    for (const std::string entry : {"/__e/bin/ext-tool", "ext-tool"}) {
        json input = runner.step_input(state, "");
        input["args"]["entryPoint"] = entry;
        input["args"]["entryPointArgs"] = split;
        input["args"]["prependPath"] = "/__e/bin";  // a string, as some runners send it
        auto step = hook(input.dump(), runner.state);
        INFO(entry << ": " << step.out.head << step.err.head);
        CHECK(step.exit_status() == 0);
        CHECK(step.out.head == "/__w/repo\n[/__w/my action/index.js]\n[plain]\n");
    }
    json missing = runner.step_input(state, "");
    missing["args"]["entryPoint"] = "/__e/node20/bin/node";
    auto step = hook(missing.dump(), runner.state);
    CHECK(step.exit_status() == 127);
    CHECK(step.err.head.find("/__e/node20/bin/node") != std::string::npos);
}

TEST_CASE("a link a step planted at the response file is replaced, never written through (hook)") {
    Runner runner;
    tests::write_file(runner.root / "host-file", "host content\n");
    // The runner's temp directory is bound into its steps: one of them left a link where the
    // next job's response goes.
    fs::create_symlink(runner.root / "host-file", runner.root / "response.json");
    fs::create_symlink(runner.root / "host-file", runner.root / ".response.json.sandgate-tmp");
    auto prepared = hook(runner.prepare_input().dump(), runner.state);
    INFO(prepared.err.head);
    REQUIRE(prepared.exit_status() == 0);
    CHECK(tests::read_file(runner.root / "host-file") == "host content\n");
    CHECK(fs::is_regular_file(fs::symlink_status(runner.root / "response.json")));
    CHECK(json::parse(tests::read_file(runner.root / "response.json")).contains("state"));
}

TEST_CASE("run_container_step without a container runtime fails the step with the reason") {
    Runner runner;
    json input = json::parse(tests::read_file(k_examples / "run-container-step.json"));
    input["state"] = {{"sandgate",
                       {{"job", "00ff"},
                        {"scratch", (runner.state / "hook-jobs/00ff").string()},
                        {"image", ""},
                        {"mounts", json::array()},
                        {"env", json::object()}}}};
    auto result = hook(input.dump(), runner.state);
    CHECK(result.exit_status() == 1);
    CHECK(result.err.head.find("--sandbox container") != std::string::npos);
}

TEST_CASE("the workflow's container.volumes are refused unless allowed, then bound read-only") {
    Runner runner;
    const fs::path shared = runner.root / "shared-cache";
    tests::write_file(shared / "data.txt", "cached\n");
    json input = runner.prepare_input();
    input["args"]["container"]["userMountVolumes"] = {{{"sourceVolumePath", shared.string()},
                                                       {"targetVolumePath", "/cache"},
                                                       {"readOnly", false}}};
    auto refused = hook(input.dump(), runner.state);
    CHECK(refused.exit_status() == 1);
    CHECK(refused.err.head.find("args.container.userMountVolumes") != std::string::npos);
    CHECK(refused.err.head.find("--allow-volume") != std::string::npos);
    CHECK_FALSE(fs::exists(runner.root / "response.json"));
    // Inside an allowed directory, through a "..": still refused once normal.
    input["args"]["container"]["userMountVolumes"][0]["sourceVolumePath"] =
        (shared / "../state").string();
    CHECK(hook(input.dump(), runner.state, {"--allow-volume", shared.string()}).exit_status() == 1);
    input["args"]["container"]["userMountVolumes"][0]["sourceVolumePath"] = "my_docker_volume";
    CHECK(hook(input.dump(), runner.state, {"--allow-volume", shared.string()}).exit_status() == 1);

    input["args"]["container"]["userMountVolumes"][0]["sourceVolumePath"] = shared.string();
    auto allowed = hook(input.dump(), runner.state, {"--allow-volume", shared.string()});
    INFO(allowed.err.head);
    REQUIRE(allowed.exit_status() == 0);
    const json state = json::parse(tests::read_file(runner.root / "response.json")).at("state");
    const json& mounts = state.at("sandgate").at("mounts");
    REQUIRE(mounts.size() == 4);
    CHECK(mounts.back().at("targetVolumePath") == "/cache");
    CHECK(mounts.back().at("readOnly") == true);
    SKIP_UNDER_WRAP("the step runs bwrap, which cannot mount a new /proc inside the wrap");
    auto step = hook(runner
                         .step_input(state,
                                     "cat /cache/data.txt\n"
                                     "if echo x > /cache/planted 2>/dev/null; then exit 3; fi\n")
                         .dump(),
                     runner.state);
    INFO(step.out.head << step.err.head);
    CHECK(step.exit_status() == 0);
    CHECK(step.out.head == "cached\n");
    CHECK_FALSE(fs::exists(shared / "planted"));
}

TEST_CASE("a job whose owner is gone is reaped by the next prepare_job; a live one is kept") {
    Runner runner;
    const pid_t owner = ::fork();
    if (owner == 0) {
        ::pause();
        ::_exit(0);
    }
    const auto prepare_as = [&](pid_t by) {
        sandbox::RunRequest request;
        request.argv = hook_argv(runner.state, by);
        request.policy.mode = sandbox::SandboxMode::off;
        request.env = sandbox::child_environment(sandbox::current_environment(), {}, {});
        request.stdin_text = runner.prepare_input().dump();
        return sandbox::run(request);
    };
    const auto prepared_id = [&](pid_t by) {
        auto result = prepare_as(by);
        INFO(result.err.head);
        REQUIRE(result.exit_status() == 0);
        return json::parse(tests::read_file(runner.root / "response.json"))
            .at("state")
            .at("sandgate")
            .at("job")
            .get<std::string>();
    };
    const std::string abandoned = prepared_id(owner);
    const std::string kept = prepared_id(::getpid());
    CHECK(fs::is_directory(runner.state / "hook-jobs" / abandoned / "scratch"));
    tests::signal_and_wait(owner, SIGKILL);
    const std::string next = prepared_id(::getpid());
    CHECK_FALSE(fs::exists(runner.state / "hook-jobs" / abandoned));
    CHECK(fs::is_directory(runner.state / "hook-jobs" / kept / "scratch"));
    CHECK(fs::is_directory(runner.state / "hook-jobs" / next / "scratch"));
    // An owner that is not running makes no job.
    auto dead_owner = prepare_as(owner);
    CHECK(dead_owner.exit_status() == 1);
    CHECK(dead_owner.err.head.find("--job-owner") != std::string::npos);
}

TEST_CASE("cleanup_job stops a step of the job still running, and its whole tree") {
    SKIP_UNDER_WRAP("runs bwrap, which cannot mount a new /proc inside the wrap");
    Runner runner;
    auto prepared = hook(runner.prepare_input().dump(), runner.state);
    INFO(prepared.err.head);
    REQUIRE(prepared.exit_status() == 0);
    const json state = json::parse(tests::read_file(runner.root / "response.json")).at("state");
    const std::string marker = tests::unique_marker();
    tests::write_file(
        runner.root / "step.json",
        runner
            .step_input(state, "sh -c 'sleep 300; :' " + marker + " &\ntouch /__w/started\nwait\n")
            .dump());
    std::vector<std::string> env;
    for (const auto& [name, value] :
         sandbox::child_environment(sandbox::current_environment(), {}, {}))
        env.push_back(name + "=" + value);
    const pid_t step = tests::start_with_files(hook_argv(runner.state), env,
                                               runner.root / "step.json", runner.root / "step.log");
    REQUIRE(step > 0);
    for (int i = 0; i < 600 && !fs::exists(runner.work / "started"); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    REQUIRE(fs::exists(runner.work / "started"));
    CHECK_FALSE(tests::processes_with(marker).empty());
    const json cleanup = {{"command", "cleanup_job"}, {"responseFile", nullptr}, {"state", state}};
    CHECK(hook(cleanup.dump(), runner.state).exit_status() == 0);
    const int status = tests::wait_for(step);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 128 + SIGTERM);
    CHECK(tests::processes_with(marker).empty());
    CHECK_FALSE(
        fs::exists(runner.state / "hook-jobs" / state.at("sandgate").at("job").get<std::string>()));
}

TEST_CASE("run_container_step: a null entryPoint runs the image's own with the arguments") {
    Runner runner;
    const fs::path bin = runner.root / "bin";
    fs::create_directories(bin);
    fs::copy_file(fs::path(SANDGATE_SOURCE_DIR) / "tests/helpers/fake-runtime.sh", bin / "podman");
    fs::permissions(bin / "podman", fs::perms::owner_all);
    auto prepared = hook(runner.prepare_input().dump(), runner.state, {"--sandbox", "container"});
    INFO(prepared.err.head);
    REQUIRE(prepared.exit_status() == 0);
    const json state = json::parse(tests::read_file(runner.root / "response.json")).at("state");
    json input = json::parse(tests::read_file(k_examples / "run-container-step.json"));
    input["state"] = state;
    input["args"]["entryPoint"] = nullptr;
    input["args"]["entryPointArgs"] = {"--flag", "value"};
    input["args"]["systemMountVolumes"] =
        runner.prepare_input()["args"]["container"]["systemMountVolumes"];
    input["args"]["userMountVolumes"] = json::array();
    input["args"]["workingDirectory"] = "/__w/repo";
    const sandbox::Environment path = {{"PATH", bin.string() + ":/usr/bin:/bin"}};
    auto ran = hook(input.dump(), runner.state, {"--sandbox", "container"}, path);
    INFO(ran.out.head << ran.err.head);
    CHECK(ran.exit_status() == 0);
    const std::string log = tests::read_file(bin / "argv.log");
    CHECK(log.find("\nnode:22\n--flag\nvalue\n") != std::string::npos);
    CHECK(log.find("--entrypoint") == std::string::npos);
    CHECK(log.find(runner.work.string() + ":/__w:rw") != std::string::npos);
    // The container arm starts in the host path of the working directory (bound at itself).
    CHECK(log.find("\n-w\n" + (runner.work / "repo").string() + "\n") != std::string::npos);

    input["args"]["entryPointArgs"] = json::array();
    auto unknown = hook(input.dump(), runner.state, {"--sandbox", "container"}, path);
    CHECK(unknown.exit_status() == 1);
    CHECK(unknown.err.head.find("args.entryPoint") != std::string::npos);
}

TEST_CASE("the runner's thin script hands stdin to sandgate hook and returns its status") {
    Runner runner;
    sandbox::RunRequest request;
    request.argv = {"node", SANDGATE_SOURCE_DIR "/contrib/runner-hooks/index.js"};
    request.policy.mode = sandbox::SandboxMode::off;
    request.env = sandbox::child_environment(
        sandbox::current_environment(), {},
        {{"SANDGATE_BIN", SANDGATE_BINARY},
         {"SANDGATE_HOOK_ARGS", "--state-dir " + runner.state.string()}});
    request.stdin_text = R"({"command": "launch_rockets"})";
    auto result = sandbox::run(request);
    CHECK(result.exit_status() == 1);
    CHECK(result.err.head.find("unknown hook command") != std::string::npos);
}
