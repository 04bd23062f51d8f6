#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "jobs/workflow/action_model.hpp"
#include "jobs/workflow/workflow_model.hpp"

namespace {

jobs::Workflow parse_ok(const std::string& text) {
    auto workflow = jobs::parse_workflow(text, "w.yml");
    if (!workflow) FAIL(workflow.error().message);
    return *workflow;
}

std::string parse_error(const std::string& text) {
    auto workflow = jobs::parse_workflow(text, "w.yml");
    REQUIRE_FALSE(workflow.has_value());
    CHECK(workflow.error().kind == common::ErrorKind::invalid_input);
    return workflow.error().message;
}

const std::string k_jobs =
    "jobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo\n";

}  // namespace

TEST_CASE("'on' in all its shapes") {
    auto scalar = parse_ok("on: push\n" + k_jobs);
    REQUIRE(scalar.on.events.size() == 1);
    CHECK(scalar.on.events[0].event == "push");

    auto list = parse_ok("on: [push, pull_request]\n" + k_jobs);
    CHECK(list.on.find("pull_request") != nullptr);
    CHECK(list.on.find("issues") == nullptr);

    auto map = parse_ok(R"(on:
  push:
    branches: [main, 'releases/**']
  pull_request:
    types: [opened]
  workflow_dispatch:
    inputs:
      level:
        type: choice
        options: [a, b]
        default: a
      flag:
        type: boolean
        required: true
  workflow_call:
    inputs:
      n:
        type: number
        default: ${{ 1 }}
    secrets:
      token:
        required: true
    outputs:
      out:
        value: ${{ jobs.a.outputs.x }}
  schedule:
    - cron: '0 0 * * *'
)" + k_jobs);
    REQUIRE(map.on.events.size() == 5);
    CHECK(map.on.find("push")->filters.find("branches")->items.size() == 2);
    REQUIRE(map.on.dispatch_inputs.size() == 2);
    CHECK(map.on.dispatch_inputs[0].options == std::vector<std::string>{"a", "b"});
    CHECK(map.on.dispatch_inputs[1].required);
    REQUIRE(map.on.call_inputs.size() == 1);
    CHECK(map.on.call_inputs[0].default_value->text == "${{ 1 }}");
    REQUIRE(map.on.call_secrets.size() == 1);
    CHECK(map.on.call_secrets[0].required);
    REQUIRE(map.on.call_outputs.size() == 1);
    CHECK(map.on.call_outputs[0].value.value == "${{ jobs.a.outputs.x }}");

    auto bare = parse_ok("on:\n  workflow_dispatch:\n" + k_jobs);
    CHECK(bare.on.find("workflow_dispatch") != nullptr);
}

TEST_CASE("jobs, steps, needs, strategy and defaults are modelled") {
    auto w = parse_ok(R"(name: CI
on: push
env:
  A: 1
defaults:
  run:
    shell: bash
jobs:
  build:
    runs-on: [self-hosted, linux]
    timeout-minutes: 5
    continue-on-error: ${{ matrix.experimental }}
    strategy:
      fail-fast: false
      max-parallel: 2
      matrix:
        os: [a, b]
        include:
          - os: c
    outputs:
      x: ${{ steps.s.outputs.x }}
    steps:
      - id: s
        name: Set
        run: echo x=1 >> $GITHUB_OUTPUT
        working-directory: sub
        env:
          B: two
      - uses: ./local
        with:
          flag: true
  test:
    needs: build
    if: always()
    runs-on: ubuntu-latest
    steps:
      - run: |
          echo one
          echo two
  call:
    needs: [build, test]
    uses: ./.github/workflows/r.yml
    with:
      n: 1
    secrets: inherit
)");
    CHECK(w.display_name() == "CI");
    REQUIRE(w.jobs.size() == 3);
    const auto& build = w.jobs[0];
    CHECK(build.runs_on.items.size() == 2);
    CHECK(build.timeout_minutes->as_number() == 5);
    CHECK(build.strategy->matrix.find("os")->items.size() == 2);
    CHECK(build.strategy->fail_fast->as_bool() == false);
    CHECK(build.outputs.at(0).first == "x");
    CHECK(build.steps[0].id == "s");
    CHECK(build.steps[0].working_directory->value == "sub");
    CHECK(build.steps[1].uses->value == "./local");
    CHECK(build.steps[1].with.at(0).second.value == "true");
    CHECK(w.jobs[1].needs == std::vector<std::string>{"build"});
    CHECK(w.jobs[1].steps[0].display_name() == "Run echo one");
    CHECK(w.jobs[2].calls_workflow());
    CHECK(w.jobs[2].secrets_mode == jobs::SecretsMode::inherit);
    CHECK(jobs::topological_order(w) == std::vector<std::string>{"build", "test", "call"});
    CHECK(w.defaults.shell->value == "bash");
}

