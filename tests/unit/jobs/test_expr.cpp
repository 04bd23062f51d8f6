// The expression language: GitHub's shared corpus (every case), then what the corpus does not
// reach (status functions, case(), hashFiles, conditions, templates) and the CLI end to end.
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "jobs/expr/expr.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
using jobs::EvalContext;
using jobs::ExprError;
using jobs::Value;

namespace {

EvalContext context_from_json(std::string_view json) {
    EvalContext context;
    auto parsed = jobs::parse_json(json);
    REQUIRE(parsed.has_value());
    context.contexts = parsed->as_object();
    return context;
}

Value eval_ok(std::string_view expression, const EvalContext& context = {}) {
    auto result = jobs::evaluate(expression, context);
    INFO(expression << " -> " << (result ? "" : result.error().message));
    REQUIRE(result.has_value());
    return *result;
}

ExprError eval_error(std::string_view expression, const EvalContext& context = {}) {
    auto result = jobs::evaluate(expression, context);
    INFO(expression);
    REQUIRE_FALSE(result.has_value());
    return result.error();
}

std::string json(const Value& value) {
    return jobs::to_json(value, jobs::JsonStyle::compact);
}

struct CorpusTotals {
    int checked = 0;
    int files = 0;
};

// One corpus case: {expr, contexts?, result: {kind, value}} or {expr, err: {kind, value}}.
void check_case(const std::string& where, const Value& test_case, CorpusTotals& totals) {
    const std::string expression = test_case.get("expr")->as_string();
    EvalContext context;
    if (const Value* contexts = test_case.get("contexts")) context.contexts = contexts->as_object();
    auto result = jobs::evaluate(expression, context);
    INFO(where << ": " << expression);
    if (const Value* expected_error = test_case.get("err")) {
        INFO("got: " << (result ? json(*result) : result.error().message));
        REQUIRE_FALSE(result.has_value());
        CHECK(jobs::to_string(result.error().phase) == expected_error->get("kind")->as_string());
        // GitHub's own harness checks that the message contains the expected text.
        CHECK_THAT(result.error().message,
                   Catch::Contains(expected_error->get("value")->as_string()));
    } else {
        const Value& expected = *test_case.get("result");
        INFO("error: " << (result ? "" : result.error().message));
        REQUIRE(result.has_value());
        CHECK(std::string(jobs::to_string(result->kind())) == expected.get("kind")->as_string());
        CHECK(json(*result) == json(*expected.get("value")));
    }
    ++totals.checked;
}

}  // namespace

TEST_CASE("every case of the shared expression corpus passes") {
    const fs::path directory = fs::path(SANDGATE_SHARED_DIR) / "corpora" / "expressions";
    REQUIRE(fs::is_directory(directory));
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(directory)) {
        if (entry.path().extension() == ".json") files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    CorpusTotals totals;
    for (const auto& file : files) {
        auto document = jobs::parse_json(tests::read_file(file));
        INFO(file);
        REQUIRE(document.has_value());
        for (const auto& [group, cases] : document->as_object()) {
            for (const auto& test_case : cases.as_array()) {
                check_case(file.filename().string() + " / " + group, test_case, totals);
            }
        }
        ++totals.files;
    }
    std::printf("expression corpus: %d cases checked from %d files\n", totals.checked,
                totals.files);
    CHECK(totals.files >= 19);
    CHECK(totals.checked > 600);
}

TEST_CASE("operators return operands and compare the GitHub way") {
    const auto context =
        context_from_json(R"({"github": {"event_name": "push", "ref": "refs/heads/main"},
        "matrix": {"os": "Linux", "n": 3}, "steps": {"build": {"outputs": {"v": "1.2"}}}})");
    CHECK(eval_ok("github.event_name == 'PUSH'", context).as_boolean());
    CHECK(eval_ok("GITHUB.Event_Name", context).as_string() == "push");
    CHECK(eval_ok("matrix.n > 2 && 'big' || 'small'", context).as_string() == "big");
    CHECK(eval_ok("steps.build.outputs.v == 1.2", context).as_boolean());
    CHECK(eval_ok("steps.missing.outputs.v", context).is_null());
    CHECK(eval_ok("startsWith(github.ref, 'refs/heads/')", context).as_boolean());
    CHECK(eval_ok("endsWith(github.ref, '/MAIN')", context).as_boolean());
    CHECK_FALSE(eval_ok("endsWith(github.ref, 'mai')", context).as_boolean());
    CHECK(eval_ok("!contains(fromJSON('[\"a\",\"b\"]'), 'C')", context).as_boolean());
    CHECK(json(eval_ok("fromJSON('{\"a\":[{\"b\":1},{\"b\":2},{\"c\":3}]}').a.*.b")) == "[1,2]");
    CHECK(json(eval_ok("fromJSON('[[1,2],[3]]')[*][0]")) == "[1,3]");
}

