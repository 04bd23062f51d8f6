#pragma once
// The inputs of a builtin action's step (`with:`), read the way @actions/core reads them:
// trimmed, multi-line ones split into non-blank lines, booleans "true" in any case.

#include <string>
#include <string_view>
#include <vector>

#include "jobs/expr/value.hpp"             // equals_ignore_case
#include "jobs/run/workflow_commands.hpp"  // NamedValues, find_named

namespace jobs {

inline std::string trimmed_input(std::string_view text) {
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r'))
        text.remove_suffix(1);
    return std::string(text);
}

// getInput: the trimmed value, `fallback` when unset or blank.
inline std::string input_text(const NamedValues& with, std::string_view name,
                              std::string fallback = {}) {
    const std::string* text = find_named(with, name);
    if (text == nullptr) return fallback;
    auto value = trimmed_input(*text);
    return value.empty() ? fallback : value;
}

// getMultilineInput: each line trimmed, blank lines left out.
inline std::vector<std::string> input_lines(const NamedValues& with, std::string_view name) {
    std::vector<std::string> out;
    const std::string* text = find_named(with, name);
    if (text == nullptr) return out;
    std::string_view rest = *text;
    for (;;) {
        const auto newline = rest.find('\n');
        if (auto line = trimmed_input(rest.substr(0, newline)); !line.empty())
            out.push_back(std::move(line));
        if (newline == std::string_view::npos) break;
        rest.remove_prefix(newline + 1);
    }
    return out;
}

inline bool input_true(const NamedValues& with, std::string_view name) {
    return equals_ignore_case(input_text(with, name), "true");
}

}  // namespace jobs
