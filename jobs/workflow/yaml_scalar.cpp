// The YAML 1.2 core schema as GitHub's reader applies it (yaml_scalar.hpp), and the one-line
// form of every workflow error.
#include "jobs/workflow/yaml_scalar.hpp"

#include <charconv>
#include <cstdint>
#include <limits>
#include <string>

#include "jobs/workflow/yaml_tree.hpp"

namespace jobs {
namespace yaml_detail {
namespace {

bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

bool all_of(std::string_view text, bool (*predicate)(char)) {
    for (char c : text) {
        if (!predicate(c)) return false;
    }
    return true;
}

// A decimal number as IEEE double: overflow reads as an infinity and underflow as zero, as
// .NET's Double.TryParse and JavaScript's Number() read them.
double decimal_value(std::string_view text) {
    const bool negative = !text.empty() && text[0] == '-';
    if (!text.empty() && (text[0] == '+' || text[0] == '-')) text.remove_prefix(1);
    double value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec == std::errc::result_out_of_range) {
        // Overflow or underflow: a large exponent or many integer digits overflow.
        const auto e = text.find_first_of("eE");
        const std::string_view mantissa = text.substr(0, e);
        long exponent = 0;
        if (e != std::string_view::npos) {
            std::string_view digits = text.substr(e + 1);
            const bool exponent_negative = !digits.empty() && digits[0] == '-';
            if (!digits.empty() && (digits[0] == '-' || digits[0] == '+')) digits.remove_prefix(1);
            long parsed = 0;
            const auto [p, err] =
                std::from_chars(digits.data(), digits.data() + digits.size(), parsed);
            (void)p;
            exponent = err == std::errc::result_out_of_range ? std::numeric_limits<long>::max() / 2
                                                             : parsed;
            if (exponent_negative) exponent = -exponent;
        }
        const auto dot = mantissa.find('.');
        const std::string_view integer = mantissa.substr(0, dot);
        const auto first = integer.find_first_not_of('0');
        const long magnitude =
            first == std::string_view::npos ? -1 : static_cast<long>(integer.size() - first);
        value = (magnitude > 0 && exponent > -magnitude) || exponent > 0
                    ? std::numeric_limits<double>::infinity()
                    : 0.0;
    } else if (ec != std::errc() || end != text.data() + text.size()) {
        value = 0;
    }
    return negative ? -value : value;
}

// A radix-16 or radix-8 integer of at most 32 bits, read as .NET's Int32 parsers do (two's
// complement: 0xFFFFFFFF is -1). False when it holds more than 32 bits.
bool radix_int32(std::string_view digits, int radix, double& value) {
    std::uint64_t accumulated = 0;
    for (char c : digits) {
        const int digit = is_digit(c) ? c - '0' : (c | 0x20) - 'a' + 10;
        accumulated = accumulated * static_cast<unsigned>(radix) + static_cast<unsigned>(digit);
        if (accumulated > 0xFFFFFFFFULL) return false;
    }
    value = static_cast<double>(static_cast<std::int32_t>(static_cast<std::uint32_t>(accumulated)));
    return true;
}

bool is_hex(char c) {
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

bool is_octal(char c) {
    return c >= '0' && c <= '7';
}

}  // namespace

bool is_null_text(std::string_view t) {
    return t.empty() || t == "~" || t == "null" || t == "Null" || t == "NULL";
}

bool is_true_text(std::string_view t) {
    return t == "true" || t == "True" || t == "TRUE";
}

bool is_false_text(std::string_view t) {
    return t == "false" || t == "False" || t == "FALSE";
}

// C#'s MatchFloat.
bool match_float(std::string_view s, double& value) {
    if (s.empty()) return false;
    if (s == ".inf" || s == ".Inf" || s == ".INF" || s == "+.inf" || s == "+.Inf" || s == "+.INF") {
        value = std::numeric_limits<double>::infinity();
        return true;
    }
    if (s == "-.inf" || s == "-.Inf" || s == "-.INF") {
        value = -std::numeric_limits<double>::infinity();
        return true;
    }
    if (s == ".nan" || s == ".NaN" || s == ".NAN") {
        value = std::numeric_limits<double>::quiet_NaN();
        return true;
    }
    std::size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0;
    bool has_integer = false, has_dot = false, has_decimal = false;
    while (i < s.size() && is_digit(s[i])) has_integer = true, ++i;
    if (i < s.size() && s[i] == '.') has_dot = true, ++i;
    while (i < s.size() && is_digit(s[i])) has_decimal = true, ++i;
    if (!((has_dot && has_decimal) || has_integer)) return false;
    if (i < s.size()) {
        if (s[i] != 'e' && s[i] != 'E') return false;
        ++i;
        if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
        bool has_exponent = false;
        while (i < s.size() && is_digit(s[i])) has_exponent = true, ++i;
        if (!has_exponent || i != s.size()) return false;
    }
    value = decimal_value(s);
    return true;
}

// C#'s MatchInteger.
bool match_integer(std::string_view s, double& value, bool& range_error) {
    if (s.empty()) return false;
    if (all_of(s, is_digit) ||
        ((s[0] == '-' || s[0] == '+') && s.size() > 1 && all_of(s.substr(1), is_digit))) {
        value = decimal_value(s);
        return true;
    }
    if (s.size() > 2 && s[0] == '0' && s[1] == 'x' && all_of(s.substr(2), is_hex)) {
        range_error = !radix_int32(s.substr(2), 16, value);
        return true;
    }
    if (s.size() > 2 && s[0] == '0' && s[1] == 'o' && all_of(s.substr(2), is_octal)) {
        range_error = !radix_int32(s.substr(2), 8, value);
        return true;
    }
    return false;
}

}  // namespace yaml_detail

std::string one_line(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    static constexpr char k_hex[] = "0123456789abcdef";
    for (char c : text) {
        const auto byte = static_cast<unsigned char>(c);
        if (byte >= 0x20 && byte != 0x7f) {
            out.push_back(c);
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c == '\r') {
            out += "\\r";
        } else {
            out += "\\x";
            out.push_back(k_hex[byte >> 4]);
            out.push_back(k_hex[byte & 15]);
        }
    }
    return out;
}

std::string to_string(const SourceMark& mark) {
    if (mark.line == 0) return one_line(mark.file);
    return one_line(mark.file) + ":" + std::to_string(mark.line) + ":" +
           std::to_string(mark.column);
}

std::string located(const SourceMark& mark, std::string_view message) {
    return to_string(mark) + ": " + one_line(message);
}

YamlNode::ScalarType resolve_plain_scalar(std::string_view text, double* value,
                                          bool* out_of_range) {
    using namespace yaml_detail;
    if (is_null_text(text)) return YamlNode::ScalarType::null;
    if (is_true_text(text) || is_false_text(text)) return YamlNode::ScalarType::boolean;
    double number = 0;
    bool range_error = false;
    if (match_integer(text, number, range_error) || match_float(text, number)) {
        if (value != nullptr) *value = number;
        if (out_of_range != nullptr) *out_of_range = range_error;
        return YamlNode::ScalarType::number;
    }
    return YamlNode::ScalarType::string;
}

}  // namespace jobs
