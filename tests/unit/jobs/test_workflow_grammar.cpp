// GitHub's grammar, rule by rule: each rule of GitHub's reader, schema or converters that
// sandgate applies, with a workflow GitHub accepts and one it refuses (the refusal's message
// is GitHub's where GitHub has one, always "file:line:col: ..." on one line).
#include <catch2/catch.hpp>
#include <string>
#include <utility>
#include <vector>

#include "jobs/expr/expr.hpp"
#include "jobs/workflow/action_model.hpp"
#include "jobs/workflow/matrix.hpp"
#include "jobs/workflow/workflow_model.hpp"
#include "jobs/workflow/yaml_value.hpp"

namespace {

std::string refusal(const std::string& text) {
    auto workflow = jobs::parse_workflow(text, "w.yml");
    if (workflow) FAIL("accepted:\n" << text);
    CHECK(workflow.error().kind == common::ErrorKind::invalid_input);
    CHECK(workflow.error().message.find('\n') == std::string::npos);
    return workflow.error().message;
}

jobs::Workflow accepted(const std::string& text) {
    auto workflow = jobs::parse_workflow(text, "w.yml");
    if (!workflow) FAIL(workflow.error().message << "\n" << text);
    return *workflow;
}

// A workflow with one job `a` whose body is `body` (indented four spaces).
std::string job(const std::string& body) {
    return "on: push\njobs:\n  a:\n    runs-on: x\n" + body;
}
std::string steps(const std::string& items) {
    return job("    steps:\n" + items);
}

const std::string k_step = "    steps:\n      - run: echo\n";

}  // namespace

TEST_CASE("grammar: every key is the schema's, and the schema's new keys are known") {
    CHECK(refusal(job("    stepz: []\n" + k_step)) == "w.yml:5:5: Unexpected value 'stepz'");
    CHECK(refusal("on: push\nfoo: 1\n" + job(k_step).substr(9)) ==
          "w.yml:2:1: Unexpected value 'foo'");
    accepted("description: what it does\n" + job(k_step));
    accepted(job("    cancel-timeout-minutes: 5\n    snapshot: my-image\n" + k_step));
    accepted(job("    snapshot:\n      image-name: img\n      version: '2.*'\n" + k_step));
    accepted("on:\n  image_version:\n    names: [a]\n    versions: ['1.*']\n" +
             job(k_step).substr(9));
    accepted("on: image_version\n" + job(k_step).substr(9));
}

TEST_CASE("grammar: required keys") {
    CHECK(refusal("on: push\njobs:\n  a:\n    steps:\n      - run: echo\n") ==
          "w.yml:4:5: Required property is missing: runs-on");
    CHECK(refusal("on: push\n") == "w.yml:1:1: Required property is missing: jobs");
    CHECK(refusal("jobs:\n  a:\n    runs-on: x\n" + k_step) ==
          "w.yml:1:1: Required property is missing: on");
    // A job without steps is GitHub's now (snapshot jobs).
    CHECK(accepted(job("")).jobs[0].steps.empty());
    CHECK(refusal("on:\n  workflow_call:\n    inputs:\n      x:\n        required: true\n" +
                  job(k_step).substr(9)) == "w.yml:5:9: Required property is missing: type");
}

TEST_CASE("grammar: closed value lists") {
    accepted("permissions:\n  contents: read\n  id-token: write\n" + job(k_step));
    CHECK(refusal("permissions:\n  contents: maybe\n" + job(k_step)) ==
          "w.yml:2:13: Unexpected value 'maybe'");
    CHECK(refusal("permissions:\n  id-token: read\n" + job(k_step)) ==
          "w.yml:2:13: Unexpected value 'read'");
    CHECK(refusal("permissions: read\n" + job(k_step)) == "w.yml:1:14: Unexpected value 'read'");
    CHECK(refusal("on:\n  pull_request:\n    types: [opened, exploded]\n" +
                  job(k_step).substr(9)) == "w.yml:3:21: Unexpected value 'exploded'");
    accepted(job("    concurrency:\n      group: g\n      queue: max\n" + k_step));
    CHECK(refusal(job("    concurrency:\n      group: g\n      queue: all\n" + k_step)) ==
          "w.yml:7:14: Unexpected value 'all'");
}

