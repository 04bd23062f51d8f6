#include "jobs/file_commands.hpp"

#include <fcntl.h>

#include <array>
#include <unistd.h>

#include <cerrno>
#include <random>
#include <system_error>

#include "jobs/yaml_tree.hpp"
#include "sandbox/fd.hpp"

namespace jobs {
namespace {

using sandbox::ErrorKind;
using sandbox::fail;

constexpr std::string_view k_summary_too_large =
    "$GITHUB_STEP_SUMMARY upload aborted, supports content up to a size of {}k, got {}k. For more "
    "information see: https://docs.github.com/actions/using-workflows/"
    "workflow-commands-for-github-actions#adding-a-markdown-summary";

std::string random_suffix() {
    std::random_device device;
    std::string out;
    static constexpr char k_hex[] = "0123456789abcdef";
    for (int i = 0; i < 4; ++i) {
        auto word = device();
        for (int j = 0; j < 8; ++j, word >>= 4) out += k_hex[word & 0xF];
    }
    return out;
}

sandbox::Expected<void> create_empty(const std::filesystem::path& path) {
    sandbox::Fd fd(::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0666));
    if (!fd) return fail(ErrorKind::permanent, sandbox::errno_message("create " + path.string()));
    return {};
}

// One line of `text` from `index`: the content without its line ending, and the ending's
// length (0 at end of text without a newline). nullopt at end of text.
struct Line {
    std::string_view content;
    std::size_t newline = 0;
};

std::optional<Line> read_line(std::string_view text, std::size_t& index) {
    if (index >= text.size()) return std::nullopt;
    const auto lf = text.find('\n', index);
    Line line;
    if (lf == std::string_view::npos) {
        line.content = text.substr(index);
        index = text.size();
        return line;
    }
    line.content = text.substr(index, lf - index);
    line.newline = 1;
    if (!line.content.empty() && line.content.back() == '\r') {
        line.content.remove_suffix(1);
        line.newline = 2;
    }
    index = lf + 1;
    return line;
}

std::unexpected<sandbox::Error> parse_error(std::string_view label, std::size_t line,
                                            std::string_view message) {
    // One printable line, whatever bytes the file holds (yaml_tree.hpp's one_line).
    return fail(ErrorKind::invalid_input,
                std::string(label) + ":" + std::to_string(line) + ": " + one_line(message));
}

sandbox::Expected<std::optional<std::string>> read_text(const std::filesystem::path& path) {
    sandbox::Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) {
        if (errno == ENOENT) return std::optional<std::string>();
        return fail(ErrorKind::permanent, sandbox::errno_message("open " + path.string()));
    }
    std::string text;
    std::array<char, 65536> buffer{};
    for (;;) {
        const auto got = ::read(fd.get(), buffer.data(), buffer.size());
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return fail(ErrorKind::permanent, sandbox::errno_message("read " + path.string()));
        if (got == 0) break;
        text.append(buffer.data(), static_cast<std::size_t>(got));
    }
    return std::optional<std::string>(std::move(text));
}

void read_pairs(const std::filesystem::path& path, std::string_view label, NamedValues& into,
                FileCommandResults& results) {
    auto text = read_text(path);
    if (!text) {
        results.failures.push_back(text.error().message);
        return;
    }
    if (!*text) return;
    auto pairs = parse_key_value_text(**text, label);
    if (!pairs) {
        results.annotations.push_back({AnnotationLevel::error,
                                       "Unable to process file command '" + std::string(label) +
                                           "' successfully.",
                                       {}, {}, {}, {}, {}, {}, {}});
        results.annotations.push_back(
            {AnnotationLevel::error, pairs.error().message, {}, {}, {}, {}, {}, {}, {}});
        results.failures.push_back(pairs.error().message);
        return;
    }
    into = std::move(*pairs);
}

void read_summary(const std::filesystem::path& path, FileCommandResults& results) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec || size == 0) return;
    if (size > k_max_summary_bytes) {
        std::string message(k_summary_too_large);
        message.replace(message.find("{}"), 2, std::to_string(k_max_summary_bytes / 1024));
        message.replace(message.find("{}"), 2, std::to_string(size / 1024));
        results.annotations.push_back({AnnotationLevel::error, message, {}, {}, {}, {}, {}, {}, {}});
        return;
    }
    auto text = read_text(path);
    if (text && *text) results.summary = std::move(**text);
}

}  // namespace