TEST_CASE("invalid workflows are rejected with file:line:col, in GitHub's words") {
    CHECK(parse_error("on: push\njobs:\n  a:\n    runs-on: x\n    steps:\n      - run: echo\n      "
                      "  uses: ./x\n") == "w.yml:7:9: Unexpected value 'uses'");
    // With GitHub's background steps on, its reader names their keys too.
    CHECK(
        parse_error("on: push\njobs:\n  a:\n    runs-on: x\n    steps:\n      - name: nothing\n") ==
        "w.yml:6:9: There's not enough info to determine what you meant. Add one of these "
        "properties: cancel, "
        "run, shell, uses, wait, wait-all, with, working-directory");
    CHECK(
        parse_error(
            "on: push\njobs:\n  a:\n    runs-on: x\n    needs: zz\n    steps:\n      - run: echo\n"
            "  b:\n    runs-on: x\n") == "w.yml:5:12: Job 'a' depends on unknown job 'zz'.");
    CHECK(parse_error(
              "on: push\njobs:\n  a:\n    runs-on: x\n    needs: b\n    steps:\n      - run: echo\n"
              "  b:\n    runs-on: x\n    needs: [a]\n    steps:\n      - run: echo\n  c:\n    "
              "runs-on: x\n") ==
          "w.yml:5:12: Job 'a' depends on job 'b' which creates a cycle in the dependency graph.");
    CHECK(
        parse_error("on: push\njobs:\n  1bad:\n    runs-on: x\n    steps:\n      - run: echo\n") ==
        "w.yml:3:3: The identifier '1bad' is invalid. IDs may only contain alphanumeric "
        "characters, '_', and "
        "'-'. IDs must start with a letter or '_' and must be less than 100 characters.");
    CHECK(parse_error("on: push\njobs:\n  a:\n    runs-on: x\n    stepz: []\n    steps:\n      - "
                      "run: echo\n") == "w.yml:5:5: Unexpected value 'stepz'");
    CHECK(parse_error("on: push\njobs:\n  a:\n    runs-on: x\n    steps:\n      - run: echo\n      "
                      "  with: {a: b}\n") == "w.yml:7:9: Unexpected value 'with'");
    CHECK(parse_error("on: push\nname: x\nfoo: 1\n" + k_jobs) ==
          "w.yml:3:1: Unexpected value 'foo'");
    CHECK(parse_error("on: pushh\n" + k_jobs) == "w.yml:1:5: Unexpected value 'pushh'");
    CHECK(parse_error(k_jobs) == "w.yml:1:1: Required property is missing: on");
    CHECK(parse_error("on: push\njobs:\n  a:\n    steps:\n      - run: echo\n") ==
          "w.yml:4:5: Required property is missing: runs-on");
    CHECK(parse_error("on: push\njobs:\n  a:\n    runs-on: x\n    strategy:\n      matrix:\n       "
                      " os: linux\n"
                      "    steps:\n      - run: echo\n") == "w.yml:7:13: Unexpected value 'linux'");
    CHECK(parse_error("on: push\njobs:\n  a:\n    runs-on: x\n    strategy:\n      matrix: {}\n"
                      "    steps:\n      - run: echo\n") ==
          "w.yml:6:15: Matrix must define at least one vector");
    CHECK(
        parse_error(
            "on: push\njobs:\n  a:\n    runs-on: x\n    strategy:\n      matrix:\n        os: []\n"
            "    steps:\n      - run: echo\n") ==
        "w.yml:7:13: Matrix vector 'os' does not contain any values");
    CHECK(parse_error("on: push\njobs:\n  a:\n    runs-on: x\n    steps:\n      - uses: "
                      "actions/checkout\n") ==
          "w.yml:6:15: Expected format {org}/{repo}[/path]@ref. Actual 'actions/checkout'");
    CHECK(parse_error(
              "on: push\njobs:\n  a:\n    runs-on: x\n    steps:\n      - id: s\n        run: a\n"
              "      - id: s\n        run: b\n") ==
          "w.yml:8:13: The identifier 's' may not be used more than once within the same scope.");
    CHECK(parse_error("on: push\njobs:\n  a:\n    runs-on: x\n    timeout-minutes: soon\n    "
                      "steps:\n      - run: a\n") == "w.yml:5:22: Unexpected value 'soon'");
    CHECK(parse_error("on: push\njobs:\n  a:\n    runs-on: x\n    steps:\n      - run: a\n  a:\n   "
                      " runs-on: y\n") == "w.yml:7:3: 'a' is already defined");
    CHECK(
        parse_error("on: push\njobs:\n  a:\n    runs-on: x\n    steps: [\n").starts_with("w.yml:"));
    // GitHub's parser takes include and ignore filters together (its all-events example).
    CHECK(jobs::parse_workflow(
        "on:\n  push:\n    branches: [a]\n    branches-ignore: [b]\n" + k_jobs, "w.yml"));
    CHECK(jobs::parse_workflow(
        "on:\n  merge_group:\n    types: [checks_requested]\n    branches: [main]\n" + k_jobs,
        "w.yml"));
    CHECK(jobs::parse_workflow(
        "on:\n  merge_group:\n    branches: [a]\n    branches-ignore: [b]\n" + k_jobs, "w.yml"));
    CHECK(parse_error("on:\n  merge_group:\n    paths: [a]\n" + k_jobs) ==
          "w.yml:3:5: Unexpected value 'paths'");
    CHECK(parse_error("on:\n  workflow_dispatch:\n    inputs:\n      x:\n        type: text\n" +
                      k_jobs) == "w.yml:5:15: Unexpected value 'text'");
    // act's dialect (`sandgate run`) takes a workflow_call input without a type; GitHub does not.
    const std::string untyped =
        "on:\n  workflow_call:\n    inputs:\n      x:\n        required: true\n" + k_jobs;
    CHECK(parse_error(untyped) == "w.yml:5:9: Required property is missing: type");
    CHECK(jobs::parse_workflow(untyped, "w.yml", jobs::Dialect::act));
}