TEST_CASE("grammar: scalar types") {
    accepted(job("    timeout-minutes: 5.5\n    continue-on-error: true\n" + k_step));
    CHECK(refusal(job("    timeout-minutes: soon\n" + k_step)) ==
          "w.yml:5:22: Unexpected value 'soon'");
    CHECK(refusal(job("    timeout-minutes: '5'\n" + k_step)) ==
          "w.yml:5:22: Unexpected value '5'");
    CHECK(refusal(job("    continue-on-error: yes\n" + k_step)) ==
          "w.yml:5:24: Unexpected value 'yes'");
    CHECK(refusal(job("    strategy:\n      fail-fast: 1\n      matrix: {a: [1]}\n" + k_step)) ==
          "w.yml:6:18: Unexpected value '1'");
    // A number or a boolean stands for a string where one is wanted.
    accepted(job("    env:\n      N: 1.5\n      B: true\n" + k_step));
}

TEST_CASE("grammar: where expressions may appear and what they may name") {
    accepted(job("    env:\n      X: ${{ github.sha }}\n" + k_step));
    // GitHub parses the expression against the (empty) context first, then refuses it there.
    CHECK(refusal(steps("      - uses: ${{ github.sha }}\n"))
              .starts_with("w.yml:6:15: Unrecognized named-value: 'github'"));
    CHECK(refusal(steps("      - uses: ${{ 1 }}\n")) ==
          "w.yml:6:15: A template expression is not allowed in this context");
    CHECK(refusal("name: ${{ true }}\n" + job(k_step)) ==
          "w.yml:1:7: A template expression is not allowed in this context");
    CHECK(refusal(job("    env:\n      X: ${{ steps.a.outputs.b }}\n" + k_step))
              .starts_with("w.yml:6:10: Unrecognized named-value: 'steps'"));
    accepted(steps("      - run: echo\n        env:\n          X: ${{ steps.a.outputs.b }}\n"));
    accepted(steps("      - run: echo\n        if: hashFiles('a') != ''\n"));
    CHECK(refusal(job("    if: hashFiles('a') != ''\n" + k_step))
              .starts_with("w.yml:5:9: Unrecognized function: 'hashFiles'"));
}

TEST_CASE("grammar: unclosed, empty, too deep and over-long ${{ }}") {
    CHECK(refusal(job("    env:\n      X: ${{ github.sha\n" + k_step)) ==
          "w.yml:6:10: The expression is not closed. An unescaped ${{ sequence was found, but the "
          "closing }} "
          "sequence was not found.");
    CHECK(refusal(job("    env:\n      X: a ${{ }} b\n" + k_step)) ==
          "w.yml:6:10: An expression was expected");
    std::string deep;
    for (int i = 0; i < 60; ++i) deep += "(";
    deep += "1";
    for (int i = 0; i < 60; ++i) deep += ")";
    CHECK(refusal(job("    env:\n      X: ${{ " + deep + " }}\n" + k_step))
              .find("Exceeded max expression depth 50") != std::string::npos);
    accepted(job("    env:\n      X: ${{ ((((1)))) }}\n" + k_step));
    const std::string long_literal(21100, 'x');
    CHECK(refusal(job("    env:\n      X: ${{ '" + long_literal + "' }}\n" + k_step))
              .find("Exceeded max expression length 21000") != std::string::npos);
}