TEST_CASE("case() picks the first true predicate, else the default") {
    const auto context = context_from_json(R"({"github": {"ref": "refs/heads/main"}})");
    CHECK(eval_ok("case(github.ref == 'refs/heads/main', 'prod', github.ref == 'x', 'x', 'dev')",
                  context)
              .as_string() == "prod");
    CHECK(eval_ok("case(false, 1, false, 2, 3)").as_number() == 3);
    CHECK(eval_ok("case(false, 1, true, fromJSON('[7]'), 3)").is_array());
    auto not_boolean = eval_error("case(1, 'a', 'b')");
    CHECK(not_boolean.phase == ExprError::Phase::evaluation);
    CHECK(eval_error("case(true, 'a')").phase == ExprError::Phase::parsing);
    auto even = eval_error("case(true, 'a', false, 'b')");
    CHECK(even.phase == ExprError::Phase::parsing);
    CHECK_THAT(even.message, Catch::Contains("Even number of parameters"));
}

TEST_CASE("status functions follow the run status; restricted sets refuse them") {
    EvalContext context;
    CHECK(eval_ok("success()", context).as_boolean());
    CHECK_FALSE(eval_ok("failure()", context).as_boolean());
    CHECK(eval_ok("always()", context).as_boolean());
    context.status = jobs::RunStatus::failure;
    CHECK(eval_ok("failure() && !success() && !cancelled()", context).as_boolean());
    context.status = jobs::RunStatus::cancelled;
    CHECK(eval_ok("cancelled() && !failure() && !success()", context).as_boolean());

    context.functions = jobs::FunctionSet::core;
    auto refused = eval_error("success()", context);
    CHECK(refused.phase == ExprError::Phase::parsing);
    CHECK_THAT(refused.message, Catch::Contains("Unrecognized function: 'success'"));
    CHECK(eval_error("hashFiles('x')", context).phase == ExprError::Phase::parsing);
    CHECK(eval_ok("format('{0}', 1)", context).as_string() == "1");
}

TEST_CASE("evaluate_condition: ${{ }} optional, implicit success()") {
    auto context = context_from_json(R"({"github": {"event_name": "push"}, "env": {"EMPTY": ""}})");
    auto condition = [&](std::string_view text) {
        auto result = jobs::evaluate_condition(text, context);
        INFO(text << " -> " << (result ? "" : result.error().message));
        REQUIRE(result.has_value());
        return *result;
    };
    CHECK(condition("github.event_name == 'push'"));
    CHECK(condition("${{ github.event_name == 'push' }}"));
    CHECK(condition("  ${{ github.event_name == 'push' }}  "));
    CHECK_FALSE(condition("${{ env.EMPTY }}"));
    CHECK(condition(""));
    // Literal text around ${{ }} makes a non-empty string: true, as on GitHub.
    CHECK(condition("${{ false }} == true"));
    context.status = jobs::RunStatus::failure;
    CHECK_FALSE(condition("github.event_name == 'push'"));  // success() && ...
    CHECK(condition("failure() && github.event_name == 'push'"));
    CHECK(condition("always()"));
    CHECK_FALSE(condition("${{ false }} == true"));
    context.status = jobs::RunStatus::cancelled;
    CHECK_FALSE(condition("always() && false"));
    CHECK(condition("cancelled()"));
    CHECK_FALSE(condition(""));
    // Status functions are always allowed in a condition.
    context.functions = jobs::FunctionSet::core;
    CHECK(condition("cancelled()"));
    auto bad = jobs::evaluate_condition("github.event_name ==", context);
    REQUIRE_FALSE(bad.has_value());
    CHECK(bad.error().phase == ExprError::Phase::parsing);
}