TEST_CASE("every workflow of the act corpus parses") {
    const std::filesystem::path root =
        std::filesystem::path(SANDGATE_SHARED_DIR) / "corpora/act/testdata";
    int count = 0;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
        const auto ext = entry.path().extension();
        if (ext != ".yml" && ext != ".yaml") continue;
        if (entry.path().filename() == "action.yml") {
            auto action = jobs::load_action(entry.path().parent_path(), entry.path().parent_path());
            INFO(entry.path());
            CHECK(action.has_value());
            continue;
        }
        auto workflow = jobs::load_workflow(entry.path(), jobs::Dialect::act);
        INFO(entry.path() << (workflow ? "" : workflow.error().message));
        CHECK(workflow.has_value());
        ++count;
    }
    CHECK(count >= 30);
}

TEST_CASE("action manifests: composite, node and errors") {
    auto composite = jobs::parse_action(R"(name: c
inputs:
  who:
    required: true
    default: world
outputs:
  greeting:
    value: ${{ steps.s.outputs.g }}
runs:
  using: composite
  steps:
    - id: s
      run: echo g=hi >> $GITHUB_OUTPUT
      shell: bash
)",
                                        "action.yml", ".");
    REQUIRE(composite.has_value());
    CHECK(composite->kind == jobs::ActionKind::composite);
    CHECK(composite->inputs[0].default_value->text == "world");
    CHECK(composite->outputs[0].value.value == "${{ steps.s.outputs.g }}");
    auto node = jobs::parse_action(
        "runs:\n  using: node20\n  main: m.js\n  post: p.js\n  post-if: failure()\n", "action.yml",
        ".");
    REQUIRE(node.has_value());
    CHECK(node->kind == jobs::ActionKind::node);
    CHECK(node->post == "p.js");
    CHECK(node->post_if->value == "failure()");
    auto no_shell = jobs::parse_action("runs:\n  using: composite\n  steps:\n    - run: echo\n",
                                       "action.yml", ".");
    REQUIRE_FALSE(no_shell.has_value());
    CHECK(no_shell.error().message == "action.yml:4:7: Required property is missing: shell");
    auto bad_using =
        jobs::parse_action("runs:\n  using: python\n  main: m.py\n", "action.yml", ".");
    REQUIRE_FALSE(bad_using.has_value());
    CHECK(bad_using.error().message ==
          "action.yml:2:10: unknown runs.using 'python' (composite, node12/16/20/24 or docker)");
    // Which kind of runs it is must follow from its keys (GitHub's reader).
    auto unclear = jobs::parse_action("runs:\n  using: python\n", "action.yml", ".");
    REQUIRE_FALSE(unclear.has_value());
    CHECK(unclear.error().message.starts_with(
        "action.yml:2:3: There's not enough info to determine what you meant."));
}