TEST_CASE("grammar: a `run` folded with its expressions stays within 21000 characters") {
    const std::string body(20000, 'x');
    accepted(steps("      - run: |\n          " + body + "\n          " + body +
                   "\n"));  // no expression: no limit
    accepted(steps("      - run: echo ${{ github.sha }} " + std::string(20000, 'y') + "\n"));
    CHECK(refusal(steps("      - run: echo ${{ github.sha }} " + body + body + "\n")) ==
          "w.yml:6:14: Exceeded max expression length 21000");
}

TEST_CASE("grammar: `if` conditions parse when the workflow is read") {
    accepted(steps("      - run: echo\n        if: github.event_name == 'push' && success()\n"));
    accepted(job("    needs: []\n    if: failure('b') || always()\n" + k_step));
    CHECK(refusal(steps("      - run: echo\n        if: github.event_name ==\n"))
              .starts_with("w.yml:7:13: Unexpected end of expression"));
    CHECK(refusal(job("    if: ${{ github.ref == }}\n" + k_step))
              .starts_with("w.yml:5:9: Unexpected end of expression"));
    CHECK(refusal(steps("      - run: echo\n        if: failure('b')\n"))
              .starts_with("w.yml:7:13: Too many parameters supplied"));
    CHECK(refusal(job("    if: nosuch.thing\n" + k_step))
              .starts_with("w.yml:5:9: Unrecognized named-value: 'nosuch'"));
}

TEST_CASE("grammar: job ids (GitHub's IdBuilder)") {
    auto w = accepted(
        "on: push\njobs:\n  _:\n    runs-on: x\n  _a:\n    runs-on: x\n  a__:\n    runs-on: x\n  "
        "b-:\n    runs-on: x\n");
    CHECK(w.jobs.size() == 4);
    CHECK(refusal("on: push\njobs:\n  __a:\n    runs-on: x\n") ==
          "w.yml:3:3: The identifier '__a' is invalid. IDs starting with '__' are reserved.");
    CHECK(refusal("on: push\njobs:\n  1a:\n    runs-on: x\n") ==
          "w.yml:3:3: The identifier '1a' is invalid. IDs may only contain alphanumeric "
          "characters, '_', and '-'. "
          "IDs must start with a letter or '_' and must be less than 100 characters.");
    CHECK(refusal("on: push\njobs:\n  " + std::string(100, 'a') + ":\n    runs-on: x\n")
              .find("less than 100") != std::string::npos);
    CHECK(refusal("on: push\njobs:\n  Build:\n    runs-on: x\n  build:\n    runs-on: x\n") ==
          "w.yml:5:3: 'build' is already defined");
}

TEST_CASE("grammar: step ids are unique in their job, whatever the case") {
    accepted(steps("      - id: s1\n        run: a\n      - id: s2\n        run: b\n"));
    CHECK(refusal(steps("      - id: s\n        run: a\n      - id: S\n        run: b\n")) ==
          "w.yml:8:13: The identifier 'S' may not be used more than once within the same scope.");
    CHECK(refusal(steps("      - id: __s\n        run: a\n")) ==
          "w.yml:6:13: The identifier '__s' is invalid. IDs starting with '__' are reserved.");
}

TEST_CASE("grammar: needs") {
    accepted("on: push\njobs:\n  a:\n    runs-on: x\n  b:\n    needs: A\n    runs-on: x\n");
    CHECK(refusal(job("    needs: zz\n") + "  b:\n    runs-on: x\n") ==
          "w.yml:5:12: Job 'a' depends on unknown job 'zz'.");
    CHECK(refusal("on: push\njobs:\n  a:\n    runs-on: x\n  b:\n    needs: c\n    runs-on: x\n  "
                  "c:\n    needs: b\n    runs-on: x\n") ==
          "w.yml:6:12: Job 'b' depends on job 'c' which creates a cycle in the dependency graph.");
    CHECK(refusal("on: push\njobs:\n  a:\n    needs: a\n    runs-on: x\n") ==
          "w.yml:3:3: The workflow must contain at least one job with no dependencies.");
}

