#include <catch2/catch.hpp>
#include <string>

#include "jobs/workflow/matrix.hpp"
#include "jobs/workflow/workflow_model.hpp"

namespace {

jobs::Value json(const std::string& text) {
    auto value = jobs::parse_json(text);
    REQUIRE(value.has_value());
    return *value;
}

std::string combos(const std::vector<jobs::Value>& legs) {
    std::string out;
    for (const auto& leg : legs) out += jobs::to_json(leg, jobs::JsonStyle::compact) + "\n";
    return out;
}

jobs::EvalContext context_with(const std::string& needs_json = "{}") {
    jobs::EvalContext context;
    context.contexts.set("needs", json(needs_json));
    context.contexts.set("github", jobs::Value(jobs::Object{}));
    return context;
}

jobs::YamlNode matrix_node(const std::string& yaml) {
    auto node = jobs::parse_yaml(yaml, "m.yml");
    REQUIRE(node.has_value());
    return *node->find("matrix");
}

}  // namespace

TEST_CASE("the cartesian product keeps key order") {
    auto legs = jobs::expand_matrix(json(R"({"os":["a","b"],"node":[1,2]})"));
    REQUIRE(legs.has_value());
    CHECK(combos(*legs) ==
          "{\"os\":\"a\",\"node\":1}\n{\"os\":\"a\",\"node\":2}\n"
          "{\"os\":\"b\",\"node\":1}\n{\"os\":\"b\",\"node\":2}\n");
}

TEST_CASE("exclude drops partial matches; include extends or adds (GitHub's documented example)") {
    // docs.github.com: "Expanding or adding matrix configurations".
    auto legs = jobs::expand_matrix(json(R"({
        "fruit": ["apple", "pear"], "animal": ["cat", "dog"],
        "include": [
            {"color": "green"},
            {"color": "pink", "animal": "cat"},
            {"fruit": "apple", "shape": "circle"},
            {"fruit": "banana"},
            {"fruit": "banana", "animal": "cat"}
        ]})"));
    REQUIRE(legs.has_value());
    CHECK(combos(*legs) ==
          "{\"fruit\":\"apple\",\"animal\":\"cat\",\"color\":\"pink\",\"shape\":\"circle\"}\n"
          "{\"fruit\":\"apple\",\"animal\":\"dog\",\"color\":\"green\",\"shape\":\"circle\"}\n"
          "{\"fruit\":\"pear\",\"animal\":\"cat\",\"color\":\"pink\"}\n"
          "{\"fruit\":\"pear\",\"animal\":\"dog\",\"color\":\"green\"}\n"
          "{\"fruit\":\"banana\"}\n"
          "{\"fruit\":\"banana\",\"animal\":\"cat\"}\n");

    auto excluded = jobs::expand_matrix(json(R"({
        "os": ["macos-latest", "windows-latest"], "version": [12, 14, 16],
        "environment": ["staging", "production"],
        "exclude": [{"os": "macos-latest", "version": 12, "environment": "production"},
                    {"os": "windows-latest", "version": 16}]})"));
    REQUIRE(excluded.has_value());
    CHECK(excluded->size() == 12 - 1 - 2);

    auto act_case = jobs::expand_matrix(json(R"({
        "os": ["ubuntu-18.04", "macos-latest"], "node": [4, 6, 8, 10],
        "exclude": [{"os": "macos-latest", "node": 4}],
        "include": [{"os": "ubuntu-16.04", "node": 10}]})"));
    REQUIRE(act_case.has_value());
    CHECK(act_case->size() == 8);
    CHECK(jobs::to_json(act_case->back(), jobs::JsonStyle::compact) ==
          R"({"os":"ubuntu-16.04","node":10})");
}

TEST_CASE("include alone, and matrices that cannot expand") {
    auto only = jobs::expand_matrix(json(R"({"include":[{"def":"val"},{"def":"other"}]})"));
    REQUIRE(only.has_value());
    CHECK(only->size() == 2);
    CHECK(jobs::expand_matrix(json(R"({"os":[]})")).error().message ==
          "the matrix vector 'os' has no values");
    CHECK(jobs::expand_matrix(json(R"({"os":"linux"})")).error().message ==
          "the matrix vector 'os' must be an array, not String");
    CHECK(jobs::expand_matrix(json(R"({"os":["a"],"exclude":[{"os":"a"}]})")).error().message ==
          "the matrix has no combinations left after 'exclude'");
    CHECK(jobs::expand_matrix(json(R"({"include":["x"]})")).error().message ==
          "strategy.matrix.include entries must be objects, not String");
    std::string big = R"({"a":[1,2,3,4,5,6,7,8,9],"b":[1,2,3,4,5,6,7,8,9],"c":[1,2,3,4]})";
    CHECK(jobs::expand_matrix(json(big)).error().message ==
          "the matrix has more than 256 combinations");
}

