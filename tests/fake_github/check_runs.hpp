#pragma once
// What the GitHub stand-in holds of check runs, read from its /_control/state document: for the
// tests of the agent and its reporting, which compare the statuses GitHub would show.

#include <simdjson.h>

#include <string>
#include <string_view>
#include <vector>

#include "tests/fake_github/fake_github.hpp"

namespace tests {

// The status of each check run the stand-in holds, in creation order. A state document that does
// not parse yields the single entry "<unparsable state>", so a comparison fails visibly.
inline std::vector<std::string> check_run_statuses(const FakeGitHub& server) {
    simdjson::dom::parser parser;
    const std::string text = server.state();
    simdjson::dom::element root;
    simdjson::dom::array runs;
    if (parser.parse(text).get(root) != simdjson::SUCCESS ||
        root["check_runs"].get_array().get(runs) != simdjson::SUCCESS)
        return {"<unparsable state>"};
    std::vector<std::string> out;
    for (auto run : runs) {
        std::string_view status;
        out.emplace_back(
            run["status"].get_string().get(status) == simdjson::SUCCESS ? status : "<no status>");
    }
    return out;
}

}  // namespace tests
