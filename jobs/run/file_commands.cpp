#include "jobs/run/file_commands.hpp"

#include <sys/stat.h>

#include <random>
#include <system_error>

#include "common/fd.hpp"
#include "jobs/workflow/yaml_tree.hpp"

namespace jobs {
namespace {

using common::ErrorKind;
using common::fail;

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

std::unexpected<common::Error> parse_error(std::string_view label, std::size_t line,
                                           std::string_view message) {
    // One printable line, whatever bytes the file holds (yaml_tree.hpp's one_line).
    return fail(ErrorKind::invalid_input,
                std::string(label) + ":" + std::to_string(line) + ": " + one_line(message));
}

// The file's label in refusals: the variable the step knows it by.
struct FileSlot {
    const char* prefix;    // the file's name before the suffix
    const char* variable;  // "GITHUB_ENV"
};
constexpr FileSlot k_slots[] = {{"set_env_", "GITHUB_ENV"},
                                {"set_output_", "GITHUB_OUTPUT"},
                                {"add_path_", "GITHUB_PATH"},
                                {"save_state_", "GITHUB_STATE"},
                                {"step_summary_", "GITHUB_STEP_SUMMARY"}};

Annotation error_annotation(std::string message) {
    return {AnnotationLevel::error, std::move(message), {}, {}, {}, {}, {}, {}, {}};
}

// The text of one file (nullopt when missing); a refusal is recorded as the step's failure.
std::optional<std::string> read_text(const sandbox::SafeDir& dir, const std::string& name,
                                     std::string_view variable, std::size_t cap,
                                     FileCommandResults& results) {
    const sandbox::ReadLimits limits{cap, std::nullopt, -1};
    auto text = dir.read_file_if_present(name, limits, "$" + std::string(variable));
    if (!text) {
        results.annotations.push_back(error_annotation(text.error().message));
        results.failures.push_back(text.error().message);
        return std::nullopt;
    }
    return std::move(*text);
}

void read_pairs(const sandbox::SafeDir& dir, const std::string& name, std::string_view label,
                NamedValues& into, FileCommandResults& results) {
    auto text = read_text(dir, name, label, k_max_file_command_bytes, results);
    if (!text) return;
    auto pairs = parse_key_value_text(*text, label);
    if (!pairs) {
        results.annotations.push_back(error_annotation("Unable to process file command '" +
                                                       std::string(label) + "' successfully."));
        results.annotations.push_back(error_annotation(pairs.error().message));
        results.failures.push_back(pairs.error().message);
        return;
    }
    into = std::move(*pairs);
}

void read_summary(const sandbox::SafeDir& dir, const std::string& name,
                  FileCommandResults& results) {
    struct stat st {};
    auto fd = dir.open_file_if_present(name, "$GITHUB_STEP_SUMMARY", &st);
    if (!fd) {
        results.annotations.push_back(error_annotation(fd.error().message));
        results.failures.push_back(fd.error().message);
        return;
    }
    if (!*fd) return;
    const auto size = static_cast<std::uintmax_t>(st.st_size);
    if (size == 0) return;
    if (size > k_max_summary_bytes) {
        std::string message(k_summary_too_large);
        message.replace(message.find("{}"), 2, std::to_string(k_max_summary_bytes / 1024));
        message.replace(message.find("{}"), 2, std::to_string(size / 1024));
        results.annotations.push_back(error_annotation(message));
        return;
    }
    auto text =
        sandbox::read_all(**fd, {k_max_summary_bytes, std::nullopt, -1}, "$GITHUB_STEP_SUMMARY");
    if (text) results.summary = std::move(*text);
}

}  // namespace

common::Expected<FileCommandFiles> FileCommandFiles::create(const sandbox::SafeDir& root,
                                                            std::string_view relative,
                                                            const sandbox::CreateOptions& options) {
    auto dir =
        SANDGATE_TRY(root.make_dirs(relative, {0755, options.owner}, "the file-command directory"));
    FileCommandFiles files;
    files.m_suffix = random_suffix();
    const auto& base = dir.path();
    files.m_paths = {
        base / (k_slots[0].prefix + files.m_suffix), base / (k_slots[1].prefix + files.m_suffix),
        base / (k_slots[2].prefix + files.m_suffix), base / (k_slots[3].prefix + files.m_suffix),
        base / (k_slots[4].prefix + files.m_suffix)};
    files.m_dir = std::move(dir);
    for (const auto& slot : k_slots) {
        SANDGATE_CHECK(files.m_dir.create_file(
            slot.prefix + files.m_suffix, {}, options,
            "$" + std::string(slot.variable)));  // the destructor removes the others
    }
    return files;
}

FileCommandFiles::~FileCommandFiles() {
    remove();
}

void FileCommandFiles::remove() {
    if (!m_dir) return;
    for (const auto& slot : k_slots) (void)m_dir.remove(slot.prefix + m_suffix, slot.variable);
    m_dir = sandbox::SafeDir();
}

FileCommandResults FileCommandFiles::read() const {
    FileCommandResults results;
    if (!m_dir) return results;
    read_pairs(m_dir, k_slots[0].prefix + m_suffix, "GITHUB_ENV", results.env, results);
    std::erase_if(results.env, [&](const auto& pair) {
        if (pair.first != "NODE_OPTIONS") return false;
        results.annotations.push_back(error_annotation(
            "Can't store NODE_OPTIONS output parameter using '$GITHUB_ENV' command."));
        return true;
    });
    read_pairs(m_dir, k_slots[1].prefix + m_suffix, "GITHUB_OUTPUT", results.outputs, results);
    read_pairs(m_dir, k_slots[3].prefix + m_suffix, "GITHUB_STATE", results.state, results);
    if (auto text = read_text(m_dir, k_slots[2].prefix + m_suffix, "GITHUB_PATH",
                              k_max_file_command_bytes, results))
        results.path = parse_path_text(*text);
    read_summary(m_dir, k_slots[4].prefix + m_suffix, results);
    return results;
}

sandbox::Environment file_command_environment(const FileCommandPaths& paths) {
    return {{"GITHUB_ENV", paths.env.string()},
            {"GITHUB_OUTPUT", paths.output.string()},
            {"GITHUB_PATH", paths.path.string()},
            {"GITHUB_STATE", paths.state.string()},
            {"GITHUB_STEP_SUMMARY", paths.summary.string()}};
}

common::Expected<NamedValues> parse_key_value_text(std::string_view text, std::string_view label) {
    NamedValues values;
    std::size_t index = 0;
    std::size_t number = 0;
    while (auto line = read_line(text, index)) {
        ++number;
        const auto content = line->content;
        if (content.empty()) continue;
        const auto equals = content.find('=');
        const auto heredoc = content.find("<<");
        if (equals != std::string_view::npos &&
            (heredoc == std::string_view::npos || equals < heredoc)) {
            if (equals == 0) {
                return parse_error(
                    label, number,
                    "Invalid format '" + std::string(content) + "'. Name must not be empty");
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
                return parse_error(
                    label, heredoc_line,
                    "Invalid value. Matching delimiter not found '" + std::string(delimiter) + "'");
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