TEST_CASE("the 256-leg limit counts the legs left after exclude and include, not the product") {
    // 17 x 16 = 272 combinations; excluding a=1 and a=2 leaves 15 x 16 = 240.
    std::string a, b;
    for (int i = 1; i <= 17; ++i) a += (i > 1 ? "," : "") + std::to_string(i);
    for (int i = 1; i <= 16; ++i) b += (i > 1 ? "," : "") + std::to_string(i);
    const std::string vectors =
        R"("a":[)" + a + R"(],"b":[)" + b + R"(],"exclude":[{"a":1},{"a":2}])";
    auto legs = jobs::expand_matrix(json("{" + vectors + "}"));
    REQUIRE(legs.has_value());
    CHECK(legs->size() == 240);
    // include entries that match no original combination add legs: 240 + 16 = 256 is allowed,
    // one more is not.
    std::string include;
    for (int i = 0; i < 16; ++i)
        include += (i > 0 ? "," : "") + std::string(R"({"a":)") + std::to_string(100 + i) + "}";
    auto full = jobs::expand_matrix(json("{" + vectors + R"(,"include":[)" + include + "]}"));
    REQUIRE(full.has_value());
    CHECK(full->size() == 256);
    auto over =
        jobs::expand_matrix(json("{" + vectors + R"(,"include":[)" + include + R"(,{"a":999}]})"));
    REQUIRE_FALSE(over.has_value());
    CHECK(over.error().message == "the matrix has more than 256 combinations");
    // The same matrix in a workflow parses (the grammar counts after exclude too).
    std::string yaml =
        "on: push\njobs:\n  m:\n    runs-on: x\n    strategy:\n      matrix:\n        a: [" + a +
        "]\n        b: [" + b +
        "]\n        exclude:\n          - a: 1\n          - a: 2\n    steps:\n      - run: true\n";
    auto workflow = jobs::parse_workflow(yaml, "wide.yml");
    CHECK(workflow.has_value());
}

TEST_CASE("matrices computed by expressions") {
    auto whole = jobs::evaluate_matrix(
        matrix_node("matrix: ${{ fromJSON(needs.prep.outputs.m) }}\n"),
        context_with(R"({"prep":{"outputs":{"m":"{\"package\":[\"a\",\"b\"]}"}}})"));
    REQUIRE(whole.has_value());
    auto legs = jobs::expand_matrix(*whole);
    REQUIRE(legs.has_value());
    CHECK(combos(*legs) == "{\"package\":\"a\"}\n{\"package\":\"b\"}\n");

    // act's evalmatrix-merge-array: an item that evaluates to an array is spliced in.
    auto merged = jobs::evaluate_matrix(matrix_node(R"(matrix:
  a:
  - env:
      key1: ${{'val'}}1
  - ${{fromJSON('[{"env":{"key2":"val2"}},{"env":{"key3":"val3"}}]')}}
)"),
                                        context_with());
    REQUIRE(merged.has_value());
    auto merged_legs = jobs::expand_matrix(*merged);
    REQUIRE(merged_legs.has_value());
    CHECK(combos(*merged_legs) ==
          "{\"a\":{\"env\":{\"key1\":\"val1\"}}}\n{\"a\":{\"env\":{\"key2\":\"val2\"}}}\n"
          "{\"a\":{\"env\":{\"key3\":\"val3\"}}}\n");

    auto bad = jobs::evaluate_matrix(matrix_node("matrix: ${{ fromJSON('{') }}\n"), context_with());
    REQUIRE_FALSE(bad.has_value());
    CHECK(bad.error().message.starts_with("m.yml:1:9: "));
}

TEST_CASE("--matrix filters keep the legs whose values were named") {
    auto legs =
        jobs::expand_matrix(json(R"({"os":["ubuntu-18.04","macos-latest"],"node":[4,6,8,10]})"));
    REQUIRE(legs.has_value());
    auto kept =
        jobs::filter_matrix(*legs, {{"node", "8"}, {"node", "8.x"}, {"os", "ubuntu-18.04"}});
    CHECK(combos(kept) == "{\"os\":\"ubuntu-18.04\",\"node\":8}\n");
    auto other = jobs::expand_matrix(json(R"({"node":["8.x","10.x"]})"));
    CHECK(jobs::filter_matrix(*other, {{"node", "8"}, {"node", "8.x"}, {"os", "ubuntu-18.04"}})
              .size() == 1);
    CHECK(jobs::filter_matrix(*legs, {}).size() == 8);
}
