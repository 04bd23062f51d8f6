#pragma once
// NAME=VALUE options (--env, --var, --input, -s): one way to declare them and one parser.

#include <string>
#include <utility>
#include <vector>

#include "agent/cli/cli11.hpp"
#include "common/error.hpp"

namespace agent {

using Assignment = std::pair<std::string, std::string>;

// Where a bare `NAME` (no '=') takes its value from: nowhere (an error), or the agent's own
// environment (`-s NAME` as act and `gh secret set` read it).
enum class BareName { refused, from_environment };

// A repeatable NAME=VALUE option taking one value per occurrence: a vector option would
// otherwise swallow what follows, `--` included, and hand a command's own options to CLI11.
CLI::Option* add_assignment_option(CLI::App& app, const std::string& name,
                                   std::vector<std::string>& values, const std::string& help);

// NAME=VALUE (`flag` names the option in errors): invalid_input for an empty NAME, or for a
// bare NAME that `bare` refuses or that is not set in the environment.
common::Expected<Assignment> parse_assignment(const std::string& text, const std::string& flag,
                                              BareName bare);

// Every value of one option, in order; the first bad one is the error.
common::Expected<std::vector<Assignment>> parse_assignments(const std::vector<std::string>& texts,
                                                            const std::string& flag, BareName bare);

}  // namespace agent
