#include <sys/utsname.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "jobs/expr/value.hpp"
#include "tests/helpers/git_fixture.hpp"
#include "tests/support/run_helpers.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"

namespace {

const jobs::Value& at(const jobs::Value& value, std::initializer_list<std::string_view> keys) {
    const jobs::Value* current = &value;
    for (auto key : keys) {
        REQUIRE(current->get(key) != nullptr);
        current = current->get(key);
    }
    return *current;
}

const jobs::Value& job_at(const jobs::Value& report, std::size_t workflow, std::size_t job) {
    return at(report, {"workflows"}).as_array().at(workflow).get("jobs")->as_array().at(job);
}

const jobs::Value& step_at(const jobs::Value& job, std::size_t step) {
    return job.get("steps")->as_array().at(step);
}

std::string text(const jobs::Value& value, std::string_view key) {
    return value.get(key)->to_display_string();
}

}  // namespace

TEST_CASE("steps, outputs across needs, if, continue-on-error and the report") {
    auto dir = tests::make_temp_dir("run");
    tests::write_file(dir / ".github/workflows/ci.yml", R"(name: ci
on: push
env:
  GREETING: hello
jobs:
  first:
    runs-on: ubuntu-latest
    outputs:
      word: ${{ steps.say.outputs.word }}
    steps:
      - id: say
        run: |
          echo "word=$GREETING-world" >> "$GITHUB_OUTPUT"
          echo out-line
      - name: may fail
        continue-on-error: true
        run: exit 3
      - name: never
        if: failure()
        run: exit 9
  second:
    needs: first
    runs-on: [self-hosted, linux]
    steps:
      - run: test "${{ needs.first.outputs.word }}" = hello-world
      - run: test "${{ needs.first.result }}" = success
  skipped:
    needs: second
    if: github.event_name == 'pull_request'
    runs-on: ubuntu-latest
    steps:
      - run: exit 1
  elsewhere:
    runs-on: windows-latest
    steps:
      - run: exit 1
)");
    auto ran = tests::run_workflows(dir, {"--report", (dir / "report.json").string()});
    REQUIRE(ran.exit_code == 0);
    auto report = tests::read_report(dir / "report.json");
    CHECK(text(report, "event") == "push");
    CHECK(text(report, "exit_code") == "0");
    const auto& first = job_at(report, 0, 0);
    CHECK(text(first, "conclusion") == "success");
    CHECK(text(at(first, {"outputs"}), "word") == "hello-world");
    CHECK(text(step_at(first, 0), "stdout_bytes") == "9");
    CHECK(text(step_at(first, 0), "exit_code") == "0");
    CHECK(text(step_at(first, 1), "outcome") == "failure");
    CHECK(text(step_at(first, 1), "conclusion") == "success");
    CHECK(text(step_at(first, 1), "exit_code") == "3");
    CHECK(text(step_at(first, 2), "conclusion") == "skipped");
    CHECK(text(job_at(report, 0, 1), "conclusion") == "success");
    CHECK(text(job_at(report, 0, 2), "conclusion") == "skipped");
    const auto& elsewhere = job_at(report, 0, 3);
    CHECK(text(elsewhere, "conclusion") == "skipped");
    CHECK(text(elsewhere, "message").find("windows-latest") != std::string::npos);
}

TEST_CASE("a failing job exits 1 and skips its dependents; an invalid workflow exits 2") {
    auto dir = tests::make_temp_dir("run");
    tests::write_file(dir / ".github/workflows/ci.yml", R"(on: push
jobs:
  fail:
    runs-on: ubuntu-latest
    steps:
      - run: exit 4
  after:
    needs: fail
    runs-on: ubuntu-latest
    steps:
      - run: echo should not run
  cleanup:
    needs: after
    if: always()
    runs-on: ubuntu-latest
    steps:
      - run: test "${{ needs.after.result }}" = skipped
)");
    auto ran = tests::run_workflows(dir, {"--report", "r.json"});
    CHECK(ran.exit_code == 1);
    CHECK(ran.output.find("job 'fail' failed") != std::string::npos);
    CHECK(ran.output.find("should not run") == std::string::npos);
    auto report = tests::read_report(dir / "r.json");
    CHECK(text(step_at(job_at(report, 0, 0), 0), "exit_code") == "4");
    CHECK(text(job_at(report, 0, 1), "conclusion") == "skipped");
    CHECK(text(job_at(report, 0, 2), "conclusion") == "success");

    tests::write_file(
        dir / "bad/bad.yml",
        "on: push\njobs:\n  a:\n    runs-on: x\n    steps:\n      - run: a\n        uses: ./b\n");
    auto bad = tests::run_workflows(dir, {"-W", "bad"});
    CHECK(bad.exit_code == 2);
    CHECK(bad.output.find("bad/bad.yml:7:9: Unexpected value 'uses'") != std::string::npos);
    CHECK(tests::run_workflows(dir, {"--matrix", "nocolon"}).exit_code == 2);
    CHECK(tests::run_workflows(dir, {"-W", "missing"}).exit_code == 2);
    CHECK(tests::run_workflows(dir, {"-j", "nosuchjob"}).exit_code == 2);
}