TEST_CASE("interpolate coerces to strings; interpolate_value keeps a sole expression's kind") {
    auto context = context_from_json(R"({"matrix": {"os": "linux", "n": 2, "big": 1e21, "f": 0.1},
        "inputs": {"list": "[1, 2]", "flag": true}, "github": {"event": {"a": 1}}})");
    auto text = [&](std::string_view input) {
        auto result = jobs::interpolate(input, context);
        INFO(input << " -> " << (result ? "" : result.error().message));
        REQUIRE(result.has_value());
        return *result;
    };
    CHECK(text("build-${{ matrix.os }}-${{ matrix.n }}") == "build-linux-2");
    CHECK(text("no expressions") == "no expressions");
    CHECK(text("${{ matrix.none }}|${{ inputs.flag }}|${{ matrix.f }}|${{ matrix.big }}") ==
          "|true|0.1|1e+21");
    CHECK(text("${{ github.event }} ${{ fromJSON(inputs.list) }}") == "Object Array");
    CHECK(text("${{ format('}}{0}', 'x') }}") == "}x");
    CHECK(text("a ${{ 'it''s' }} b") == "a it's b");

    auto unclosed = jobs::interpolate("echo ${{ matrix.os", context);
    REQUIRE_FALSE(unclosed.has_value());
    CHECK(unclosed.error().phase == ExprError::Phase::parsing);
    auto lexing = jobs::interpolate("echo ${{ matrix.os = 1 }}", context);
    REQUIRE_FALSE(lexing.has_value());
    CHECK(lexing.error().phase == ExprError::Phase::lexing);

    auto sole = jobs::interpolate_value("  ${{ fromJSON(inputs.list) }} ", context);
    REQUIRE(sole.has_value());
    CHECK(json(*sole) == "[1,2]");
    auto flag = jobs::interpolate_value("${{ inputs.flag }}", context);
    REQUIRE(flag.has_value());
    CHECK(flag->is_boolean());
    auto mixed = jobs::interpolate_value("${{ matrix.n }}x", context);
    REQUIRE(mixed.has_value());
    CHECK(mixed->as_string() == "2x");
    auto two = jobs::interpolate_value("${{ matrix.n }}${{ matrix.n }}", context);
    REQUIRE(two.has_value());
    CHECK(two->as_string() == "22");
}

TEST_CASE("a parsed expression is reusable across contexts") {
    const std::vector<std::string> names{"matrix"};
    auto parsed = jobs::parse("matrix.os == 'linux' && matrix.n", names);
    REQUIRE(parsed.has_value());
    CHECK_FALSE(parsed->uses_status_function());
    auto first = context_from_json(R"({"matrix": {"os": "linux", "n": 4}})");
    auto second = context_from_json(R"({"matrix": {"os": "windows", "n": 4}})");
    CHECK(parsed->evaluate(first)->as_number() == 4);
    CHECK(parsed->evaluate(second)->as_boolean() == false);
    CHECK_FALSE(jobs::parse("env.X", names).has_value());
}

TEST_CASE("hashFiles hashes matching files like actions/runner") {
    const fs::path workspace = tests::make_temp_dir("hash");
    tests::write_file(workspace / "package-lock.json", "lock\n");
    tests::write_file(workspace / "sub" / "deep" / "package-lock.json", "deep lock\n");
    tests::write_file(workspace / "sub" / "a.txt", "a");
    tests::write_file(workspace / ".hidden" / "package-lock.json", "hidden");
    tests::write_file(workspace / "src" / "x.c", "x");
    tests::write_file(workspace / "src" / "y.c", "y");
    EvalContext context;
    context.workspace = workspace;
    auto hash = [&](std::string_view expression) {
        return eval_ok(expression, context).as_string();
    };

    // One file: sha256 over that file's sha256 digest (echo -n lock | sha256sum | xxd -r -p |
    // sha256sum).
    const std::string one = hash("hashFiles('package-lock.json')");
    CHECK(one.size() == 64);
    CHECK(one ==
          jobs::hash_files(workspace, std::vector<std::string>{"./package-lock.json"}).value());
    CHECK(hash("hashFiles('no-such-file')") == "");
    CHECK(hash("hashFiles('**/package-lock.json')") != one);
    CHECK(hash("hashFiles('**/package-lock.json')") ==
          hash("hashFiles('package-lock.json', 'sub/deep/package-lock.json', "
               "'.hidden/package-lock.json')"));
    // A directory stands for everything below it; ! excludes; order of arguments does not matter.
    CHECK(hash("hashFiles('src')") == hash("hashFiles('src/*.c')"));
    CHECK(hash("hashFiles('src/y.c', 'src/x.c')") == hash("hashFiles('src/*.c')"));
    CHECK(hash("hashFiles('src/*', '!src/y.c')") == hash("hashFiles('src/x.c')"));
    CHECK(hash("hashFiles('**/*.c')") == hash("hashFiles('src/?.c')"));
    CHECK(hash("hashFiles('../outside')") == "");
    // Content changes change the hash.
    const std::string before = hash("hashFiles('src/**')");
    tests::write_file(workspace / "src" / "x.c", "changed");
    CHECK(hash("hashFiles('src/**')") != before);

    EvalContext no_workspace;
    CHECK(eval_error("hashFiles('x')", no_workspace).phase == ExprError::Phase::evaluation);
}

