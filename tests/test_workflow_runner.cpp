#include <catch2/catch.hpp>

#include <string>

#include "jobs/value.hpp"
#include "tests/run_helpers.hpp"
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

const jobs::Value& step_at(const jobs::Value& job, std::size_t step) { return job.get("steps")->as_array().at(step); }

std::string text(const jobs::Value& value, std::string_view key) { return value.get(key)->to_display_string(); }

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

    tests::write_file(dir / "bad/bad.yml", "on: push\njobs:\n  a:\n    runs-on: x\n    steps:\n      - run: a\n        uses: ./b\n");
    auto bad = tests::run_workflows(dir, {"-W", "bad"});
    CHECK(bad.exit_code == 2);
    CHECK(bad.output.find("bad/bad.yml:7:9: Unexpected value 'uses'") != std::string::npos);
    CHECK(tests::run_workflows(dir, {"--matrix", "nocolon"}).exit_code == 2);
    CHECK(tests::run_workflows(dir, {"-W", "missing"}).exit_code == 2);
    CHECK(tests::run_workflows(dir, {"-j", "nosuchjob"}).exit_code == 2);
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
    auto ran = tests::run_workflows(dir, {"-W", "w", "--secret-file", ".secrets", "--report", "r.json"});
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
    auto ran = tests::run_workflows(dir, {"-W", "w", "--var", "COLOR=blue", "--env-file", "env.txt", "--report", "r.json"});
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
    auto ran = tests::run_workflows(dir, {"-W", "w", "-s", "KEY=s3cr3t-value", "--report", "r.json"});
    REQUIRE(ran.exit_code == 0);
    CHECK(ran.output.find("s3cr3t-value") == std::string::npos);
    auto report = tests::read_report(dir / "r.json");
    CHECK(text(job_at(report, 0, 0), "workflow_call") == "./.github/workflows/callee.yml");
    CHECK(job_at(report, 0, 0).get("jobs")->as_array().size() == 1);
    auto bad = tests::run_workflows(dir, {"-W", "w2"});
    CHECK(bad.exit_code == 2);
    CHECK(bad.output.find("w2/bad-call.yml:4:11: the called workflow './.github/workflows/nope.yml' does not exist") !=
          std::string::npos);
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
    tests::write_file(dir / "js/pre.js", "require('fs').appendFileSync(process.env.GITHUB_STATE, 'from_pre=1\\n');\n");
    tests::write_file(dir / "js/main.js",
                      "const fs = require('fs');\n"
                      "if (process.env.STATE_from_pre !== '1') process.exit(5);\n"
                      "fs.appendFileSync(process.env.GITHUB_STATE, 'token=' + process.env.INPUT_WHO + '\\n');\n"
                      "fs.appendFileSync(process.env.GITHUB_OUTPUT, 'greeting=hi-' + process.env.INPUT_WHO + '\\n');\n");
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
    auto ran = tests::run_workflows(dir, {"-W", "w", "--report", "r.json", "--actions-source", "none",
                                          "--actions-dir", (dir / "no-store").string()});
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
    CHECK(text(step_at(remote, 0), "message").find("fill it with `sandgate actions pull") != std::string::npos);
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
    CHECK(tests::run_workflows(dir, {"workflow_dispatch", "-W", "w", "--input", "flag=true"}).exit_code == 0);
    auto listed = tests::run_workflows(dir, {"workflow_dispatch", "-W", "w", "-l"});
    CHECK(listed.exit_code == 0);
    CHECK(listed.output.find("b ") != std::string::npos);
    auto selected = tests::run_workflows(dir, {"workflow_dispatch", "-W", "w", "-j", "b", "--input", "flag=true"});
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
        const std::string command = "cd " + tests::shell_quote(dir.string()) +
                                    " && GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null git -c user.name=t "
                                    "-c user.email=t@example.com " + args + " 2>&1";
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
                      "on: pull_request\njobs:\n  always_job:\n    runs-on: ubuntu-latest\n    steps:\n      - run: true\n");
    tests::write_file(dir / ".github/workflows/src.yml",
                      "on:\n  pull_request:\n    paths-ignore: ['docs/**']\njobs:\n  paths_job:\n"
                      "    runs-on: ubuntu-latest\n    steps:\n      - run: true\n");
    git("init -q -b main . && git add -A && git -c user.name=t -c user.email=t@example.com commit -q -m one");
    const std::string base = git("rev-parse HEAD");
    tests::write_file(dir / "docs/a.md", "a\n");
    git("add -A && git -c user.name=t -c user.email=t@example.com commit -q -m docs");
    const std::string docs = git("rev-parse HEAD");
    tests::write_file(dir / "src/a.c", "a\n");
    git("add -A && git -c user.name=t -c user.email=t@example.com commit -q -m src");
    const std::string src = git("rev-parse HEAD");
    const auto event = [&](const std::string& head) {
        tests::write_file(dir / "event.json", "{\"action\":\"opened\",\"pull_request\":{\"base\":{\"ref\":\"main\",\"sha\":\"" +
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