TEST_CASE(
    "a job below a skipped one is skipped, through a job that ran, unless its if calls always()") {
    // GitHub (and act): success() over every ancestor is false once one was skipped;
    // failure() and cancelled() are false too, so `!failure() && !cancelled()` runs.
    auto dir = tests::make_temp_dir("run");
    tests::write_file(dir / "w/skip.yml", R"(on: push
jobs:
  gate:
    if: github.event_name == 'pull_request'
    runs-on: ubuntu-latest
    steps:
      - run: echo gate-ran
  direct:
    needs: gate
    runs-on: ubuntu-latest
    steps:
      - run: echo direct-ran
  plan:
    needs: gate
    if: always()
    runs-on: ubuntu-latest
    steps:
      - run: echo plan-ran
  build:
    needs: plan
    runs-on: ubuntu-latest
    steps:
      - run: echo build-ran
  explicit:
    needs: plan
    if: success()
    runs-on: ubuntu-latest
    steps:
      - run: echo explicit-ran
  guarded:
    needs: plan
    if: ${{ !failure() && !cancelled() }}
    runs-on: ubuntu-latest
    steps:
      - run: echo guarded-ran
  tested:
    needs: plan
    if: always() && needs.plan.result == 'success'
    runs-on: ubuntu-latest
    steps:
      - run: echo tested-ran
)");
    auto ran = tests::run_workflows(dir, {"-W", "w", "--report", "r.json"});
    CHECK(ran.exit_code == 0);
    for (const char* job : {"gate", "direct", "build", "explicit"})
        CHECK(ran.output.find(std::string(job) + "-ran") == std::string::npos);
    for (const char* job : {"plan", "guarded", "tested"})
        CHECK(ran.output.find(std::string(job) + "-ran") != std::string::npos);
    auto report = tests::read_report(dir / "r.json");
    const std::vector<std::string> expected{"skipped", "skipped", "success", "skipped",
                                            "skipped", "success", "success"};
    for (std::size_t i = 0; i < expected.size(); ++i)
        CHECK(text(job_at(report, 0, i), "conclusion") == expected[i]);
    CHECK(text(job_at(report, 0, 3), "message").find("a job it needs") != std::string::npos);
}

TEST_CASE("matrix legs, strategy context, max-parallel and --matrix") {
    auto dir = tests::make_temp_dir("run");
    tests::write_file(dir / "w/m.yml", R"(on: push
jobs:
  m:
    strategy:
      max-parallel: 1
      matrix:
        os: [a, b]
        n: [1, 2]
        exclude:
          - os: b
            n: 2
        include:
          - os: a
            extra: x
    runs-on: ubuntu-latest
    steps:
      - run: echo "${{ matrix.os }}-${{ matrix.n }}-${{ matrix.extra }} ${{ strategy.job-index }}/${{ strategy.job-total }}"
)");
    auto ran = tests::run_workflows(dir, {"-W", "w", "--report", "r.json"});
    REQUIRE(ran.exit_code == 0);
    CHECK(ran.output.find("a-1-x 0/3") != std::string::npos);
    CHECK(ran.output.find("a-2-x 1/3") != std::string::npos);
    CHECK(ran.output.find("b-1- 2/3") != std::string::npos);
    auto report = tests::read_report(dir / "r.json");
    CHECK(at(report, {"workflows"}).as_array()[0].get("jobs")->as_array().size() == 3);
    CHECK(text(job_at(report, 0, 0), "name") == "m (a, 1, x)");
    auto filtered = tests::run_workflows(dir, {"-W", "w", "--matrix", "os:b"});
    CHECK(filtered.exit_code == 0);
    CHECK(filtered.output.find("a-1-x") == std::string::npos);
    CHECK(filtered.output.find("b-1-") != std::string::npos);
}