TEST_CASE("grammar: runs-on.group prefixes") {
    accepted(
        "on: push\njobs:\n  a:\n    runs-on:\n      group: organization/linux\n      labels: "
        "[x]\n");
    accepted("on: push\njobs:\n  a:\n    runs-on:\n      group: plain\n");
    CHECK(refusal("on: push\njobs:\n  a:\n    runs-on:\n      group: team/linux\n") ==
          "w.yml:5:14: Invalid runs-on group name 'team/linux'. Please use 'organization/' or "
          "'enterprise/' prefix "
          "to target a single runner group.");
    CHECK(refusal("on: push\njobs:\n  a:\n    runs-on:\n      group: org/\n") ==
          "w.yml:5:14: Invalid runs-on group name 'org/'.");
}

TEST_CASE("grammar: containers name an image, with well-formed credentials") {
    accepted(job("    container: node:20\n    services:\n      db:\n        image: postgres\n"));
    accepted(
        job("    container:\n      image: node:20\n      credentials:\n        username: u\n       "
            " password: ${{ secrets.p }}\n"));
    CHECK(refusal(job("    container:\n      options: --cpus 1\n")) ==
          "w.yml:6:7: Container image cannot be empty");
    CHECK(refusal(job("    services:\n      db:\n        ports: ['5432']\n")) ==
          "w.yml:7:9: Container image cannot be empty");
    CHECK(refusal(job("    container:\n      image: x\n      credentials: user:pass\n")) ==
          "w.yml:7:20: Unexpected value 'user:pass'");
    CHECK(refusal(job("    container:\n      image: x\n      credentials:\n        token: t\n")) ==
          "w.yml:8:9: Unexpected value 'token'");
}

TEST_CASE("grammar: workflow_call inputs know only their properties") {
    accepted(
        "on:\n  workflow_call:\n    inputs:\n      x:\n        type: string\n        description: "
        "d\n        default: ${{ github.sha }}\n" +
        job(k_step).substr(9));
    CHECK(refusal("on:\n  workflow_call:\n    inputs:\n      x:\n        type: string\n        "
                  "options: [a]\n" +
                  job(k_step).substr(9)) == "w.yml:6:9: Unexpected value 'options'");
}

TEST_CASE(
    "grammar: on: every event known, workflow_dispatch lenient, filters as GitHub reads them") {
    accepted("on:\n  workflow_dispatch:\n    unknown-key: asdf\n" + job(k_step).substr(9));
    accepted("on:\n  merge_group:\n    branches: [main]\n    branches-ignore: [dev]\n" +
             job(k_step).substr(9));
    accepted("on:\n  push:\n    branches: [main]\n    branches-ignore: [dev]\n" +
             job(k_step).substr(9));
    accepted("on: [push, repository_dispatch]\n" + job(k_step).substr(9));
    CHECK(refusal("on: pushh\n" + job(k_step).substr(9)) == "w.yml:1:5: Unexpected value 'pushh'");
    CHECK(refusal("on:\n  push:\n    typo: [a]\n" + job(k_step).substr(9)) ==
          "w.yml:3:5: Unexpected value 'typo'");
    CHECK(refusal("on:\n  merge_group:\n    paths: [a]\n" + job(k_step).substr(9)) ==
          "w.yml:3:5: Unexpected value 'paths'");
}

TEST_CASE("grammar: uses references") {
    accepted(steps("      - uses: my org/my action@v1\n"));
    accepted(
        steps("      - uses: actions/cache/restore@v4\n      - uses: docker://alpine\n      - "
              "uses: ./local\n"));
    CHECK(refusal(steps("      - uses: actions/checkout\n")) ==
          "w.yml:6:15: Expected format {org}/{repo}[/path]@ref. Actual 'actions/checkout'");
    CHECK(refusal(steps("      - uses: checkout@v4\n")) ==
          "w.yml:6:15: Expected format {org}/{repo}[/path]@ref. Actual 'checkout@v4'");
}

