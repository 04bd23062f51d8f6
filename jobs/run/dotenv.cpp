#include "jobs/run/dotenv.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace jobs {
namespace {

bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
        s.remove_suffix(1);
    return s;
}

char unescape(char c) {
    switch (c) {
        case 'n':
            return '\n';
        case 'r':
            return '\r';
        case 't':
            return '\t';
        default:
            return c;
    }
}

}  // namespace

common::Expected<sandbox::Environment> parse_dotenv(std::string_view text, std::string_view file) {
    sandbox::Environment out;
    std::size_t pos = 0;
    int line_no = 0;
    auto error = [&](std::string_view message) {
        return common::fail(
            common::ErrorKind::invalid_input,
            std::string(file) + ":" + std::to_string(line_no) + ": " + std::string(message));
    };
    while (pos < text.size()) {
        ++line_no;
        std::size_t end = text.find('\n', pos);
        if (end == std::string_view::npos) end = text.size();
        std::string_view line = trim(text.substr(pos, end - pos));
        pos = end + 1;
        if (line.empty() || line.front() == '#') continue;
        if (line.starts_with("export ")) line = trim(line.substr(7));
        const std::size_t eq = line.find('=');
        if (eq == std::string_view::npos) return error("expected NAME=value");
        const std::string_view name = trim(line.substr(0, eq));
        if (name.empty() || !std::ranges::all_of(name, is_name_char)) return error("invalid name");
        std::string_view rest = trim(line.substr(eq + 1));
        std::string value;
        if (!rest.empty() && (rest.front() == '"' || rest.front() == '\'')) {
            const char quote = rest.front();
            // The value may continue on later lines until the closing quote.
            std::size_t start = (rest.data() - text.data()) + 1;
            std::size_t i = start;
            bool closed = false;
            for (; i < text.size(); ++i) {
                const char c = text[i];
                if (c == '\n') ++line_no;
                if (quote == '"' && c == '\\' && i + 1 < text.size()) {
                    value += unescape(text[++i]);
                } else if (c == quote) {
                    closed = true;
                    break;
                } else {
                    value += c;
                }
            }
            if (!closed) return error("unterminated quoted value");
            std::size_t after = text.find('\n', i);
            std::string_view tail = trim(text.substr(
                i + 1, (after == std::string_view::npos ? text.size() : after) - i - 1));
            if (!tail.empty() && tail.front() != '#')
                return error("unexpected text after the quoted value");
            pos = after == std::string_view::npos ? text.size() : after + 1;
        } else {
            if (auto hash = rest.find(" #"); hash != std::string_view::npos)
                rest = trim(rest.substr(0, hash));
            value = std::string(rest);
        }
        std::string key(name);
        auto it = std::ranges::find_if(out, [&](const auto& pair) { return pair.first == key; });
        if (it != out.end())
            it->second = std::move(value);
        else
            out.emplace_back(std::move(key), std::move(value));
    }
    return out;
}

common::Expected<sandbox::Environment> load_dotenv(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return common::fail(common::ErrorKind::invalid_input, path + ": cannot read the file");
    std::ostringstream buffer;
    buffer << in.rdbuf();
    return parse_dotenv(buffer.str(), path);
}

}  // namespace jobs