TEST_CASE("secrets are masked, a multi-line one line by line, in the log, report and summary") {
    auto dir = tests::make_temp_dir("run");
    tests::write_file(dir / ".secrets", "TOKEN=\"first-line-secret\\nsecond-line-secret\"\n");
    tests::write_file(dir / "w/s.yml", R"(on: push
jobs:
  s:
    runs-on: ubuntu-latest
    steps:
      - id: leak
        run: |
          echo "${{ secrets.TOKEN }}"
          echo "only second-line-secret here"
          echo "::add-mask::added-later-value"
          echo "then added-later-value"
          echo "sum: first-line-secret" >> "$GITHUB_STEP_SUMMARY"
          echo "::warning title=t::warn first-line-secret"
)");
    auto ran =
        tests::run_workflows(dir, {"-W", "w", "--secret-file", ".secrets", "--report", "r.json"});
    REQUIRE(ran.exit_code == 0);
    CHECK(ran.output.find("first-line-secret") == std::string::npos);
    CHECK(ran.output.find("second-line-secret") == std::string::npos);
    CHECK(ran.output.find("added-later-value") == std::string::npos);
    CHECK(ran.output.find("only *** here") != std::string::npos);
    const std::string report = tests::read_file(dir / "r.json");
    CHECK(report.find("line-secret") == std::string::npos);
    auto parsed = tests::read_report(dir / "r.json");
    const auto& step = step_at(job_at(parsed, 0, 0), 0);
    CHECK(text(step, "summary") == "sum: ***\n");
    CHECK(text(step.get("annotations")->as_array().at(0), "message") == "warn ***");
}

TEST_CASE("groups, vars, env files, timeout-minutes") {
    auto dir = tests::make_temp_dir("run");
    tests::write_file(dir / "env.txt", "FROM_FILE=file-value\n");
    tests::write_file(dir / "w/g.yml", R"(on: push
jobs:
  g:
    runs-on: ubuntu-latest
    steps:
      - run: |
          echo "::group::My Group"
          echo inside
          echo "::endgroup::"
      - run: test "${{ vars.COLOR }}" = blue && test "$FROM_FILE" = file-value && test "${{ env.FROM_FILE }}" = file-value
      - name: slow
        timeout-minutes: 0.02
        run: sleep 600
      - if: always()
        run: echo after-timeout
)");
    auto ran = tests::run_workflows(
        dir, {"-W", "w", "--var", "COLOR=blue", "--env-file", "env.txt", "--report", "r.json"});
    CHECK(ran.exit_code == 1);
    CHECK(ran.output.find("My Group") != std::string::npos);
    CHECK(ran.output.find("after-timeout") != std::string::npos);
    auto report = tests::read_report(dir / "r.json");
    const auto& job = job_at(report, 0, 0);
    CHECK(text(step_at(job, 1), "conclusion") == "success");
    CHECK(text(step_at(job, 2), "timed_out") == "true");
    CHECK(text(step_at(job, 2), "conclusion") == "failure");
}

TEST_CASE("composite actions: inputs, defaults, outputs, env isolation, nesting") {
    auto dir = tests::make_temp_dir("run");
    tests::write_file(dir / "inner/action.yml", R"(name: inner
inputs:
  word:
    required: true
outputs:
  shout:
    value: ${{ steps.up.outputs.value }}
runs:
  using: composite
  steps:
    - id: up
      shell: bash
      run: echo "value=${{ inputs.word }}!" >> "$GITHUB_OUTPUT"
    - shell: bash
      run: test "$OUTER_ENV" = outer && test -n "$GITHUB_ACTION_PATH"
)");
    tests::write_file(dir / "outer/action.yml", R"(name: outer
inputs:
  who:
    default: world
outputs:
  result:
    value: ${{ steps.nested.outputs.shout }}
runs:
  using: composite
  steps:
    - id: nested
      uses: ./inner
      with:
        word: hello-${{ inputs.who }}
    - shell: sh
      run: echo "FROM_COMPOSITE=yes" >> "$GITHUB_ENV"
)");
    tests::write_file(dir / "w/c.yml", R"(on: push
jobs:
  c:
    runs-on: ubuntu-latest
    steps:
      - id: outer
        uses: ./outer
        env:
          OUTER_ENV: outer
      - run: test "${{ steps.outer.outputs.result }}" = hello-world!
      - run: test -z "$OUTER_ENV" && test "$FROM_COMPOSITE" = yes
      - uses: ./outer
        with:
          who: there
        env:
          OUTER_ENV: outer
      - uses: ./missing
)");
    auto ran = tests::run_workflows(dir, {"-W", "w", "--report", "r.json"});
    CHECK(ran.exit_code == 1);
    auto report = tests::read_report(dir / "r.json");
    const auto& job = job_at(report, 0, 0);
    CHECK(text(step_at(job, 0), "conclusion") == "success");
    CHECK(text(at(step_at(job, 0), {"outputs"}), "result") == "hello-world!");
    CHECK(text(step_at(job, 1), "conclusion") == "success");
    CHECK(text(step_at(job, 2), "conclusion") == "success");
    CHECK(text(step_at(job, 3), "conclusion") == "success");
    CHECK(text(step_at(job, 4), "conclusion") == "failure");
    CHECK(text(step_at(job, 4), "message").find("Can't find 'action.yml'") != std::string::npos);
    CHECK(step_at(job, 0).get("steps")->as_array().size() == 2);
}

