#include "jobs/expr/path_patterns.hpp"

#include <fnmatch.h>

#include <algorithm>
#include <set>

namespace jobs {

namespace fs = std::filesystem;

std::vector<std::string> path_segments(const fs::path& relative) {
    std::vector<std::string> segments;
    for (const auto& part : relative) {
        const auto text = part.string();
        if (!text.empty() && text != ".") segments.push_back(text);
    }
    return segments;
}

std::optional<PathPattern> parse_path_pattern(std::string_view line, const fs::path& root) {
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) {
        line.remove_suffix(1);
    }
    if (line.empty() || line.front() == '#') return std::nullopt;
    PathPattern pattern;
    while (!line.empty() && line.front() == '!') {
        pattern.negate = !pattern.negate;
        line.remove_prefix(1);
    }
    fs::path path(line);
    if (path.is_relative()) path = root / path;
    const fs::path relative = path.lexically_normal().lexically_relative(root);
    if (relative.empty() || *relative.begin() == "..") return std::nullopt;
    pattern.segments = path_segments(relative);
    // A pattern matching a directory matches everything below it (implicit descendants).
    if (pattern.segments.empty() || pattern.segments.back() != "**")
        pattern.segments.push_back("**");
    return pattern;
}

namespace {

bool match_segments(std::span<const std::string> pattern, std::span<const std::string> path) {
    if (pattern.empty()) return path.empty();
    if (pattern.front() == "**") {
        for (std::size_t skip = 0; skip <= path.size(); ++skip) {
            if (match_segments(pattern.subspan(1), path.subspan(skip))) return true;
        }
        return false;
    }
    if (path.empty()) return false;
    // No FNM_PERIOD: `*` matches dot files, as @actions/glob does.
    if (::fnmatch(pattern.front().c_str(), path.front().c_str(), 0) != 0) return false;
    return match_segments(pattern.subspan(1), path.subspan(1));
}

std::string joined(std::span<const std::string> segments) {
    std::string out;
    for (const auto& segment : segments) out += (out.empty() ? "" : "/") + segment;
    return out;
}

}  // namespace

bool path_selected(const std::vector<PathPattern>& patterns, std::span<const std::string> path) {
    bool included = false;
    for (const auto& pattern : patterns) {
        if (pattern.negate == included && match_segments(pattern.segments, path))
            included = !pattern.negate;
    }
    return included;
}

std::vector<std::string> literal_prefix(const PathPattern& pattern) {
    std::vector<std::string> out;
    for (const auto& segment : pattern.segments) {
        if (segment.find_first_of("*?[") != std::string::npos) break;
        out.push_back(segment);
    }
    return out;
}

common::Expected<FileSelection> select_files(const sandbox::SafeDir& root,
                                             const std::vector<PathPattern>& patterns,
                                             const sandbox::ReadLimits& limits) {
    std::set<std::string> files, skipped;
    std::set<std::string> walked;  // the prefixes' parents walked whole already
    for (const auto& pattern : patterns) {
        if (pattern.negate) continue;
        const auto prefix = literal_prefix(pattern);
        // Walked from the prefix's parent, looking only at the prefix's own entry there: the
        // prefix itself may be a file, a link or a FIFO, and is classified like any entry.
        const std::string parent =
            prefix.empty() ? std::string()
                           : joined(std::span<const std::string>(prefix).first(prefix.size() - 1));
        const std::string name = prefix.empty() ? std::string() : prefix.back();
        if (walked.contains(parent) || walked.contains(parent + "\n" + name)) continue;
        walked.insert(name.empty() ? parent : parent + "\n" + name);
        common::Expected<sandbox::SafeDir> dir =
            parent.empty() ? root.open_dir(".", root.label()) : root.open_dir(parent, parent);
        if (!dir) continue;  // missing, or reached through a link: nothing there to select
        SANDGATE_CHECK(dir->walk(
            [&](const sandbox::WalkEntry& entry) {
                const std::string relative =
                    parent.empty() ? entry.relative : parent + "/" + entry.relative;
                if (!name.empty()) {
                    const std::string_view top =
                        std::string_view(entry.relative).substr(0, entry.relative.find('/'));
                    if (top != name) return sandbox::WalkStep::skip;
                }
                const auto segments = path_segments(fs::path(relative));
                switch (entry.kind) {
                    case sandbox::EntryKind::directory:
                        return sandbox::WalkStep::descend;
                    case sandbox::EntryKind::regular:
                        if (path_selected(patterns, segments)) files.insert(relative);
                        break;
                    case sandbox::EntryKind::symlink:
                    case sandbox::EntryKind::other:
                        if (path_selected(patterns, segments)) skipped.insert(relative);
                        break;
                }
                return sandbox::WalkStep::skip;
            },
            limits));
    }
    return FileSelection{{files.begin(), files.end()}, {skipped.begin(), skipped.end()}};
}

}  // namespace jobs