TEST_CASE("grammar: YAML anchors and aliases, bounded") {
    auto w =
        accepted("on: push\nenv: &shared\n  A: 1\njobs:\n  a:\n    runs-on: x\n    env: *shared\n");
    CHECK(w.jobs[0].env.find("A") != nullptr);
    CHECK(refusal("on: push\nenv:\n  A: *nothing\n" + job(k_step).substr(9)) ==
          "w.yml:3:6: Unknown anchor 'nothing'");
    // Billion laughs: ten aliases of ten aliases of ...: stopped at GitHub's 50,000 events.
    std::string laughs = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
    for (int i = 1; i < 10; ++i) {
        laughs += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
        for (int j = 0; j < 10; ++j)
            laughs += std::string(j ? ", " : "") + "*a" + std::to_string(i - 1);
        laughs += "]\n";
    }
    CHECK(refusal(laughs).ends_with("Maximum YAML nodes exceeded"));
}

TEST_CASE("grammar: explicit tags as GitHub's reader takes them") {
    accepted(
        job("    env:\n      A: !!str 1\n      B: !!int 0x1F\n      C: !!float 1.5\n      D: "
            "!!bool true\n" +
            k_step));
    CHECK(refusal(job("    timeout-minutes: !!int abc\n" + k_step)) ==
          "w.yml:5:22: The value 'abc' on line 5 and column 22 is invalid for the type "
          "'tag:yaml.org,2002:int'");
    CHECK(refusal(job("    timeout-minutes: !!int '5'\n" + k_step)) ==
          "w.yml:5:22: The scalar style 'SingleQuoted' on line 5 and column 22 is not valid with "
          "the tag "
          "'tag:yaml.org,2002:int'");
    CHECK(refusal(job("    timeout-minutes: !!int \"5\"\n" + k_step))
              .find("The scalar style 'DoubleQuoted' on line 5") != std::string::npos);
    CHECK(refusal(job("    env:\n      A: !custom x\n" + k_step)) ==
          "w.yml:6:10: Unexpected tag '!custom'");
    CHECK(refusal(job("    timeout-minutes: !!str 5\n" + k_step)) ==
          "w.yml:5:22: Unexpected value '5'");
}

TEST_CASE("grammar: hex and octal integers are 32-bit, as GitHub reads them (the crash found)") {
    auto w =
        accepted(job("    strategy:\n      max-parallel: 0x10\n      matrix: {a: [1]}\n    "
                     "timeout-minutes: 0o17\n" +
                     k_step));
    CHECK(w.jobs[0].strategy->max_parallel->as_number() == 16);
    CHECK(w.jobs[0].timeout_minutes->as_number() == 15);
    CHECK(refusal(job(
              "    strategy:\n      max-parallel: 0x10000000000000000\n      matrix: {a: [1]}\n" +
              k_step)) ==
          "w.yml:6:21: The value '0x10000000000000000' on line 6 and column 21 is invalid for the "
          "type "
          "'tag:yaml.org,2002:int'");
    CHECK(refusal(job("    timeout-minutes: 0o777777777777777\n" + k_step))
              .find("is invalid for the type") != std::string::npos);
    // Decimal integers of any size are numbers (an infinity beyond a double, as GitHub).
    accepted(job("    timeout-minutes: " + std::string(400, '9') + "\n" + k_step));
}

TEST_CASE("grammar: integers of YAML 1.2's core schema, as GitHub reads them") {
    // GitHub's yaml-schema-int case: leading zeros are decimal, 0o and 0x are octal and hex.
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"-0000", "0"},     {"+1", "1"},           {"0xFF", "255"},
        {"0o10", "8"},      {"0755", "755"},       {"+00755", "755"},
        {"-00755", "-755"}, {"!!int 0xff", "255"}, {"!<tag:yaml.org,2002:int> 0o10", "8"}};
    std::string env = "    env:\n";
    for (std::size_t i = 0; i < cases.size(); ++i)
        env += "      K" + std::to_string(i) + ": " + cases[i].first + "\n";
    auto w = accepted(job(env + k_step));
    jobs::EvalContext context;
    for (const char* name : {"github", "inputs", "vars", "needs", "strategy", "matrix", "secrets"})
        context.contexts.set(name, jobs::Value(jobs::Object{}));
    auto values = jobs::evaluate_yaml(w.jobs[0].env, context);
    REQUIRE(values.has_value());
    for (std::size_t i = 0; i < cases.size(); ++i) {
        INFO(cases[i].first);
        CHECK(values->get("K" + std::to_string(i))->to_display_string() == cases[i].second);
    }
}