TEST_CASE("reusable workflows: inputs, secrets (map and inherit), outputs") {
    auto dir = tests::make_temp_dir("run");
    tests::write_file(dir / ".github/workflows/callee.yml", R"(on:
  workflow_call:
    inputs:
      n:
        type: number
        required: true
      flag:
        type: boolean
        default: true
    secrets:
      key:
        required: true
    outputs:
      doubled:
        value: ${{ jobs.work.outputs.doubled }}
jobs:
  work:
    runs-on: ubuntu-latest
    outputs:
      doubled: ${{ steps.d.outputs.v }}
    steps:
      - run: test "${{ inputs.flag }}" = true && test "${{ secrets.key }}" = s3cr3t-value
      - id: d
        run: v=$(( ${{ inputs.n }} * 2 )); echo "v=$v" >> "$GITHUB_OUTPUT"
)");
    tests::write_file(dir / "w/caller.yml", R"(on: push
jobs:
  call-map:
    uses: ./.github/workflows/callee.yml
    with:
      n: 21
    secrets:
      key: ${{ secrets.KEY }}
  call-inherit:
    uses: ./.github/workflows/callee.yml
    with:
      n: 2
    secrets: inherit
  check:
    needs: [call-map, call-inherit]
    runs-on: ubuntu-latest
    steps:
      - run: test "${{ needs.call-map.outputs.doubled }}" = 42 && test "${{ needs.call-inherit.outputs.doubled }}" = 4
)");
    tests::write_file(dir / "w2/bad-call.yml", R"(on: push
jobs:
  call:
    uses: ./.github/workflows/nope.yml
)");
    auto ran =
        tests::run_workflows(dir, {"-W", "w", "-s", "KEY=s3cr3t-value", "--report", "r.json"});
    REQUIRE(ran.exit_code == 0);
    CHECK(ran.output.find("s3cr3t-value") == std::string::npos);
    auto report = tests::read_report(dir / "r.json");
    CHECK(text(job_at(report, 0, 0), "workflow_call") == "./.github/workflows/callee.yml");
    CHECK(job_at(report, 0, 0).get("jobs")->as_array().size() == 1);
    auto bad = tests::run_workflows(dir, {"-W", "w2"});
    CHECK(bad.exit_code == 2);
    CHECK(bad.output.find("w2/bad-call.yml:4:11: the called workflow "
                          "'./.github/workflows/nope.yml' does not exist") != std::string::npos);
}

TEST_CASE("node actions run pre, main and post with state; remote actions fail clearly") {
    auto dir = tests::make_temp_dir("run");
    tests::write_file(dir / "js/action.yml", R"(name: js
inputs:
  who:
    default: node
runs:
  using: node20
  pre: pre.js
  main: main.js
  post: post.js
  post-if: success()
)");
    tests::write_file(dir / "js/pre.js",
                      "require('fs').appendFileSync(process.env.GITHUB_STATE, 'from_pre=1\\n');\n");
    tests::write_file(
        dir / "js/main.js",
        "const fs = require('fs');\n"
        "if (process.env.STATE_from_pre !== '1') process.exit(5);\n"
        "fs.appendFileSync(process.env.GITHUB_STATE, 'token=' + process.env.INPUT_WHO + '\\n');\n"
        "fs.appendFileSync(process.env.GITHUB_OUTPUT, 'greeting=hi-' + process.env.INPUT_WHO + "
        "'\\n');\n");
    tests::write_file(dir / "js/post.js", "console.log('post saw ' + process.env.STATE_token);\n");
    tests::write_file(dir / "w/n.yml", R"(on: push
jobs:
  n:
    runs-on: ubuntu-latest
    steps:
      - id: js
        uses: ./js
        with:
          who: tester
      - run: test "${{ steps.js.outputs.greeting }}" = hi-tester
      - uses: actions/checkout@v4
  remote:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/setup-node@v4
)");
    auto ran = tests::run_workflows(dir, {"-W", "w", "--report", "r.json", "--actions-source",
                                          "none", "--actions-dir", (dir / "no-store").string()});
    CHECK(ran.exit_code == 1);
    CHECK(ran.output.find("post saw tester") != std::string::npos);
    auto report = tests::read_report(dir / "r.json");
    const auto& job = job_at(report, 0, 0);
    CHECK(text(job, "conclusion") == "success");
    CHECK(text(step_at(job, 0), "conclusion") == "success");
    CHECK(text(step_at(step_at(job, 0), 0), "stage") == "pre");
    CHECK(text(step_at(job, 3), "stage") == "post");
    CHECK(text(step_at(job, 3), "conclusion") == "success");
    const auto& remote = job_at(report, 0, 1);
    CHECK(text(remote, "conclusion") == "failure");
    CHECK(text(step_at(remote, 0), "message").find("fill it with `sandgate actions pull") !=
          std::string::npos);
}

