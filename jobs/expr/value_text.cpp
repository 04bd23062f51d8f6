// Text rules of the value model: GitHub's number printing, JavaScript's Number(), and the
// case fold used for keys and comparisons.
#include <locale.h>
#include <wctype.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

#include "jobs/expr/value.hpp"

namespace jobs {

// ---- numbers ----

namespace {

// JavaScript's Number.prototype.toFixed(15) then Number(): rounds half away from zero on the
// exact decimal expansion of the double (printf's own rounding is half-even, hence by hand).
double round_to_15_decimals(double number) {
    char exact[1200];
    std::snprintf(exact, sizeof exact, "%.1100f", std::fabs(number));
    std::string text(exact);
    const auto dot = text.find('.');
    const bool round_up = text.size() > dot + 16 && text[dot + 16] >= '5';
    text.resize(dot + 16);
    if (round_up) {
        std::size_t i = text.size();
        while (i-- > 0) {
            if (text[i] == '.') continue;
            if (text[i] == '9') {
                text[i] = '0';
                continue;
            }
            ++text[i];
            break;
        }
        if (i == static_cast<std::size_t>(-1)) text.insert(text.begin(), '1');
    }
    double rounded = 0;
    std::from_chars(text.data(), text.data() + text.size(), rounded);
    return std::signbit(number) ? -rounded : rounded;
}

// ECMAScript Number::toString for a finite, non-zero number.
std::string javascript_number(double number) {
    char buffer[64];
    const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, std::fabs(number),
                                         std::chars_format::scientific);
    (void)ec;
    const std::string_view text(buffer, static_cast<std::size_t>(end - buffer));
    const auto e_pos = text.find('e');
    std::string digits;
    for (char c : text.substr(0, e_pos)) {
        if (c != '.') digits.push_back(c);
    }
    int exponent = 0;
    const auto exp_text = text.substr(e_pos + 1);
    std::from_chars(exp_text.data() + (exp_text[0] == '+' ? 1 : 0),
                    exp_text.data() + exp_text.size(), exponent);
    const int k = static_cast<int>(digits.size());
    const int n = exponent + 1;  // value = 0.digits * 10^n
    std::string out = number < 0 ? "-" : "";
    if (k <= n && n <= 21) {
        out += digits + std::string(static_cast<std::size_t>(n - k), '0');
    } else if (0 < n && n <= 21) {
        out += digits.substr(0, static_cast<std::size_t>(n)) + "." +
               digits.substr(static_cast<std::size_t>(n));
    } else if (-6 < n && n <= 0) {
        out += "0." + std::string(static_cast<std::size_t>(-n), '0') + digits;
    } else {
        out += digits.substr(0, 1);
        if (k > 1) out += "." + digits.substr(1);
        out += (n - 1 >= 0 ? "e+" : "e-") + std::to_string(std::abs(n - 1));
    }
    return out;
}

}  // namespace

std::string format_number(double number) {
    if (std::isnan(number)) return "NaN";
    if (std::isinf(number)) return number < 0 ? "-Infinity" : "Infinity";
    if (number == 0) return "0";
    if (std::fabs(number) < 1e21) number = round_to_15_decimals(number);
    if (number == 0) return "0";
    return javascript_number(number);
}

namespace {

// The length of a JavaScript white space or line terminator at the front of `text`, or 0.
std::size_t whitespace_length(std::string_view text) {
    if (text.empty()) return 0;
    const auto c = static_cast<unsigned char>(text[0]);
    if (c == ' ' || (c >= '\t' && c <= '\r')) return 1;
    if (c != 0xC2 && c != 0xE1 && c != 0xE2 && c != 0xE3 && c != 0xEF)
        return 0;  // lead bytes below
    static constexpr std::string_view k_multibyte[] = {
        "\u00a0", "\u1680", "\u2000", "\u2001", "\u2002", "\u2003", "\u2004",
        "\u2005", "\u2006", "\u2007", "\u2008", "\u2009", "\u200a", "\u2028",
        "\u2029", "\u202f", "\u205f", "\u3000", "\ufeff"};
    for (auto space : k_multibyte) {
        if (text.starts_with(space)) return space.size();
    }
    return 0;
}

std::string_view trim_javascript(std::string_view text) {
    while (auto length = whitespace_length(text)) text.remove_prefix(length);
    // Trailing: scan forward remembering where the last non-space run ended.
    std::size_t end = 0;
    std::size_t i = 0;
    while (i < text.size()) {
        if (auto length = whitespace_length(text.substr(i))) {
            i += length;
        } else {
            end = ++i;
        }
    }
    return text.substr(0, end);
}

double parse_radix(std::string_view digits, int radix) {
    if (digits.empty()) return std::numeric_limits<double>::quiet_NaN();
    double value = 0;
    for (char c : digits) {
        int digit = -1;
        if (c >= '0' && c <= '9')
            digit = c - '0';
        else if (c >= 'a' && c <= 'z')
            digit = c - 'a' + 10;
        else if (c >= 'A' && c <= 'Z')
            digit = c - 'A' + 10;
        if (digit < 0 || digit >= radix) return std::numeric_limits<double>::quiet_NaN();
        value = value * radix + digit;
    }
    return value;
}

bool is_decimal_literal(std::string_view text) {
    std::size_t i = 0;
    std::size_t int_digits = 0;
    std::size_t frac_digits = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i, ++int_digits;
    if (i < text.size() && text[i] == '.') {
        ++i;
        while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])))
            ++i, ++frac_digits;
    }
    if (int_digits + frac_digits == 0) return false;
    if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
        ++i;
        if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
        std::size_t exp_digits = 0;
        while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])))
            ++i, ++exp_digits;
        if (exp_digits == 0) return false;
    }
    return i == text.size();
}

}  // namespace