sandbox::Expected<FileCommandPaths> create_file_commands(const std::filesystem::path& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return fail(ErrorKind::permanent, "create " + dir.string() + ": " + ec.message());
    const auto suffix = random_suffix();
    FileCommandPaths paths{dir / ("set_env_" + suffix), dir / ("set_output_" + suffix),
                           dir / ("add_path_" + suffix), dir / ("save_state_" + suffix),
                           dir / ("step_summary_" + suffix)};
    for (const auto* file : {&paths.env, &paths.output, &paths.path, &paths.state, &paths.summary}) {
        if (auto made = create_empty(*file); !made) {
            remove_file_commands(paths);
            return std::unexpected(made.error());
        }
    }
    return paths;
}

void remove_file_commands(const FileCommandPaths& paths) {
    std::error_code ec;
    for (const auto* file : {&paths.env, &paths.output, &paths.path, &paths.state, &paths.summary}) {
        if (!file->empty()) std::filesystem::remove(*file, ec);
    }
}

sandbox::Environment file_command_environment(const FileCommandPaths& paths) {
    return {{"GITHUB_ENV", paths.env.string()},
            {"GITHUB_OUTPUT", paths.output.string()},
            {"GITHUB_PATH", paths.path.string()},
            {"GITHUB_STATE", paths.state.string()},
            {"GITHUB_STEP_SUMMARY", paths.summary.string()}};
}

sandbox::Expected<NamedValues> parse_key_value_text(std::string_view text, std::string_view label) {
    NamedValues values;
    std::size_t index = 0;
    std::size_t number = 0;
    while (auto line = read_line(text, index)) {
        ++number;
        const auto content = line->content;
        if (content.empty()) continue;
        const auto equals = content.find('=');
        const auto heredoc = content.find("<<");
        if (equals != std::string_view::npos && (heredoc == std::string_view::npos || equals < heredoc)) {
            if (equals == 0) {
                return parse_error(label, number, "Invalid format '" + std::string(content) +
                                                      "'. Name must not be empty");
            }
            set_named(values, content.substr(0, equals), content.substr(equals + 1));
            continue;
        }
        if (heredoc == std::string_view::npos) {
            return parse_error(label, number, "Invalid format '" + std::string(content) + "'");
        }
        const auto name = content.substr(0, heredoc);
        const auto delimiter = content.substr(heredoc + 2);
        if (name.empty() || delimiter.empty()) {
            return parse_error(label, number,
                               "Invalid format '" + std::string(content) +
                                   "'. Name must not be empty and delimiter must not be empty");
        }
        const auto start = index;
        auto end = index;
        const auto heredoc_line = number;
        for (;;) {
            auto value_line = read_line(text, index);
            if (!value_line) {
                return parse_error(label, heredoc_line,
                                   "Invalid value. Matching delimiter not found '" +
                                       std::string(delimiter) + "'");
            }
            ++number;
            if (value_line->content == delimiter) break;
            if (value_line->newline == 0) {
                return parse_error(label, number, "Invalid value. EOF marker missing new line.");
            }
            end = index - value_line->newline;
        }
        set_named(values, name, end > start ? text.substr(start, end - start) : std::string_view());
    }
    return values;
}

std::vector<std::string> parse_path_text(std::string_view text) {
    std::vector<std::string> dirs;
    std::size_t index = 0;
    while (auto line = read_line(text, index)) {
        if (!line->content.empty()) dirs.emplace_back(line->content);
    }
    return dirs;
}

FileCommandResults read_file_commands(const FileCommandPaths& paths) {
    FileCommandResults results;
    read_pairs(paths.env, "GITHUB_ENV", results.env, results);
    std::erase_if(results.env, [&](const auto& pair) {
        if (pair.first != "NODE_OPTIONS") return false;
        results.annotations.push_back({AnnotationLevel::error,
                                       "Can't store NODE_OPTIONS output parameter using "
                                       "'$GITHUB_ENV' command.",
                                       {}, {}, {}, {}, {}, {}, {}});
        return true;
    });
    read_pairs(paths.output, "GITHUB_OUTPUT", results.outputs, results);
    read_pairs(paths.state, "GITHUB_STATE", results.state, results);
    if (auto text = read_text(paths.path); !text) {
        results.failures.push_back(text.error().message);
    } else if (*text) {
        results.path = parse_path_text(**text);
    }
    read_summary(paths.summary, results);
    return results;
}

void PathPrepends::add(const std::string& dir) {
    std::erase(m_entries, dir);
    m_entries.push_back(dir);
}

std::string PathPrepends::apply(std::string_view base_path) const {
    std::string out;
    for (auto it = m_entries.rbegin(); it != m_entries.rend(); ++it) {
        if (!out.empty()) out += ':';
        out += *it;
    }
    if (!base_path.empty()) {
        if (!out.empty()) out += ':';
        out += base_path;
    }
    return out;
}

}  // namespace jobs
