#pragma once
// The one set of small ASCII string helpers of the code base (sandgate's base library):
// trimming ASCII white space and case-insensitive comparison of ASCII names (HTTP headers,
// workflow command names, host names). Expression values compare with jobs'
// equals_ignore_case, which also folds Unicode as GitHub's evaluator does.

#include <algorithm>
#include <string>
#include <string_view>

namespace common {

inline constexpr std::string_view k_ascii_space = " \t\r\n\f\v";

// `text` without leading and trailing ASCII white space (" \t\r\n\f\v").
constexpr std::string_view trim(std::string_view text) {
    const auto first = text.find_first_not_of(k_ascii_space);
    if (first == std::string_view::npos) return {};
    return text.substr(first, text.find_last_not_of(k_ascii_space) - first + 1);
}

constexpr char ascii_lower(char c) {
    return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

// Equal but for the case of ASCII letters; other bytes compare exactly.
constexpr bool ascii_iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return ascii_lower(x) == ascii_lower(y);
           });
}

inline std::string ascii_lowercase(std::string_view text) {
    std::string out(text);
    std::transform(out.begin(), out.end(), out.begin(), ascii_lower);
    return out;
}

}  // namespace common
