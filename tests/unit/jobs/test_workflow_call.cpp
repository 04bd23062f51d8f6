// Calls of local reusable workflows around the nested run: loading the called workflow,
// the arguments a caller passes, and the called workflow's outputs.
#include <catch2/catch.hpp>
#include <string>

#include "jobs/workflow/workflow_call.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

constexpr std::string_view k_called = R"(on:
  workflow_call:
    inputs:
      greeting:
        type: string
        required: true
      count:
        type: number
        default: ${{ fromJSON('2') }}
    secrets:
      token:
        required: true
    outputs:
      built:
        value: ${{ jobs.build.outputs.artifact }}-${{ inputs.greeting }}
      broken:
        value: ${{ fromJSON('{') }}
      result:
        value: ${{ jobs.build.result }}
jobs:
  build:
    runs-on: ubuntu-latest
    steps:
      - run: true
)";

jobs::Workflow caller(std::string_view jobs_yaml) {
    auto workflow =
        jobs::parse_workflow("on: push\njobs:\n" + std::string(jobs_yaml), "caller.yml");
    REQUIRE(workflow);
    return std::move(*workflow);
}

jobs::Workflow called() {
    auto workflow = jobs::parse_workflow(k_called, "called.yml");
    REQUIRE(workflow);
    return std::move(*workflow);
}

jobs::Object secrets_of(std::initializer_list<std::pair<std::string, std::string>> pairs) {
    jobs::Object out;
    for (const auto& [name, value] : pairs) out.set(name, value);
    return out;
}

}  // namespace

TEST_CASE("load_called_workflow: local and callable only, errors name the uses: line") {
    auto dir = tests::make_temp_dir("call");
    tests::write_file(dir / ".github/workflows/called.yml", k_called);
    tests::write_file(dir / ".github/workflows/plain.yml",
                      "on: push\njobs:\n  a:\n    runs-on: x\n    steps:\n      - run: true\n");
    auto load = [&](std::string_view uses) {
        const auto workflow = caller("  call:\n    uses: " + std::string(uses) + "\n");
        return jobs::load_called_workflow(dir, workflow.jobs.at(0));
    };
    auto ok = load("./.github/workflows/called.yml");
    REQUIRE(ok);
    CHECK(ok->file == ".github/workflows/called.yml");
    CHECK(ok->on.call_inputs.size() == 2);

    auto remote = load("octo/repo/.github/workflows/x.yml@main");
    REQUIRE_FALSE(remote);
    CHECK(remote.error().kind == common::ErrorKind::unavailable);
    CHECK(remote.error().message ==
          "caller.yml:4:11: the remote reusable workflow 'octo/repo/.github/workflows/x.yml@main' "
          "is not available: "
          "sandgate runs offline");

    auto missing = load("./.github/workflows/missing.yml");
    REQUIRE_FALSE(missing);
    CHECK(missing.error().kind == common::ErrorKind::invalid_input);
    CHECK(missing.error().message ==
          "caller.yml:4:11: the called workflow './.github/workflows/missing.yml' does not exist");

    auto plain = load("./.github/workflows/plain.yml");
    REQUIRE_FALSE(plain);
    CHECK(plain.error().message ==
          "caller.yml:4:11: the workflow './.github/workflows/plain.yml' is not callable: its 'on' "
          "lacks workflow_call");
}

TEST_CASE("call_arguments: typed inputs with defaults, explicit and inherited secrets") {
    const auto target = called();
    jobs::EvalContext context;
    context.contexts.set("vars", jobs::Value(secrets_of({{"who", "world"}})));

    const auto explicit_secrets = caller(R"(  call:
    uses: ./called.yml
    with:
      greeting: hello ${{ vars.who }}
    secrets:
      token: ${{ 'abc' }}
)");
    auto args = jobs::call_arguments(explicit_secrets.jobs.at(0), target, context,
                                     secrets_of({{"other", "x"}}));
    REQUIRE(args);
    CHECK(args->inputs.find("greeting")->as_string() == "hello world");
    CHECK(args->inputs.find("count")->as_number() == 2);
    CHECK(args->secrets.find("token")->as_string() == "abc");
    CHECK_FALSE(args->secrets.contains("other"));  // not inherited

    const auto inherit = caller(
        "  call:\n    uses: ./called.yml\n    with:\n      greeting: hi\n      count: 5\n    "
        "secrets: inherit\n");
    args = jobs::call_arguments(inherit.jobs.at(0), target, context,
                                secrets_of({{"token", "t"}, {"other", "x"}}));
    REQUIRE(args);
    CHECK(args->inputs.find("count")->as_number() == 5);
    CHECK(args->secrets.find("token")->as_string() == "t");
    CHECK(args->secrets.find("other")->as_string() == "x");
}

TEST_CASE(
    "call_arguments: undeclared or missing inputs, missing secrets and failing expressions are "
    "errors") {
    const auto target = called();
    const jobs::EvalContext context;
    auto error_of = [&](std::string_view job_yaml, const jobs::Object& caller_secrets = {}) {
        const auto workflow = caller(job_yaml);
        auto args = jobs::call_arguments(workflow.jobs.at(0), target, context, caller_secrets);
        REQUIRE_FALSE(args);
        CHECK(args.error().kind == common::ErrorKind::invalid_input);
        return args.error().message;
    };
    CHECK(error_of("  call:\n    uses: ./called.yml\n    with:\n      greeting: hi\n      colour: "
                   "red\n    secrets: inherit\n",
                   secrets_of({{"token", "t"}})) ==
          "caller.yml:4:11: the input 'colour' is not defined by the called workflow");
    CHECK_THAT(error_of("  call:\n    uses: ./called.yml\n    secrets: inherit\n",
                        secrets_of({{"token", "t"}})),
               Catch::StartsWith("caller.yml:4:11: called.yml:") &&
                   Catch::EndsWith("the required input 'greeting' was not given"));
    CHECK(error_of("  call:\n    uses: ./called.yml\n    with:\n      greeting: hi\n    secrets: "
                   "inherit\n") == "caller.yml:4:11: the required secret 'token' was not passed");
    CHECK_THAT(
        error_of(
            "  call:\n    uses: ./called.yml\n    with:\n      greeting: ${{ fromJSON('{') }}\n"),
        Catch::StartsWith("caller.yml:6:"));
}

TEST_CASE("evaluate_call_outputs: jobs.<id> and inputs; a failing output is listed and left out") {
    const auto target = called();
    jobs::JobReport build;
    build.id = "build";
    build.conclusion = jobs::Outcome::success;
    build.outputs = {{"artifact", "app.tar"}};
    const auto outputs = jobs::evaluate_call_outputs(
        target, {build}, secrets_of({{"greeting", "hi"}}), jobs::EvalContext{});
    REQUIRE(outputs.values.size() == 2);
    CHECK(*jobs::find_named(outputs.values, "built") == "app.tar-hi");
    CHECK(*jobs::find_named(outputs.values, "result") == "success");
    REQUIRE(outputs.errors.size() == 1);
    CHECK_THAT(outputs.errors[0], Catch::StartsWith("called.yml:17:"));
}

TEST_CASE("job_result_entry: result and outputs, as needs.<id> shows them") {
    const auto entry = jobs::job_result_entry(jobs::Outcome::cancelled, {{"a", "1"}, {"b", ""}});
    CHECK(entry.get("result")->as_string() == "cancelled");
    CHECK(entry.get("outputs")->get("a")->as_string() == "1");
    CHECK(entry.get("outputs")->get("b")->as_string().empty());
}
