#include "agent/cli/units.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <string>

namespace agent {
namespace {

using common::ErrorKind;
using common::fail;

// Reads a non-negative decimal (with an optional fraction) at text[i...].
bool read_number(std::string_view text, std::size_t& i, double& value) {
    const std::size_t start = i;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
        ++i;
    if (i == start) return false;
    const std::string digits(text.substr(start, i - start));
    if (digits.find('.') != digits.rfind('.') || digits == ".") return false;
    // from_chars: no exception and no locale; a value too large for a double is refused.
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    return ec == std::errc() && end == digits.data() + digits.size();
}

}  // namespace

common::Expected<std::chrono::milliseconds> parse_duration(std::string_view text) {
    const auto bad = [&] {
        return fail(ErrorKind::invalid_input,
                    "invalid duration '" + std::string(text) + "' (expected e.g. 90s, 5m, 1h)");
    };
    if (text.empty()) return bad();
    double total_ms = 0;
    std::size_t i = 0;
    while (i < text.size()) {
        double value = 0;
        if (!read_number(text, i, value)) return bad();
        const std::size_t unit_start = i;
        while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
        const std::string_view unit = text.substr(unit_start, i - unit_start);
        double scale = 0;
        if (unit == "ms")
            scale = 1;
        else if (unit == "s" || (unit.empty() && unit_start == text.size() && total_ms == 0))
            scale = 1000;
        else if (unit == "m")
            scale = 60'000;
        else if (unit == "h")
            scale = 3'600'000;
        else
            return bad();
        total_ms += value * scale;
    }
    if (!std::isfinite(total_ms) || total_ms > 1e15) return bad();
    return std::chrono::milliseconds(static_cast<long long>(std::llround(total_ms)));
}

common::Expected<std::uint64_t> parse_bytes(std::string_view text) {
    const auto bad = [&] {
        return fail(ErrorKind::invalid_input, "invalid size '" + std::string(text) +
                                                  "' (expected e.g. 262144, 256K, 64M, 2G)");
    };
    std::size_t i = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
    std::uint64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + i, value);
    if (i == 0 || ec != std::errc() || end != text.data() + i) return bad();
    std::string unit(text.substr(i));
    for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (unit.ends_with("IB"))
        unit.erase(unit.size() - 2);
    else if (unit.size() == 2 && unit.back() == 'B')
        unit.pop_back();
    int shift = 0;
    if (unit.empty() || unit == "B")
        shift = 0;
    else if (unit == "K")
        shift = 10;
    else if (unit == "M")
        shift = 20;
    else if (unit == "G")
        shift = 30;
    else if (unit == "T")
        shift = 40;
    else
        return bad();
    if (shift > 0 && value > (std::numeric_limits<std::uint64_t>::max() >> shift)) return bad();
    return value << shift;
}

}  // namespace agent
