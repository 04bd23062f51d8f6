// The state directory (the action trees' home) lies outside the workspace, as it does for a
// user's checkout: the wrap masks sandgate's state wherever a bind would show it.
// Remote `uses:` steps end to end through `sandgate run`: resolved from a file:// source
// (real actions from ../shared/corpora/actions, and small ones made here) before the jobs
// start, run from read-only trees, locked in the report; misses fail closed.
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "tests/support/action_fixture.hpp"
#include "tests/support/run_helpers.hpp"
#include "tests/support/scoped_env.hpp"

namespace fs = std::filesystem;

namespace {

const jobs::Value& job_named(const jobs::Value& report, const std::string& id) {
    for (const auto& workflow : report.get("workflows")->as_array())
        for (const auto& job : workflow.get("jobs")->as_array())
            if (job.get("id")->to_display_string() == id) return job;
    static const jobs::Value none;
    FAIL("no job " << id);
    return none;
}

std::string text(const jobs::Value& value, std::string_view key) {
    const auto* found = value.get(key);
    return found ? found->to_display_string() : "";
}

const jobs::Value* locked(const jobs::Value& report, const std::string& uses) {
    const auto* actions = report.get("actions");
    if (actions == nullptr) return nullptr;
    for (const auto& entry : actions->as_array())
        if (text(entry, "uses") == uses) return &entry;
    return nullptr;
}

// The hosted tool cache's layout for one interpreter (another part builds the real one).
fs::path python_tool_cache(const fs::path& dir) {
    const auto cache = dir / "toolcache";
    const auto bin = cache / "Python/3.11.2/x64/bin";
    fs::create_directories(bin);
    const auto python = fs::canonical("/usr/bin/python3");
    fs::create_symlink(python, bin / "python");
    fs::create_symlink(python, bin / "python3");
    tests::write_file(cache / "Python/3.11.2/x64.complete", "");
    return cache;
}

}  // namespace

TEST_CASE("the real actions/setup-python@v7 runs from the action store against a tool cache") {
    const auto dir = tests::make_temp_dir("remote");
    tests::ScopedEnv state("XDG_STATE_HOME", (dir / "state").string());
    const auto source = tests::make_mirror_source(dir, "setup-python");
    const auto cache = python_tool_cache(dir);
    tests::write_file(dir / "repo/w/py.yml", R"(on: push
jobs:
  py:
    runs-on: ubuntu-latest
    steps:
      - id: py
        uses: actions/setup-python@v7
        env:
          RUNNER_TOOL_CACHE: )" + cache.string() +
                                                 R"(
        with:
          python-version: '3.11'
      - run: python --version && test "${{ steps.py.outputs.python-version }}" = 3.11.2
)");
    // The tool cache, bound read-only into the wrap (inside the suite's own wrap steps run
    // unwrapped, and --read-only has nothing to bind).
    std::vector<std::string> bind;
    if (!tests::under_wrap()) bind = {"--read-only", cache.string()};
    auto with_bind = [&](std::vector<std::string> args) {
        args.insert(args.end(), bind.begin(), bind.end());
        return args;
    };
    auto ran =
        tests::run_workflows(dir, with_bind({"-C", "repo", "-W", "w", "--report", "r.json",
                                             "--actions-source", "file://" + source.string()}));
    CHECK(ran.exit_code == 0);
    CHECK(ran.output.find("Successfully set up CPython (3.11.2)") != std::string::npos);
    CHECK(ran.output.find("Python 3.11") != std::string::npos);
    auto report = tests::read_report(dir / "r.json");
    CHECK(text(job_named(report, "py"), "conclusion") == "success");
    const auto* entry = locked(report, "actions/setup-python@v7");
    REQUIRE(entry != nullptr);
    CHECK(text(*entry, "sha") == "91b337006d77bc934620a651e697d85c92c5b201");
    CHECK(text(*entry, "repository") == "actions/setup-python");

    // Pinned now: with no source at all the same workflow resolves and runs from the store.
    auto offline =
        tests::run_workflows(dir, with_bind({"-C", "repo", "-W", "w", "--actions-source", "none"}));
    CHECK(offline.exit_code == 0);
    CHECK(offline.output.find("Successfully set up CPython (3.11.2)") != std::string::npos);
}