double parse_number(std::string_view text) {
    constexpr double k_nan = std::numeric_limits<double>::quiet_NaN();
    text = trim_javascript(text);
    if (text.empty()) return 0;
    if (text.size() > 2 && text[0] == '0') {
        switch (text[1]) {
            case 'x':
            case 'X':
                return parse_radix(text.substr(2), 16);
            case 'o':
            case 'O':
                return parse_radix(text.substr(2), 8);
            case 'b':
            case 'B':
                return parse_radix(text.substr(2), 2);
            default:
                break;
        }
    }
    bool negative = false;
    if (text[0] == '+' || text[0] == '-') {
        negative = text[0] == '-';
        text.remove_prefix(1);
    }
    double value = 0;
    if (text == "Infinity") {
        value = std::numeric_limits<double>::infinity();
    } else if (is_decimal_literal(text)) {
        // from_chars: locale-independent; out-of-range reports result_out_of_range with the
        // value unset, so overflow is handled here.
        auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        (void)ptr;
        if (ec == std::errc::result_out_of_range) {
            const auto e = text.find_first_of("eE");
            const bool tiny = e != std::string_view::npos && text.substr(e + 1).starts_with('-');
            value = tiny ? 0.0 : std::numeric_limits<double>::infinity();
        }
    } else {
        return k_nan;
    }
    return negative ? -value : value;
}

// ---- case folding ----

namespace {

locale_t utf8_locale() {
    static const locale_t locale = [] {
        locale_t made = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(nullptr));
        return made != static_cast<locale_t>(nullptr) ? made : duplocale(LC_GLOBAL_LOCALE);
    }();
    return locale;
}

// Decodes one UTF-8 sequence; returns its length, or 0 when invalid (the byte passes through).
std::size_t decode_utf8(std::string_view text, char32_t& code_point) {
    const auto b0 = static_cast<unsigned char>(text[0]);
    std::size_t length = b0 < 0x80         ? 1
                         : (b0 >> 5) == 6  ? 2
                         : (b0 >> 4) == 14 ? 3
                         : (b0 >> 3) == 30 ? 4
                                           : 0;
    if (length == 0 || length > text.size()) return 0;
    code_point = length == 1 ? b0 : b0 & (0x7F >> length);
    for (std::size_t i = 1; i < length; ++i) {
        const auto b = static_cast<unsigned char>(text[i]);
        if ((b & 0xC0) != 0x80) return 0;
        code_point = (code_point << 6) | (b & 0x3F);
    }
    return length;
}

void encode_utf8(char32_t cp, std::string& out) {
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

}  // namespace

std::string fold_case(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    std::size_t i = 0;
    while (i < text.size()) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c < 0x80) {
            out.push_back(c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : static_cast<char>(c));
            ++i;
            continue;
        }
        char32_t cp = 0;
        const auto length = decode_utf8(text.substr(i), cp);
        if (length == 0) {
            out.push_back(static_cast<char>(c));
            ++i;
            continue;
        }
        if (cp != 0x131) {  // the dotless i stays itself, as in GitHub's engine
            cp = static_cast<char32_t>(towupper_l(static_cast<wint_t>(cp), utf8_locale()));
        }
        encode_utf8(cp, out);
        i += length;
    }
    return out;
}

bool equals_ignore_case(std::string_view left, std::string_view right) {
    // ASCII fast path: byte-wise until a non-ASCII byte shows up.
    std::size_t i = 0;
    for (; i < left.size() && i < right.size(); ++i) {
        const auto a = static_cast<unsigned char>(left[i]);
        const auto b = static_cast<unsigned char>(right[i]);
        if (a >= 0x80 || b >= 0x80) break;
        const auto fa = a >= 'a' && a <= 'z' ? a - 32 : a;
        const auto fb = b >= 'a' && b <= 'z' ? b - 32 : b;
        if (fa != fb) return false;
    }
    if (i == left.size() && i == right.size()) return true;
    if (i == left.size() || i == right.size()) return false;
    return fold_case(left.substr(i)) == fold_case(right.substr(i));
}

}  // namespace jobs
