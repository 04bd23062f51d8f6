// The schema cross-check: GitHub's template schemas in ../shared/corpora/workflow-schema are
// the oracle of what GitHub accepts; sandgate validates against tables generated from them
// (jobs/workflow/template_schema_tables.cpp). This walks every definition of both files and fails
// on any the tables describe differently, or that one side lacks, so new GitHub syntax shows up
// here; it also holds the definitions sandgate's code names to what the code assumes.
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "jobs/workflow/template_schema.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/template_schema_json.hpp"

namespace {

const std::filesystem::path k_dir =
    std::filesystem::path(SANDGATE_SHARED_DIR) / "corpora/workflow-schema";

// Every difference between the file and the tables, one per line.
std::string differences(const tests::SchemaFile& file, const jobs::schema::Schema& schema) {
    std::string out;
    if (file.version != schema.version)
        out += "version: the file has '" + file.version + "', the tables '" +
               std::string(schema.version) + "'\n";
    for (const auto& [name, described] : file.described) {
        const auto* definition = schema.find(name);
        if (definition == nullptr || definition->name != name) {
            out += name + ": in the schema, not in sandgate's tables\n";
        } else if (jobs::schema::describe(*definition) != described) {
            out += name + ":\n  schema:  " + described +
                   "\n  sandgate: " + jobs::schema::describe(*definition) + "\n";
        }
    }
    for (const auto& definition : schema.definitions) {
        if (!file.described.contains(std::string(definition.name)))
            out += std::string(definition.name) + ": in sandgate's tables, not in the schema\n";
    }
    return out;
}

void check_file(const std::string& file_name, const jobs::schema::Schema& schema) {
    const auto file = tests::read_schema_file(tests::read_file(k_dir / file_name));
    INFO(file_name);
    REQUIRE(file.error.empty());
    REQUIRE(file.described.size() > 20);
    const std::string diff = differences(file, schema);
    INFO(
        "sandgate's tables disagree with GitHub's schema; regenerate them with\n"
        "  build/tests/sandgate-schema-gen ../shared/corpora/workflow-schema > "
        "jobs/workflow/template_schema_tables.cpp\n"
        "and make the code follow what changed:\n"
        << diff);
    CHECK(diff.empty());
}

std::string event_string_definition(std::string_view event) {
    std::string name(event);
    for (char& c : name) c = c == '_' ? '-' : c;
    return name + "-string";
}

}  // namespace

TEST_CASE("sandgate's workflow tables agree with every definition of GitHub's workflow schema") {
    check_file("workflow-v1.0.json", jobs::schema::workflow_schema());
}

TEST_CASE("sandgate's action tables agree with every definition of GitHub's action schema") {
    check_file("action-v1.0.json", jobs::schema::action_schema());
}

TEST_CASE("the definitions sandgate's parsers name exist with the shape they assume") {
    const auto& workflow = jobs::schema::workflow_schema();
    const auto& action = jobs::schema::action_schema();
    // Roots and the definitions read on their own (workflow_model.cpp, action_model.cpp).
    for (const char* name : {"workflow-root", "on-mapping-strict", "workflow-dispatch-inputs",
                             "job-if", "step-if", "snapshot-if", "on-string-strict"})
        CHECK(workflow.find(name) != nullptr);
    for (const char* name : {"action-root", "step-if", "using"})
        CHECK(action.find(name) != nullptr);
    CHECK(action.find("using")->kind == jobs::schema::Kind::allowed_values);
    // Each event's name form is `<event>-string`, a constant equal to the event: the parser
    // takes the names from on-mapping-strict instead (one constant is wrong upstream, and this
    // keeps it the only one).
    const auto* events = workflow.find("on-mapping-strict");
    REQUIRE(events != nullptr);
    for (const auto& event : events->properties) {
        const auto* named = workflow.find(event_string_definition(event.name));
        INFO(event.name);
        REQUIRE(named != nullptr);
        if (event.name == "repository_dispatch") {
            CHECK(named->constant == "branch_protection_rule");  // the upstream typo, tolerated
        } else {
            CHECK(named->constant == event.name);
        }
    }
    // The background-step properties the reader refuses while GitHub's feature is off.
    const auto* regular = workflow.find("regular-step");
    REQUIRE(regular != nullptr);
    CHECK(std::ranges::any_of(regular->properties,
                              [](const auto& p) { return p.name == "background"; }));
}
