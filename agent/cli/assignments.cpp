#include "agent/cli/assignments.hpp"

#include <cstdlib>

namespace agent {

using common::ErrorKind;
using common::fail;

CLI::Option* add_assignment_option(CLI::App& app, const std::string& name,
                                   std::vector<std::string>& values, const std::string& help) {
    return app.add_option(name, values, help)->allow_extra_args(false);
}

common::Expected<Assignment> parse_assignment(const std::string& text, const std::string& flag,
                                              BareName bare) {
    const auto eq = text.find('=');
    const std::string name = text.substr(0, eq);
    if (name.empty())
        return fail(ErrorKind::invalid_input, flag + " " + text + ": expected NAME=VALUE");
    if (eq != std::string::npos) return Assignment{name, text.substr(eq + 1)};
    if (bare == BareName::refused)
        return fail(ErrorKind::invalid_input, flag + " " + text + ": expected NAME=VALUE");
    const char* value = std::getenv(name.c_str());
    if (value == nullptr)
        return fail(ErrorKind::invalid_input,
                    flag + " " + name + ": no value given and $" + name + " is not set");
    return Assignment{name, std::string(value)};
}

common::Expected<std::vector<Assignment>> parse_assignments(const std::vector<std::string>& texts,
                                                            const std::string& flag,
                                                            BareName bare) {
    std::vector<Assignment> pairs;
    pairs.reserve(texts.size());
    for (const auto& text : texts)
        pairs.push_back(SANDGATE_TRY(parse_assignment(text, flag, bare)));
    return pairs;
}

}  // namespace agent