TEST_CASE("grammar: an empty value is placed where GitHub places it, after the colon") {
    CHECK(refusal(job("    container:\n      image:\n" + k_step)) ==
          "w.yml:6:13: Unexpected value ''");
    CHECK(refusal(job("    services:\n      db:\n        image:\n" + k_step)) ==
          "w.yml:7:15: Unexpected value ''");
}

TEST_CASE("grammar: matrices: vectors, nesting and 256 legs after exclude") {
    auto matrix = [](const std::string& body) {
        return job("    strategy:\n      matrix:\n" + body + k_step);
    };
    CHECK(refusal(matrix("        os: []\n")) ==
          "w.yml:7:13: Matrix vector 'os' does not contain any values");
    CHECK(refusal(matrix("        include: []\n")) ==
          "w.yml:7:9: Matrix must define at least one vector");
    CHECK(refusal(matrix("        os: [a]\n        include:\n          - {}\n")) ==
          "w.yml:9:13: Matrix include mapping does not contain any values");
    std::string values;
    for (int i = 0; i < 20; ++i) values += std::string(i ? ", " : "") + std::to_string(i);
    // 20 x 20 = 400 combinations, 220 after exclude: GitHub counts after exclude.
    std::string excludes;
    for (int i = 0; i < 9; ++i) excludes += "          - a: " + std::to_string(i) + "\n";
    accepted(matrix("        a: [" + values + "]\n        b: [" + values + "]\n        exclude:\n" +
                    excludes));
    CHECK(refusal(matrix("        a: [" + values + "]\n        b: [" + values + "]\n")) ==
          "w.yml:7:9: the matrix has more than 256 combinations");
    // 10^10 legs: refused without enumerating them.
    std::string huge;
    for (int v = 0; v < 10; ++v)
        huge += "        v" + std::to_string(v) + ": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n";
    CHECK(refusal(matrix(huge)) == "w.yml:7:9: the matrix has more than 256 combinations");
    // A strategy computed whole is GitHub's too: it is expanded when the job starts.
    auto computed =
        accepted(job("    strategy: ${{ fromJSON('{\"matrix\":{\"a\":[1,2]}}') }}\n" + k_step));
    CHECK(computed.jobs[0].strategy->computed.has_value());
    std::string nested = "[x]";
    for (int i = 0; i < 60; ++i) nested = "[" + nested + "]";
    CHECK(
        refusal(matrix("        a: " + nested + "\n")).ends_with("Maximum object depth exceeded"));
}

TEST_CASE("grammar: ${{ insert }} in mappings, matrix entries included") {
    auto w = accepted(
        job("    env:\n      A: 1\n      ${{ insert }}: ${{ fromJSON('{\"B\":\"2\"}') }}\n" +
            std::string("    strategy:\n      matrix:\n        os: [a]\n        include:\n") +
            "          - os: a\n            ${{ insert }}: ${{ fromJSON('{\"extra\":true}') }}\n" +
            k_step));
    jobs::EvalContext context;
    context.contexts.set("github", jobs::Value(jobs::Object{}));
    auto env = jobs::evaluate_yaml(w.jobs[0].env, context);
    REQUIRE(env.has_value());
    CHECK(env->get("A")->to_display_string() == "1");
    CHECK(env->get("B")->as_string() == "2");
    auto matrix = jobs::evaluate_matrix(w.jobs[0].strategy->matrix, context);
    REQUIRE(matrix.has_value());
    auto legs = jobs::expand_matrix(*matrix);
    REQUIRE(legs.has_value());
    REQUIRE(legs->size() == 1);
    CHECK((*legs)[0].get("extra")->as_boolean());
    // Where no expression may appear, no directive either.
    CHECK(refusal(steps("      - run: echo\n        ${{ insert }}: {}\n")) ==
          "w.yml:7:9: A template expression is not allowed in this context");
    CHECK(refusal(job("    env:\n      A: x ${{ insert }}\n" + k_step))
              .find("The directive 'insert' is not allowed") != std::string::npos);
}

