#include "jobs/run/masker.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <mutex>
#include <utility>

#include "common/strings.hpp"
#include "common/xml_escape.hpp"

namespace jobs {
namespace {

using common::trim;

std::string json_escape(std::string_view value) {
    static constexpr char k_hex[] = "0123456789abcdef";
    std::string out;
    for (const char c : value) {
        const auto byte = static_cast<unsigned char>(c);
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            case '\b':
                out += "\\b";
                break;
            case '\f':
                out += "\\f";
                break;
            default:
                if (byte < 0x20) {
                    out += "\\u00";
                    out += k_hex[byte >> 4];
                    out += k_hex[byte & 0xF];
                } else {
                    out += c;
                }
        }
    }
    return out;
}

// Base64 of the value without the characters that depend on what follows it in a longer
// blob (padding and the last partial sextet), so the secret is found inside encoded text.
std::string base64_stable_prefix(std::string_view value) {
    static constexpr char k_alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    std::size_t i = 0;
    for (; i + 3 <= value.size(); i += 3) {
        const std::uint32_t n = (static_cast<unsigned char>(value[i]) << 16) |
                                (static_cast<unsigned char>(value[i + 1]) << 8) |
                                static_cast<unsigned char>(value[i + 2]);
        for (int shift = 18; shift >= 0; shift -= 6) out += k_alphabet[(n >> shift) & 0x3F];
    }
    const std::size_t rest = value.size() - i;
    if (rest > 0) {
        std::uint32_t n = static_cast<unsigned char>(value[i]) << 16;
        if (rest == 2) n |= static_cast<unsigned char>(value[i + 1]) << 8;
        out += k_alphabet[(n >> 18) & 0x3F];  // fully determined by the first byte
        if (rest == 2) out += k_alphabet[(n >> 12) & 0x3F];
    }
    return out;
}

// Replaces each `from` byte of `value` by `to`.
std::string replaced(std::string_view value, char from, std::string_view to) {
    std::string out;
    for (const char c : value) {
        if (c == from)
            out += to;
        else
            out += c;
    }
    return out;
}

// The value as a shell prints it quoted: bash's `printf %q` (a backslash before each byte the
// shell would take specially); single-quoting (`set -x`, `'...'`) changes only `'` (see below).
std::string shell_backslash_escape(std::string_view value) {
    static constexpr std::string_view k_special = " \t\n!\"#$&'()*,;<=>?[\\]^`{|}~";
    std::string out;
    for (const char c : value) {
        if (k_special.find(c) != std::string_view::npos) out += '\\';
        out += c;
    }
    return out;
}

std::string url_escape(std::string_view value) {
    static constexpr char k_hex[] = "0123456789ABCDEF";
    std::string out;
    for (const char c : value) {
        const auto byte = static_cast<unsigned char>(c);
        const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                                (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
                                c == '~';
        if (unreserved) {
            out += c;
        } else {
            out += '%';
            out += k_hex[byte >> 4];
            out += k_hex[byte & 0xF];
        }
    }
    return out;
}

std::vector<std::string_view> split_lines(std::string_view text) {
    std::vector<std::string_view> lines;
    std::size_t start = 0;
    while (start <= text.size()) {
        const auto end = text.find_first_of("\r\n", start);
        const auto piece =
            text.substr(start, end == std::string_view::npos ? text.npos : end - start);
        lines.push_back(piece);
        if (end == std::string_view::npos) break;
        start = end + 1;
    }
    return lines;
}

using Range = std::pair<std::size_t, std::size_t>;  // [begin, end)

std::uint32_t pair_key(unsigned char first, unsigned char second) {
    return (static_cast<std::uint32_t>(first) << 8) | second;
}

// The encodings a secret is registered in besides itself, as the runner's ValueEncoders
// (Runner.Common/HostContext.cs registers them): base64 at each of the three alignments the
// secret can have inside a longer blob (Base64StringEscape, ...Shift1, ...Shift2: `user:` in
// Basic auth puts it at any), each without the characters that depend on what surrounds it;
// CommandLineArgumentEscape, ExpressionStringEscape, JsonStringEscape, UriDataEscape,
// XmlDataEscape, TrimDoubleQuotes; and the shell's quoted forms.
std::vector<std::string> encodings(const std::string& value) {
    std::vector<std::string> out;
    out.push_back(base64_stable_prefix(value));
    if (value.size() > 1) out.push_back(base64_stable_prefix(std::string_view(value).substr(1)));
    if (value.size() > 2) out.push_back(base64_stable_prefix(std::string_view(value).substr(2)));
    out.push_back(replaced(value, '"', "\\\""));
    out.push_back(replaced(value, '\'', "''"));
    out.push_back(json_escape(value));
    out.push_back(url_escape(value));
    out.push_back(common::xml_escape(value));  // the runner's XmlDataEscape
    if (value.size() > 8 && value.front() == '"' && value.back() == '"')
        out.push_back(value.substr(1, value.size() - 2));
    out.push_back(replaced(value, '\'', "'\\''"));
    out.push_back(shell_backslash_escape(value));
    return out;
}

}  // namespace

bool Masker::add_secret(std::string_view value) {
    const auto whole = trim(value);
    if (whole.empty()) return false;
    std::unique_lock lock(m_mutex);
    add_value_locked(std::string(whole));
    if (whole.find_first_of("\r\n") != std::string_view::npos) {
        for (const auto line : split_lines(whole)) {
            const auto item = trim(line);
            if (item.size() >= k_min_derived_secret_length) add_value_locked(std::string(item));
        }
    }
    return true;
}

void Masker::add_value_locked(std::string value) {
    auto insert = [this](std::string item) {
        if (item.empty()) return;
        if (std::find(m_values.begin(), m_values.end(), item) != m_values.end()) return;
        const auto first = static_cast<unsigned char>(item[0]);
        if (item.size() == 1) {
            m_single_byte.set(first);
        } else {
            m_first_two.set(pair_key(first, static_cast<unsigned char>(item[1])));
        }
        m_by_first[first].push_back(static_cast<std::uint32_t>(m_values.size()));
        m_values.push_back(std::move(item));
    };
    for (auto& item : encodings(value)) {
        // An encoding shorter than the derived minimum would mask unrelated text.
        if (item != value && item.size() >= k_min_derived_secret_length) insert(std::move(item));
    }
    insert(std::move(value));
}

template <typename OnMatch>
void Masker::scan(std::string_view text, OnMatch&& on_match) const {
    const std::size_t size = text.size();
    for (std::size_t pos = 0; pos < size; ++pos) {
        const auto first = static_cast<unsigned char>(text[pos]);
        const bool pair_hit =
            pos + 1 < size &&
            m_first_two[pair_key(first, static_cast<unsigned char>(text[pos + 1]))];
        if (!pair_hit && !m_single_byte[first]) continue;
        for (const auto index : m_by_first[first]) {
            const auto& value = m_values[index];
            if (value.size() <= size - pos && text.compare(pos, value.size(), value) == 0) {
                if (!on_match(pos, pos + value.size())) return;
            }
        }
    }
}

std::string Masker::mask(std::string_view text) const {
    std::shared_lock lock(m_mutex);
    if (m_values.empty() || text.empty()) return std::string(text);
    // Matches arrive ordered by start; extend the open range while they overlap or touch.
    std::vector<Range> ranges;
    scan(text, [&ranges](std::size_t begin, std::size_t end) {
        if (!ranges.empty() && begin <= ranges.back().second) {
            ranges.back().second = std::max(ranges.back().second, end);
        } else {
            ranges.emplace_back(begin, end);
        }
        return true;
    });
    if (ranges.empty()) return std::string(text);
    std::string out;
    out.reserve(text.size());
    std::size_t at = 0;
    for (const auto& [begin, end] : ranges) {
        out.append(text.substr(at, begin - at));
        out.append(k_mask);
        at = end;
    }
    out.append(text.substr(at));
    return out;
}

bool Masker::contains_secret(std::string_view text) const {
    std::shared_lock lock(m_mutex);
    bool found = false;
    scan(text, [&found](std::size_t, std::size_t) {
        found = true;
        return false;
    });
    return found;
}

std::size_t Masker::size() const {
    std::shared_lock lock(m_mutex);
    return m_values.size();
}

LineSplitter::LineSplitter(Sink sink, std::size_t max_line)
    : m_sink(std::move(sink)), m_max_line(std::max<std::size_t>(max_line, 1)) {}

void LineSplitter::feed(std::string_view chunk) {
    while (!chunk.empty()) {
        const auto newline = chunk.find('\n');
        if (newline == std::string_view::npos) {
            m_pending.append(chunk);
            while (m_pending.size() >= m_max_line) {
                m_sink(std::string_view(m_pending).substr(0, m_max_line));
                m_pending.erase(0, m_max_line);
            }
            return;
        }
        if (m_pending.empty()) {
            deliver(chunk.substr(0, newline));
        } else {
            m_pending.append(chunk.substr(0, newline));
            deliver(m_pending);
            m_pending.clear();
        }
        chunk.remove_prefix(newline + 1);
    }
}

void LineSplitter::flush() {
    if (m_pending.empty()) return;
    std::string last = std::move(m_pending);
    m_pending.clear();
    deliver(last);
}

void LineSplitter::deliver(std::string_view line) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    while (line.size() > m_max_line) {
        m_sink(line.substr(0, m_max_line));
        line.remove_prefix(m_max_line);
    }
    m_sink(line);
}

MaskedTokens::MaskedTokens(std::shared_ptr<common::TokenProvider> inner, Masker& masker)
    : m_inner(std::move(inner)), m_masker(masker) {}

common::Expected<std::string> MaskedTokens::token() {
    auto token = m_inner->token();
    if (token)
        m_masker.add_secret(*token);  // a value already registered is registered again: harmless
    return token;
}

common::Renewal MaskedTokens::refused(std::string_view token) {
    return m_inner->refused(token);
}

}  // namespace jobs