TEST_CASE("workflow_dispatch inputs are typed; --list and -j select") {
    auto dir = tests::make_temp_dir("run");
    tests::write_file(dir / "w/d.yml", R"(on:
  workflow_dispatch:
    inputs:
      flag:
        type: boolean
      name:
        default: anon
jobs:
  a:
    runs-on: ubuntu-latest
    steps:
      - run: test "${{ inputs.flag == true }}" = true && test "${{ inputs.name }}" = anon
  b:
    needs: a
    runs-on: ubuntu-latest
    steps:
      - run: echo b-ran
  c:
    runs-on: ubuntu-latest
    steps:
      - run: echo c-ran
)");
    CHECK(tests::run_workflows(dir, {"workflow_dispatch", "-W", "w", "--input", "flag=true"})
              .exit_code == 0);
    auto listed = tests::run_workflows(dir, {"workflow_dispatch", "-W", "w", "-l"});
    CHECK(listed.exit_code == 0);
    CHECK(listed.output.find("b ") != std::string::npos);
    auto selected = tests::run_workflows(
        dir, {"workflow_dispatch", "-W", "w", "-j", "b", "--input", "flag=true"});
    CHECK(selected.exit_code == 0);
    CHECK(selected.output.find("b-ran") != std::string::npos);
    CHECK(selected.output.find("c-ran") == std::string::npos);
    auto push = tests::run_workflows(dir, {"push", "-W", "w"});
    CHECK(push.exit_code == 0);
    CHECK(push.output.find("no workflow runs on 'push'") != std::string::npos);
}

TEST_CASE("sandgate run applies paths filters to the commits the event payload names") {
    auto dir = tests::make_temp_dir("run");
    const auto git = [&](const std::string& args) {
        const std::string command =
            "cd " + tests::shell_quote(dir.string()) +
            " && GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null git -c user.name=t "
            "-c user.email=t@example.com " +
            args + " 2>&1";
        FILE* pipe = ::popen(command.c_str(), "r");
        REQUIRE(pipe != nullptr);
        std::string out;
        char buffer[256];
        while (std::fgets(buffer, sizeof buffer, pipe)) out += buffer;
        REQUIRE(::pclose(pipe) == 0);
        while (!out.empty() && out.back() == '\n') out.pop_back();
        return out;
    };
    tests::write_file(dir / ".github/workflows/always.yml",
                      "on: pull_request\njobs:\n  always_job:\n    runs-on: ubuntu-latest\n    "
                      "steps:\n      - run: true\n");
    tests::write_file(dir / ".github/workflows/src.yml",
                      "on:\n  pull_request:\n    paths-ignore: ['docs/**']\njobs:\n  paths_job:\n"
                      "    runs-on: ubuntu-latest\n    steps:\n      - run: true\n");
    git("init -q -b main . && git add -A && git -c user.name=t -c user.email=t@example.com commit "
        "-q -m one");
    const std::string base = git("rev-parse HEAD");
    tests::write_file(dir / "docs/a.md", "a\n");
    git("add -A && git -c user.name=t -c user.email=t@example.com commit -q -m docs");
    const std::string docs = git("rev-parse HEAD");
    tests::write_file(dir / "src/a.c", "a\n");
    git("add -A && git -c user.name=t -c user.email=t@example.com commit -q -m src");
    const std::string src = git("rev-parse HEAD");
    const auto event = [&](const std::string& head) {
        tests::write_file(
            dir / "event.json",
            "{\"action\":\"opened\",\"pull_request\":{\"base\":{\"ref\":\"main\",\"sha\":\"" +
                base + "\"},\"head\":{\"sha\":\"" + head + "\"}}}");
        return tests::run_workflows(dir, {"pull_request", "-e", "event.json", "-l"});
    };
    auto only_docs = event(docs);
    CHECK(only_docs.exit_code == 0);
    CHECK(only_docs.output.find("always_job") != std::string::npos);
    CHECK(only_docs.output.find("paths_job") == std::string::npos);
    auto with_src = event(src);
    CHECK(with_src.exit_code == 0);
    CHECK(with_src.output.find("paths_job") != std::string::npos);
    auto unknown = event(std::string(40, 'f'));
    CHECK(unknown.output.find("paths_job") != std::string::npos);  // fails open
    CHECK(unknown.output.find("warning") != std::string::npos);
    CHECK(unknown.output.find(std::string(40, 'f')) != std::string::npos);
}

