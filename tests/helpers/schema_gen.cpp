// sandgate-schema-gen DIR: prints jobs/workflow/template_schema_tables.cpp for the template schemas
// in DIR (workflow-v1.0.json and action-v1.0.json), as read by tests/support/template_schema_json.
#include <cstdio>
#include <exception>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/support/template_schema_json.hpp"

namespace {

std::string read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + path);
    std::ostringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr,
                     "usage: sandgate-schema-gen DIR (../shared/corpora/workflow-schema)\n");
        return 2;
    }
    try {
        const std::string dir = argv[1];
        const std::string source = tests::generate_schema_tables(read(dir + "/workflow-v1.0.json"),
                                                                 read(dir + "/action-v1.0.json"));
        std::fwrite(source.data(), 1, source.size(), stdout);
        return 0;
    } catch (const std::exception& error) {
        std::fprintf(stderr, "sandgate-schema-gen: %s\n", error.what());
        return 1;
    }
}