TEST_CASE("hashFiles digest matches sha256sum of the concatenated digests") {
    const fs::path workspace = tests::make_temp_dir("hash2");
    tests::write_file(workspace / "a", "alpha");
    tests::write_file(workspace / "b", "beta");
    // coreutils and bash only: per-file digests as hex, turned into bytes by printf \x escapes.
    tests::write_file(
        workspace / "expected.sh",
        "cd \"$1\" || exit 1\n"
        "hex=$(for f in a b; do sha256sum \"$f\" | cut -c1-64; done | tr -d '\\n')\n"
        "printf \"$(printf '%s' \"$hex\" | sed 's/../\\\\x&/g')\" | sha256sum | cut -c1-64\n");
    const std::string command =
        "bash '" + (workspace / "expected.sh").string() + "' '" + workspace.string() + "'";
    std::unique_ptr<FILE, decltype(&pclose)> pipe(popen(command.c_str(), "r"), &pclose);
    REQUIRE(pipe);
    std::array<char, 128> buffer{};
    std::string expected;
    while (std::fgets(buffer.data(), buffer.size(), pipe.get()) != nullptr)
        expected += buffer.data();
    while (!expected.empty() && expected.back() == '\n') expected.pop_back();
    REQUIRE(expected.size() == 64);
    CHECK(jobs::hash_files(workspace, std::vector<std::string>{"a", "b"}).value() == expected);
    CHECK(jobs::hash_files(workspace, std::vector<std::string>{"*", "!expected.sh"}).value() ==
          expected);
}

namespace {

struct Run {
    int status = -1;
    std::string out;
};

Run run_sandgate(const std::string& arguments) {
    const std::string command =
        std::string("'") + SANDGATE_BINARY + "' expr " + arguments + " 2>&1";
    std::unique_ptr<FILE, decltype(&pclose)> pipe(popen(command.c_str(), "r"), &pclose);
    REQUIRE(pipe);
    Run run;
    std::array<char, 4096> buffer{};
    while (std::fgets(buffer.data(), buffer.size(), pipe.get()) != nullptr)
        run.out += buffer.data();
    const int raw = pclose(pipe.release());
    run.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    return run;
}

}  // namespace

TEST_CASE("sandgate expr prints kind and value, or the error with exit 2") {
    const fs::path dir = tests::make_temp_dir("cli");
    tests::write_file(dir / "contexts.json",
                      R"({"github": {"event_name": "push"}, "matrix": {"n": 3}})");
    const std::string contexts = " --contexts '" + (dir / "contexts.json").string() + "'";

    auto ok = run_sandgate("\"github.event_name == 'push' && matrix.n\"" + contexts);
    CHECK(ok.status == 0);
    CHECK(ok.out == "{\"kind\":\"Number\",\"value\":3}\n");

    auto object = run_sandgate("\"fromJSON('{\\\"a\\\":[true,null,\\\"s\\\"]}')\"");
    CHECK(object.status == 0);
    CHECK(object.out == "{\"kind\":\"Object\",\"value\":{\"a\":[true,null,\"s\"]}}\n");

    auto parse_error = run_sandgate("'1 <'");
    CHECK(parse_error.status == 2);
    CHECK(parse_error.out ==
          "{\"error\":{\"kind\":\"parsing\",\"message\":\"Unexpected end of expression: '<'. "
          "Located at position 3 within expression: 1 <\"}}\n");
    auto unknown = run_sandgate("'github.sha'");
    CHECK(unknown.status == 2);
    CHECK_THAT(unknown.out, Catch::Contains("\"kind\":\"parsing\""));
    auto evaluation = run_sandgate("\"format('{0')\"");
    CHECK(evaluation.status == 2);
    CHECK_THAT(evaluation.out, Catch::Contains("\"kind\":\"evaluation\""));

    auto bad_flag = run_sandgate("'1' --no-such-flag");
    CHECK(bad_flag.status == 2);
    CHECK(std::count(bad_flag.out.begin(), bad_flag.out.end(), '\n') == 1);
    auto missing = run_sandgate("'1' --contexts /nonexistent/contexts.json");
    CHECK(missing.status == 2);
    CHECK_THAT(missing.out, Catch::Contains("--contexts"));
    tests::write_file(dir / "bad.json", "{not json");
    auto bad_json = run_sandgate("'1' --contexts '" + (dir / "bad.json").string() + "'");
    CHECK(bad_json.status == 2);
    CHECK(std::count(bad_json.out.begin(), bad_json.out.end(), '\n') == 1);
    auto no_expression = run_sandgate("");
    CHECK(no_expression.status == 2);
}