namespace {

// runner.arch for this machine, worked out apart from sandgate's own mapping.
std::string machine_arch() {
    struct utsname name {};
    REQUIRE(::uname(&name) == 0);
    const std::string machine = name.machine;
    if (machine == "x86_64") return "X64";
    if (machine == "aarch64") return "ARM64";
    return machine;
}

}  // namespace

TEST_CASE(
    "runs-on naming another architecture or OS is skipped with the reason; --label vouches for "
    "it") {
    const std::string arch = machine_arch();
    // The hosted image of the other architecture: x64's ubuntu-24.04 on arm64, else -arm.
    const std::string foreign = arch == "ARM64" ? "ubuntu-24.04" : "ubuntu-24.04-arm";
    auto dir = tests::make_temp_dir("run");
    tests::write_file(dir / "w/arch.yml",
                      "on: push\njobs:\n  native:\n    runs-on: [self-hosted, linux]\n    steps:\n"
                      "      - run: test \"${{ runner.arch }}\" = \"$RUNNER_ARCH\" && echo "
                      "\"arch=$RUNNER_ARCH os=${{ runner.os }}\"\n"
                      "  foreign:\n    runs-on: " +
                          foreign +
                          "\n    steps:\n      - run: echo foreign-ran\n"
                          "  mac:\n    runs-on: macos-14\n    steps:\n      - run: echo mac-ran\n");
    auto ran = tests::run_workflows(dir, {"-W", "w", "--report", "r.json"});
    CHECK(ran.exit_code == 0);
    CHECK(ran.output.find("arch=" + arch + " os=Linux") != std::string::npos);
    CHECK(ran.output.find("foreign-ran") == std::string::npos);
    CHECK(ran.output.find("mac-ran") == std::string::npos);
    auto report = tests::read_report(dir / "r.json");
    CHECK(text(job_at(report, 0, 0), "conclusion") == "success");
    const auto& skipped = job_at(report, 0, 1);
    CHECK(text(skipped, "conclusion") == "skipped");
    CHECK(text(skipped, "message")
              .find(foreign + " asks for a Linux " + (arch == "ARM64" ? "X64" : "ARM64") +
                    " machine; this one is Linux " + arch) != std::string::npos);
    CHECK(text(job_at(report, 0, 2), "message").find("macos-14 asks for a macOS machine") !=
          std::string::npos);
    auto vouched = tests::run_workflows(dir, {"-W", "w", "-j", "foreign", "--label", foreign});
    CHECK(vouched.exit_code == 0);
    CHECK(vouched.output.find("foreign-ran") != std::string::npos);
}

TEST_CASE(
    "a job with a container: is skipped naming the image; an empty container runs on the runner") {
    auto dir = tests::make_temp_dir("run");
    tests::write_file(dir / "w/c.yml", R"(on: push
jobs:
  boxed:
    runs-on: ubuntu-latest
    container:
      image: node:20-bookworm
    steps:
      - run: echo boxed-ran
  legs:
    strategy:
      matrix:
        image: ['', 'alpine:3']
    runs-on: ubuntu-latest
    container: ${{ matrix.image }}
    steps:
      - run: echo "leg-ran-[${{ matrix.image }}]"
)");
    auto ran = tests::run_workflows(dir, {"-W", "w", "--report", "r.json"});
    CHECK(ran.exit_code == 0);
    CHECK(ran.output.find("boxed-ran") == std::string::npos);
    CHECK(ran.output.find("leg-ran-[]") != std::string::npos);
    CHECK(ran.output.find("leg-ran-[alpine") == std::string::npos);
    auto report = tests::read_report(dir / "r.json");
    CHECK(text(job_at(report, 0, 0), "conclusion") == "skipped");
    CHECK(text(job_at(report, 0, 0), "message").find("container: node:20-bookworm") !=
          std::string::npos);
    CHECK(text(job_at(report, 0, 1), "conclusion") == "success");
    CHECK(text(job_at(report, 0, 2), "conclusion") == "skipped");
    CHECK(text(job_at(report, 0, 2), "message").find("container: alpine:3") != std::string::npos);
}

