#pragma once
// Path patterns as @actions/glob reads them (hashFiles, actions/cache's and upload-artifact's
// `path`): one per line, blank lines and `#` comments ignored, a leading `!` excludes, `*`
// `?` `[...]` within one segment (fnmatch(3), dot files included), `**` spanning segments, and
// a pattern naming a directory selects everything below it. Patterns are relative to a root
// (the workspace, HOME) or absolute beneath it; one leading out of the root selects nothing.
//
// select_files walks the root through sandbox/access/safe_access.hpp (the root is a step's tree):
// from each pattern's literal prefix, never following a link, never opening a special file.

#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sandbox/access/safe_access.hpp"

namespace jobs {

struct PathPattern {
    bool negate = false;
    std::vector<std::string> segments;  // relative to the root; ends with "**"
};

// The '/'-separated components of a relative path ("." and empty ones dropped).
std::vector<std::string> path_segments(const std::filesystem::path& relative);

// One line as a pattern relative to `root`: nullopt for a blank line, a comment, or a pattern
// that points outside `root`.
std::optional<PathPattern> parse_path_pattern(std::string_view line,
                                              const std::filesystem::path& root);

// Whether the last pattern that matches `path` (segments relative to the root) includes it.
bool path_selected(const std::vector<PathPattern>& patterns, std::span<const std::string> path);

// The segments of `pattern` before the first one holding a glob character.
std::vector<std::string> literal_prefix(const PathPattern& pattern);

struct FileSelection {
    std::vector<std::string> files;    // regular files, relative to the root, sorted, unique
    std::vector<std::string> skipped;  // selected links, FIFOs, sockets, devices (not followed)
};

// The entries below `root` that `patterns` select (walked from each include pattern's literal
// prefix). ErrorKind::timeout when `limits`' deadline passes or its token fires.
common::Expected<FileSelection> select_files(const sandbox::SafeDir& root,
                                             const std::vector<PathPattern>& patterns,
                                             const sandbox::ReadLimits& limits = {});

}  // namespace jobs
