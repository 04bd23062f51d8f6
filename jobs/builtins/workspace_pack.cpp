#include "jobs/builtins/workspace_pack.hpp"

#include <algorithm>

#include "jobs/expr/path_patterns.hpp"
#include "sandbox/access/safe_access.hpp"

namespace jobs {
namespace {

namespace fs = std::filesystem;

std::string joined(std::span<const std::string> segments) {
    std::string out;
    for (const auto& segment : segments) out += (out.empty() ? "" : "/") + segment;
    return out;
}

// The common leading segments of the include patterns' literal prefixes.
std::vector<std::string> common_root(const std::vector<PathPattern>& patterns) {
    std::optional<std::vector<std::string>> root;
    for (const auto& pattern : patterns) {
        if (pattern.negate) continue;
        auto prefix = literal_prefix(pattern);
        if (!root) {
            root = std::move(prefix);
            continue;
        }
        std::size_t same = 0;
        while (same < root->size() && same < prefix.size() && (*root)[same] == prefix[same]) ++same;
        root->resize(same);
    }
    return root.value_or(std::vector<std::string>{});
}

bool hidden(std::string_view relative) {
    for (;;) {
        if (relative.starts_with(".")) return true;
        const auto slash = relative.find('/');
        if (slash == std::string_view::npos) return false;
        relative.remove_prefix(slash + 1);
    }
}

}  // namespace

common::Expected<PackedPaths> pack_workspace(const PackRequest& request, const common::Fd& out) {
    PackedPaths result;
    std::vector<PathPattern> patterns;
    for (const auto& line : request.paths) {
        if (line.starts_with("#")) continue;
        // `~` is HOME, which is not the workspace (a relative `~/x` would be read as one).
        const auto unnegated = line.substr(std::min(line.find_first_not_of('!'), line.size()));
        if (unnegated.starts_with("~")) {
            result.outside.push_back(line);
            continue;
        }
        if (auto pattern = parse_path_pattern(line, request.workspace))
            patterns.push_back(std::move(*pattern));
        else
            result.outside.push_back(line);
    }
    auto workspace = sandbox::SafeDir::open_trusted(request.workspace, "the workspace");
    if (!workspace) return std::unexpected(workspace.error());
    auto selection = SANDGATE_TRY(select_files(*workspace, patterns, request.read));
    result.skipped = std::move(selection.skipped);
    std::string root;
    if (request.names == PackNames::below_common_root) {
        auto segments = common_root(patterns);
        root = joined(segments);
        // A single file's path is its own literal prefix: its directory is the root.
        if (!segments.empty() && std::ranges::find(selection.files, root) != selection.files.end())
            root = joined(std::span<const std::string>(segments).first(segments.size() - 1));
    }
    std::vector<TreeMember> members;
    for (const auto& file : selection.files) {
        std::string name;
        if (request.names == PackNames::workspace_prefixed) {
            name = "w/" + file;
        } else {
            name = root.empty() ? file : file.substr(root.size() + 1);
            if (request.hidden == HiddenFiles::exclude && hidden(name)) continue;
        }
        members.push_back({&*workspace, file, std::move(name)});
    }
    auto packed = SANDGATE_TRY(write_tree_archive(members, out, request.limits, request.read));
    result.archive = std::move(packed);
    for (auto& late : result.archive.skipped) result.skipped.push_back(std::move(late));
    return result;
}

}  // namespace jobs