TEST_CASE(
    "runner.workspace and RUNNER_WORKSPACE are the workspace's parent, in the env and the "
    "contexts") {
    auto dir = tests::make_temp_dir("run");
    tests::write_file(dir / "w/ws.yml", R"WF(on: push
jobs:
  ws:
    runs-on: ubuntu-latest
    steps:
      - run: |
          test -n "$RUNNER_WORKSPACE"
          test "$RUNNER_WORKSPACE" = "${{ runner.workspace }}"
          test "$GITHUB_WORKSPACE" = "$RUNNER_WORKSPACE/$(basename "$GITHUB_WORKSPACE")"
          echo "runner-workspace=${{ runner.workspace }}"
)WF");
    // A copy of the repository's own (the default): runner.workspace is the leg's directory.
    auto ran = tests::run_workflows(dir, {"-W", "w"});
    CHECK(ran.exit_code == 0);
    CHECK(ran.output.find(
              "runner-workspace=" + std::filesystem::canonical(dir).parent_path().string() +
              "\n") == std::string::npos);
    CHECK(ran.output.find("/sandgate-work-") != std::string::npos);
    // --bind: the repository directory's parent.
    ran = tests::run_workflows(dir, {"-W", "w", "--bind"});
    CHECK(ran.exit_code == 0);
    CHECK(ran.output.find(
              "runner-workspace=" + std::filesystem::canonical(dir).parent_path().string() +
              "\n") != std::string::npos);
}

TEST_CASE(
    "without -e, branch and tag filters match the ref github.ref names: the branch, or the tag "
    "HEAD is at") {
    auto dir = tests::make_temp_dir("run");
    const auto on_push = [](const std::string& filter, const std::string& word) {
        return "on:\n  push:\n" + filter + "jobs:\n  " + word +
               ":\n    runs-on: ubuntu-latest\n    steps:\n"
               "      - run: echo \"" +
               word + "-ran ${{ github.ref }} ${{ github.event.ref }}\"\n";
    };
    tests::make_repo(
        dir, {{".github/workflows/ci.yml", on_push("    branches: [main]\n", "ci")},
              {".github/workflows/release.yml", on_push("    tags: ['v*']\n", "release")},
              {".github/workflows/dev.yml", on_push("    branches-ignore: [main]\n", "dev")}});
    auto branch = tests::run_workflows(dir, {"push"});
    CHECK(branch.exit_code == 0);
    CHECK(branch.output.find("ci-ran refs/heads/main refs/heads/main") != std::string::npos);
    CHECK(branch.output.find("release-ran") == std::string::npos);
    CHECK(branch.output.find("dev-ran") == std::string::npos);
    auto listed = tests::run_workflows(dir, {"push", "-l"});
    CHECK(
        listed.output.find("not run for 'push' (its on: filters): .github/workflows/release.yml") !=
        std::string::npos);

    // The run may leave the checkout owned by the sandbox's user: git is told it is ours.
    tests::sh("cd " + dir.string() +
              " && git -c safe.directory='*' tag v1.0 && git -c safe.directory='*' checkout -q "
              "--detach v1.0");
    auto tag = tests::run_workflows(dir, {"push"});
    CHECK(tag.exit_code == 0);
    CHECK(tag.output.find("release-ran refs/tags/v1.0 refs/tags/v1.0") != std::string::npos);
    CHECK(tag.output.find("ci-ran") == std::string::npos);
    CHECK(tag.output.find("dev-ran") == std::string::npos);

    // A payload is taken as given: its ref decides.
    tests::write_file(dir / "event.json", R"({"ref": "refs/heads/feature"})");
    auto given = tests::run_workflows(dir, {"push", "-e", "event.json"});
    CHECK(given.output.find("dev-ran refs/heads/feature") != std::string::npos);
    CHECK(given.output.find("ci-ran") == std::string::npos);
    CHECK(given.output.find("release-ran") == std::string::npos);
}

TEST_CASE("the event may stand anywhere among the flags; repeatable flags take one value each") {
    auto dir = tests::make_temp_dir("run");
    tests::write_file(dir / "w/d.yml", R"(on: workflow_dispatch
jobs:
  m:
    strategy:
      matrix:
        os: [a, b]
    runs-on: ubuntu-latest
    steps:
      - run: echo "leg-${{ matrix.os }}-${{ github.event_name }}"
)");
    auto after_matrix =
        tests::run_workflows(dir, {"-W", "w", "-j", "m", "--matrix", "os:a", "workflow_dispatch"});
    CHECK(after_matrix.exit_code == 0);
    CHECK(after_matrix.output.find("leg-a-workflow_dispatch") != std::string::npos);
    CHECK(after_matrix.output.find("leg-b-") == std::string::npos);
    auto after_job = tests::run_workflows(dir, {"-j", "m", "workflow_dispatch", "-W", "w"});
    CHECK(after_job.exit_code == 0);
    CHECK(after_job.output.find("leg-b-workflow_dispatch") != std::string::npos);
    auto two_events = tests::run_workflows(dir, {"-W", "w", "push", "workflow_dispatch"});
    CHECK(two_events.exit_code == 2);
}