TEST_CASE(
    "remote composite and node actions: recursion, inputs, pre/post and state, read-only trees, "
    "misses, docker") {
    const auto dir = tests::make_temp_dir("remote");
    tests::ScopedEnv state("XDG_STATE_HOME", (dir / "state").string());
    const auto source = dir / "source";
    const auto hello = tests::make_action_repo(
        source, "acme", "hello", "v1",
        {
            {"action.yml", R"(name: hello
inputs:
  who:
    default: world
  loud:
    default: false
outputs:
  greeting:
    description: the greeting
runs:
  using: node20
  pre: pre.js
  main: main.js
  post: post.js
  post-if: success()
)"},
            {"pre.js",
             "require('fs').appendFileSync(process.env.GITHUB_STATE, 'from_pre=1\\n');\n"},
            {"main.js", R"(const fs = require('fs');
const e = process.env;
const checks = [e.STATE_from_pre === '1', e.INPUT_LOUD === 'false', e.GITHUB_ACTION_REPOSITORY === 'acme/hello',
                e.GITHUB_ACTION_REF === 'v1', fs.existsSync(e.GITHUB_ACTION_PATH + '/main.js')];
if (checks.includes(false)) { console.log('bad environment ' + JSON.stringify(checks)); process.exit(5); }
let refused = false;
try { fs.writeFileSync(e.GITHUB_ACTION_PATH + '/planted.js', 'x'); } catch (err) { refused = true; }
if (!refused) { console.log('the action tree is writable'); process.exit(6); }
fs.appendFileSync(e.GITHUB_STATE, 'token=' + e.INPUT_WHO + '\n');
fs.appendFileSync(e.GITHUB_OUTPUT, 'greeting=hi-' + e.INPUT_WHO + '\n');
)"},
            {"post.js", "console.log('post saw ' + process.env.STATE_token);\n"},
        });
    const auto greet =
        tests::make_action_repo(source, "acme", "greet", "v2", {{"action.yml", R"(name: greet
inputs:
  name:
    default: composite
outputs:
  said:
    value: ${{ steps.h.outputs.greeting }}
runs:
  using: composite
  steps:
    - id: h
      uses: acme/hello@v1
      with:
        who: ${{ inputs.name }}
    - run: test -f "$GITHUB_ACTION_PATH/action.yml" && echo "composite from $GITHUB_ACTION_REPOSITORY"
      shell: bash
)"}});
    tests::make_action_repo(source, "acme", "writer", "v1", {{"action.yml", R"(runs:
  using: composite
  steps:
    - run: echo planted > "$GITHUB_ACTION_PATH/planted"
      shell: bash
)"}});
    tests::make_action_repo(source, "acme", "boxed", "v1",
                            {{"action.yml", "runs:\n  using: docker\n  image: Dockerfile\n"},
                             {"Dockerfile", "FROM scratch\n"}});
    tests::write_file(dir / "repo/w/remote.yml", R"(on: push
jobs:
  remote:
    runs-on: ubuntu-latest
    steps:
      - id: g
        uses: acme/greet@v2
        with:
          name: tester
      - run: test "${{ steps.g.outputs.said }}" = hi-tester
  writer:
    runs-on: ubuntu-latest
    steps:
      - uses: acme/writer@v1
  docker:
    runs-on: ubuntu-latest
    steps:
      - uses: acme/boxed@v1
  missing:
    runs-on: ubuntu-latest
    steps:
      - uses: acme/absent@v1
)");
    auto ran = tests::run_workflows(
        dir, {"-C", "repo", "-W", "w", "--report", "r.json", "--actions-source", source.string()});
    CHECK(ran.exit_code == 1);
    CHECK(ran.output.find("post saw tester") != std::string::npos);
    CHECK(ran.output.find("composite from acme/greet") != std::string::npos);
    auto report = tests::read_report(dir / "r.json");
    const auto& remote = job_named(report, "remote");
    CHECK(text(remote, "conclusion") == "success");
    const auto& writer = job_named(report, "writer");
    CHECK(text(writer, "conclusion") == "failure");
    const auto& docker = job_named(report, "docker");
    CHECK(text(docker, "conclusion") == "failure");
    CHECK(text(docker.get("steps")->as_array().at(0), "message").find("runs.using: docker") !=
          std::string::npos);
    const auto& missing = job_named(report, "missing");
    const std::string miss = text(missing.get("steps")->as_array().at(0), "message");
    CHECK(miss.find("'acme/absent@v1' is not in the action cache") != std::string::npos);
    CHECK(miss.find("`sandgate actions pull -C ") != std::string::npos);
    // The lock: the composite's own remote action too, resolved before the jobs started.
    REQUIRE(locked(report, "acme/greet@v2") != nullptr);
    CHECK(text(*locked(report, "acme/greet@v2"), "sha") == greet);
    REQUIRE(locked(report, "acme/hello@v1") != nullptr);
    CHECK(text(*locked(report, "acme/hello@v1"), "sha") == hello);
    REQUIRE(locked(report, "acme/absent@v1") != nullptr);
    CHECK(text(*locked(report, "acme/absent@v1"), "error").find("acme/absent@v1") !=
          std::string::npos);
    const auto trees = dir / "state/sandgate/action-work/trees";
    CHECK(fs::exists(trees / "acme_hello" / hello / "main.js"));
    CHECK_FALSE(fs::exists(trees / "acme_hello" / hello / "planted.js"));
    bool planted = false;
    for (const auto& entry : fs::recursive_directory_iterator(trees))
        planted = planted || entry.path().filename() == "planted";
    CHECK_FALSE(planted);
}

TEST_CASE(
    "a remote action missing from an offline store fails its step closed, naming the pull "
    "command") {
    const auto dir = tests::make_temp_dir("remote");
    tests::ScopedEnv state("XDG_STATE_HOME", (dir / "state").string());
    tests::write_file(dir / "repo/w/a.yml", R"(on: push
jobs:
  a:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/setup-python@v7
      - run: echo never
)");
    auto ran = tests::run_workflows(
        dir, {"-C", "repo", "-W", "w", "--report", "r.json", "--actions-source", "none"});
    CHECK(ran.exit_code == 1);
    auto report = tests::read_report(dir / "r.json");
    const auto& job = job_named(report, "a");
    CHECK(text(job.get("steps")->as_array().at(1), "conclusion") == "skipped");
    const std::string message = text(job.get("steps")->as_array().at(0), "message");
    CHECK(message.find("'actions/setup-python@v7' is not in the action cache") !=
          std::string::npos);
    CHECK(message.find("`sandgate actions pull -C " + fs::canonical(dir / "repo").string()) !=
          std::string::npos);
    CHECK(message.find('\n') == std::string::npos);
}

TEST_CASE(
    "the remote actions of a parallel: block are pulled and pinned like the job's own steps") {
    const auto dir = tests::make_temp_dir("remote-parallel");
    tests::ScopedEnv state("XDG_STATE_HOME", (dir / "state").string());
    const auto source = dir / "source";
    const auto side = tests::make_action_repo(source, "acme", "side", "v1", {{"action.yml", R"(runs:
  using: composite
  steps:
    - run: echo "side action from $GITHUB_ACTION_REPOSITORY"
      shell: bash
)"}});
    tests::write_file(dir / "repo/w/par.yml", R"(on: push
jobs:
  par:
    runs-on: ubuntu-latest
    steps:
      - parallel:
          - uses: acme/side@v1
          - run: echo beside
)");
    auto pulled = tests::run_sandgate(
        dir, {"actions", "pull", "-C", "repo", "-W", "w", "--source", source.string()});
    INFO(pulled.output);
    CHECK(pulled.exit_code == 0);
    // With no source, only what the pull stored can run.
    auto ran = tests::run_workflows(
        dir, {"-C", "repo", "-W", "w", "--report", "r.json", "--actions-source", "none"});
    CHECK(ran.exit_code == 0);
    CHECK(ran.output.find("side action from acme/side") != std::string::npos);
    auto report = tests::read_report(dir / "r.json");
    REQUIRE(locked(report, "acme/side@v1") != nullptr);
    CHECK(text(*locked(report, "acme/side@v1"), "sha") == side);
}

TEST_CASE(
    "step-security/harden-runner is a logged no-op: the wrap already does its job, nothing is "
    "fetched") {
    const auto dir = tests::make_temp_dir("remote-harden");
    tests::ScopedEnv state("XDG_STATE_HOME", (dir / "state").string());
    tests::write_file(dir / "repo/w/h.yml", R"(on: push
jobs:
  h:
    runs-on: ubuntu-latest
    steps:
      - uses: step-security/harden-runner@v2
        with:
          egress-policy: audit
      - run: echo after
)");
    auto ran = tests::run_workflows(
        dir, {"-C", "repo", "-W", "w", "--report", "r.json", "--actions-source", "none"});
    CHECK(ran.exit_code == 0);
    CHECK(ran.output.find("sandgate: step-security/harden-runner does nothing here") !=
          std::string::npos);
    CHECK(ran.output.find("after") != std::string::npos);
    auto report = tests::read_report(dir / "r.json");
    CHECK(text(job_named(report, "h"), "conclusion") == "success");
    CHECK(locked(report, "step-security/harden-runner@v2") == nullptr);  // never resolved
}
