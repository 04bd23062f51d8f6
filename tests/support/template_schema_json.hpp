#pragma once
// Reads GitHub's template schema files (../shared/corpora/workflow-schema/*.json) for the
// schema cross-check (tests/unit/jobs/test_template_schema.cpp) and generates the embedded tables
// (jobs/workflow/template_schema_tables.cpp) with `sandgate-schema-gen`.
//
// Any field of the format this reader does not know is an error, so that a schema using a
// new feature fails the cross-check instead of being half-read.

#include <map>
#include <string>
#include <string_view>

namespace tests {

struct SchemaFile {
    std::string version;
    // Definition name -> jobs::schema::describe()'s form of it, in file order of names.
    std::map<std::string, std::string> described;
    std::string error;  // set when the file is not a template schema this reader knows
};

SchemaFile read_schema_file(const std::string& json_text);

// The C++ source of jobs/workflow/template_schema_tables.cpp for the two schema files.
std::string generate_schema_tables(const std::string& workflow_json,
                                   const std::string& action_json);

}  // namespace tests