TEST_CASE("-l shows each job's runs-on, its legs and whether it runs for the event") {
    auto dir = tests::make_temp_dir("run");
    tests::write_file(dir / "w/l.yml", R"(name: listed
on: push
jobs:
  build:
    strategy:
      matrix:
        arch: [x64, arm64]
    runs-on: ${{ matrix.arch == 'x64' && 'ubuntu-latest' || 'ubuntu-24.04-arm' }}
    steps:
      - run: echo never
  docs:
    if: github.event_name == 'pull_request'
    runs-on: ubuntu-22.04
    steps:
      - run: echo never
  publish:
    needs: docs
    runs-on: ubuntu-latest
    steps:
      - run: echo never
  boxed:
    runs-on: [self-hosted, linux]
    container: debian:12
    steps:
      - run: echo never
  wide:
    strategy:
      matrix:
        a: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]
        b: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]
        exclude:
          - a: 1
          - a: 2
    runs-on: [self-hosted]
    steps:
      - run: echo never
)");
    const std::string foreign_arm = machine_arch() == "ARM64" ? "x64" : "arm64";
    auto listed = tests::run_workflows(dir, {"-W", "w", "-l"});
    REQUIRE(listed.exit_code == 0);
    CHECK(listed.output.find("never") == std::string::npos);
    const auto line_of = [&](const std::string& word) {
        const auto at = listed.output.find(word);
        REQUIRE(at != std::string::npos);
        const auto start = listed.output.rfind('\n', at) + 1;
        return listed.output.substr(start, listed.output.find('\n', at) - start);
    };
    CHECK(line_of("Runs for push").find("Runs on") != std::string::npos);
    const std::string build = line_of("  build  ");
    CHECK(build.find("(per leg)") != std::string::npos);
    CHECK(build.find(" 2 ") != std::string::npos);
    CHECK(line_of("build (x64)").find("ubuntu-latest") != std::string::npos);
    CHECK(line_of("build (arm64)").find("ubuntu-24.04-arm") != std::string::npos);
    CHECK(line_of("build (" + foreign_arm + ")").find("no: runs-on") != std::string::npos);
    CHECK(line_of("docs").find("no: if: github.event_name == 'pull_request'") != std::string::npos);
    CHECK(line_of("docs").find("ubuntu-22.04") ==
          std::string::npos);  // not evaluated: it does not run
    CHECK(line_of("publish").find("no: a job it needs does not run") != std::string::npos);
    CHECK(line_of("boxed").find("no: container: debian:12") != std::string::npos);
    // 17 x 16 legs before exclude, 240 after: GitHub's limit of 256 counts these.
    CHECK(line_of("  wide  ").find(" 240 ") != std::string::npos);
    CHECK(line_of("  wide  ").find("yes") != std::string::npos);
}

TEST_CASE("the summary names each failed job's workflow, failing step and reason") {
    auto dir = tests::make_temp_dir("run");
    const auto failing = [](const std::string& step, int code) {
        return "on: push\njobs:\n  build:\n    runs-on: ubuntu-latest\n    steps:\n      - run: "
               "true\n"
               "      - name: " +
               step + "\n        run: |\n          echo '::error::" + step +
               " broke'\n"
               "          exit " +
               std::to_string(code) + "\n";
    };
    tests::write_file(dir / "w/a.yml", failing("compile", 3));
    tests::write_file(dir / "w/b.yml", failing("link", 4));
    auto ran = tests::run_workflows(dir, {"-W", "w"});
    CHECK(ran.exit_code == 1);
    CHECK(ran.output.find("sandgate run: failure   w/a.yml: build: step 'compile': Process "
                          "completed with exit code 3 "
                          "(error: compile broke)\n") != std::string::npos);
    CHECK(ran.output.find("sandgate run: failure   w/b.yml: build: step 'link': Process completed "
                          "with exit code 4 "
                          "(error: link broke)\n") != std::string::npos);
    CHECK(ran.output.find("job 'build' failed (w/a.yml): step 'compile'") != std::string::npos);
}
