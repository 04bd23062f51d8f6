#pragma once
// The files a cache save or an artifact upload takes from the workspace (a step's tree): the
// `path` input's patterns (jobs/expr/path_patterns.hpp) selected beneath the workspace's fd and
// written to a tar.gz (jobs/builtins/tree_archive.hpp), links, FIFOs and devices left out, never
// followed. Lines naming paths outside the workspace select nothing and are reported back.

#include <filesystem>
#include <string>
#include <vector>

#include "jobs/builtins/tree_archive.hpp"

namespace jobs {

// How members are named: "w/RELATIVE" (a cache entry: restored where it was), or relative to
// the least common ancestor of the patterns' literal paths (an artifact, as upload-artifact
// names its files; a single file's ancestor is its directory).
enum class PackNames { workspace_prefixed, below_common_root };
// upload-artifact leaves out files and directories whose name starts with '.' unless asked.
enum class HiddenFiles { include, exclude };

struct PackRequest {
    std::filesystem::path workspace;
    std::vector<std::string> paths;  // the input's lines
    PackNames names = PackNames::workspace_prefixed;
    HiddenFiles hidden = HiddenFiles::include;
    ArchiveLimits limits;
    sandbox::ReadLimits read;
};

struct PackedPaths {
    PackedArchive archive;             // archive.files == 0: nothing matched
    std::vector<std::string> outside;  // lines outside the workspace
    std::vector<std::string> skipped;  // links and special files, workspace-relative
};

common::Expected<PackedPaths> pack_workspace(const PackRequest& request, const common::Fd& out);

}  // namespace jobs
