#pragma once
// Parsing numbers in tests without calls that throw (the code base's rule holds for its tests
// too): the number std::from_chars reads at the start of the text (after blanks); nullopt
// when there is none.

#include <charconv>
#include <optional>
#include <string_view>

namespace tests {

template <class Number>
std::optional<Number> to_number(std::string_view text, int base = 10) {
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
    Number value{};
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value, base);
    if (error != std::errc() || end == text.data()) return std::nullopt;
    return value;
}

}  // namespace tests