TEST_CASE("load-time checks find lexing and parsing errors without evaluating") {
    const std::vector<std::string> names{"github", "matrix"};
    CHECK(jobs::check_template("run ${{ matrix.os }} and ${{ github.sha }}", names,
                               jobs::FunctionSet::core));
    CHECK(jobs::check_template("no expressions at all", names, jobs::FunctionSet::core));
    // Evaluation errors are not load-time errors.
    CHECK(jobs::check_template("${{ format('{0') }}", names, jobs::FunctionSet::core));
    auto unknown = jobs::check_template("x ${{ secrets.TOKEN }}", names, jobs::FunctionSet::core);
    REQUIRE_FALSE(unknown.has_value());
    CHECK(unknown.error().phase == ExprError::Phase::parsing);
    CHECK_THAT(unknown.error().message, Catch::Contains("'secrets'"));
    CHECK_FALSE(jobs::check_template("${{ matrix.os", names, jobs::FunctionSet::core).has_value());
    CHECK_FALSE(
        jobs::check_template("${{ hashFiles('x') }}", names, jobs::FunctionSet::core).has_value());
    CHECK(jobs::check_template("${{ hashFiles('x') }}", names, jobs::FunctionSet::hash_files)
              .has_value());

    CHECK(jobs::check_condition("failure() || github.event_name == 'push'", names,
                                jobs::FunctionSet::core));
    CHECK(jobs::check_condition("${{ always() }}", names, jobs::FunctionSet::core));
    CHECK(jobs::check_condition("", names, jobs::FunctionSet::core));
    auto lexing = jobs::check_condition("github.ref = 'x'", names, jobs::FunctionSet::core);
    REQUIRE_FALSE(lexing.has_value());
    CHECK(lexing.error().phase == ExprError::Phase::lexing);
}

TEST_CASE("limits and positions: length, UTF-16 positions, memory") {
    const std::string too_long(21001, '1');
    auto length = eval_error(too_long);
    CHECK(length.phase == ExprError::Phase::lexing);
    CHECK_THAT(length.message, Catch::Contains("Exceeded max expression length 21000"));
    CHECK(eval_ok(std::string(21000, '1')).is_number());

    // Positions count UTF-16 units from 1: quote, é (1), 😊 (2), quote, space, then `@` at 7.
    auto position = eval_error("'é😊' @");
    CHECK(position.phase == ExprError::Phase::lexing);
    CHECK_THAT(position.message, Catch::Contains("Located at position 7 within"));

    auto context = context_from_json(R"({"big": "0123456789"})");
    std::string nested = "big";
    for (int i = 0; i < 15; ++i)
        nested = "format('{0}{0}{0}{0}', " + nested + ")";  // 10 * 4^15 chars
    auto memory = eval_error(nested, context);
    CHECK(memory.phase == ExprError::Phase::evaluation);
    CHECK_THAT(memory.message, Catch::Contains("maximum allowed memory"));
}

TEST_CASE("filters, identity and coercions beyond the corpus") {
    auto context =
        context_from_json(R"({"needs": {"build": {"result": "success", "outputs": {"v": "1"}},
        "test": {"result": "failure", "outputs": {"v": "2"}}}, "list": [1, "1", true, null]})");
    CHECK(json(eval_ok("needs.*.result", context)) == R"(["success","failure"])");
    CHECK(eval_ok("contains(needs.*.result, 'FAILURE')", context).as_boolean());
    CHECK(json(eval_ok("needs.*.outputs.v", context)) == R"(["1","2"])");
    CHECK(json(eval_ok("needs[*].outputs['V']", context)) == R"(["1","2"])");
    CHECK(json(eval_ok("(needs.*)[1].result", context)) == "[]");  // filters apply to each element
    CHECK(eval_ok("needs.build == needs.build", context).as_boolean());
    CHECK_FALSE(eval_ok("fromJSON('{}') == fromJSON('{}')", context).as_boolean());
    CHECK(eval_ok("join(list, '|')", context).as_string() == "1|1|true|");
    CHECK(eval_ok("list[1] == list[0] && list[2] == 1 && list[3] == 0", context).as_boolean());
    CHECK(eval_ok("'ABC' < 'abd' && 'b' >= 'B' && 'Ü' == 'ü'", context).as_boolean());
    CHECK(eval_ok("toJSON(needs.build.outputs)", context).as_string() == "{\n  \"v\": \"1\"\n}");
}
