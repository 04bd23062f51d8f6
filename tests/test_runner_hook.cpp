// `sandgate hook`: the runner's container hooks against the example inputs of
// actions/runner-container-hooks, and against inputs built here for every field, end to end
// through the real binary and the real wrap.
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "agent/runner_hook.hpp"
#include "sandbox/run.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const fs::path k_examples = fs::path(SANDGATE_SHARED_DIR) / "corpora/runner-container-hooks";

sandbox::RunResult hook(const std::string& input, const fs::path& state_dir,
                        std::vector<std::string> extra = {}) {
    sandbox::RunRequest request;
    request.argv = {SANDGATE_BINARY, "hook", "--state-dir", state_dir.string()};
    request.argv.insert(request.argv.end(), extra.begin(), extra.end());
    request.policy.mode = sandbox::SandboxMode::off;
    request.env = sandbox::child_environment(sandbox::current_environment(), {}, {});
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
        fs::create_directories(work / "_temp");
        fs::create_directories(externals);
        tests::write_file(externals / "tool.sh", "echo external tool\n");
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
                       {"readOnly", true}}}}}},
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
    CHECK(state.at("sandgate").at("mounts").size() == 2);  // docker.sock never bound
    const fs::path scratch = runner.state / "hook-jobs" / id;
    CHECK(fs::is_directory(scratch));

    auto step = hook(runner
                         .step_input(state,
                                     "pwd\n"
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
    CHECK_FALSE(fs::exists(runner.externals / "planted"));

    auto failing = hook(runner.step_input(state, "exit 7\n").dump(), runner.state);
    CHECK(failing.exit_status() == 7);

    const json cleanup = {
        {"command", "cleanup_job"}, {"responseFile", nullptr}, {"state", state}, {"args", {}}};
    CHECK(hook(cleanup.dump(), runner.state).exit_status() == 0);
    CHECK_FALSE(fs::exists(scratch));
    CHECK(hook(cleanup.dump(), runner.state).exit_status() == 0);  // idempotent
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