TEST_CASE("grammar: documents are bounded and refusals are one line whatever the bytes") {
    const std::string big =
        "on: push\n# " + std::string(1024 * 1024, 'x') + "\n" + job(k_step).substr(9);
    CHECK(refusal(big) == "w.yml: The maximum file size of 1048576 characters has been exceeded");
    std::string nul_key =
        job("    env:\n      \"A\\0B\\x1b\": 1\n      \"A\\0B\\x1b\": 2\n" + k_step);
    CHECK(refusal(nul_key) == "w.yml:7:7: 'A\\x00B\\x1b' is already defined");
    CHECK(refusal(",").starts_with("w.yml:1:1: "));
    CHECK(refusal("a: "
                  "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
                  "[[[[[[[[\n")
              .ends_with("Maximum object depth exceeded"));
}

TEST_CASE(
    "grammar: many keys cost linear time; beyond GitHub's 50,000 parse events they are refused") {
    auto env_of = [](int count) {
        std::string env = "    env:\n";
        for (int i = 0; i < count; ++i) env += "      K" + std::to_string(i) + ": v\n";
        return env;
    };
    auto w = accepted(job(env_of(20000) + k_step));
    jobs::EvalContext context;
    for (const char* name : {"github", "inputs", "vars", "needs", "strategy", "matrix", "secrets"})
        context.contexts.set(name, jobs::Value(jobs::Object{}));
    auto env = jobs::evaluate_yaml(w.jobs[0].env, context);
    REQUIRE(env.has_value());
    CHECK(env->as_object().size() == 20000);
    CHECK(refusal(job(env_of(60000) + k_step)).ends_with("Maximum YAML nodes exceeded"));
}

TEST_CASE("grammar: block scalars with every indentation indicator and chomping mode") {
    for (const char* header :
         {"|", "|-", "|+", "|2", "|2-", "|2+", "|-2", "|+2", ">", ">-", ">+", ">2", ">2-", ">+2"}) {
        INFO(header);
        auto w = accepted(steps(std::string("      - run: ") + header +
                                "\n          echo one\n          echo two\n\n"));
        CHECK(w.jobs[0].steps[0].run->value.find("echo one") != std::string::npos);
    }
}

TEST_CASE("grammar: action manifests against GitHub's action schema") {
    auto loose = jobs::parse_action(
        "name: a\nauthor: me\nbranding: {icon: zap}\nanything: 1\nruns:\n  using: node20\n  main: "
        "m.js\n",
        "action.yml", ".");
    CHECK(loose.has_value());
    auto no_shell = jobs::parse_action("runs:\n  using: composite\n  steps:\n    - run: echo\n",
                                       "action.yml", ".");
    REQUIRE_FALSE(no_shell.has_value());
    CHECK(no_shell.error().message == "action.yml:4:7: Required property is missing: shell");
    auto bad_if = jobs::parse_action(
        "runs:\n  using: composite\n  steps:\n    - run: echo\n      shell: bash\n      if: "
        "needs.x\n",
        "action.yml", ".");
    REQUIRE_FALSE(bad_if.has_value());
    CHECK(bad_if.error().message.starts_with("action.yml:6:11: Unrecognized named-value: 'needs'"));
}
