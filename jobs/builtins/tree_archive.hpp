#pragma once
// The archives of the cache and artifact builtins: a gzip'd tar of regular files (and nothing
// else) read from trees a step could write, and unpacked into such trees. Both sides go through
// sandbox/access/safe_access.hpp only: a member is opened beneath its root's fd as a regular file
// (a link or a special file that replaced it since it was selected is skipped, never followed or
// opened for reading), and a restored file is created fresh beneath its destination's fd
// (whatever entry a step left at its name is removed first, a link unlinked, never followed;
// its directories made beneath, a link among them refused).
//
// The archive itself lives on the trusted side and is handed over as an fd.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/fd.hpp"
#include "jobs/actions/action_archive.hpp"  // ArchiveLimits
#include "sandbox/access/safe_access.hpp"

namespace jobs {

// A regular file beneath `root` at `relative`, stored in the archive as `name`.
struct TreeMember {
    const sandbox::SafeDir* root = nullptr;
    std::string relative;
    std::string name;
};

struct PackedArchive {
    std::uint64_t files = 0;
    std::uint64_t content_bytes = 0;   // of the files packed
    std::uint64_t archive_bytes = 0;   // written to the fd
    std::vector<std::string> skipped;  // members no longer regular files when opened
    std::string sha256;                // of the archive's bytes
};

// Writes `members` as a tar.gz to `out` (a new file of the trusted side's). invalid_input when a
// file or the whole is larger than `limits` allow; timeout when `read`'s deadline passes or its
// token fires.
common::Expected<PackedArchive> write_tree_archive(const std::vector<TreeMember>& members,
                                                   const common::Fd& out,
                                                   const ArchiveLimits& limits,
                                                   const sandbox::ReadLimits& read);

// Where an archive entry goes: `relative` beneath `root`; nullopt leaves the entry out.
struct TreePlacement {
    const sandbox::SafeDir* root = nullptr;
    std::string relative;
};
using PlaceEntry = std::function<std::optional<TreePlacement>(const std::string& name)>;

struct UnpackedArchive {
    std::uint64_t files = 0;
    std::uint64_t bytes = 0;
};

// Unpacks the tar.gz `archive` (the trusted side's, read from its start), each regular file
// where `place` says; an entry that is not a regular file or a directory, or whose name
// leaves its tree, is refused (invalid_input, naming it). Stops at the first error (files
// written so far stay).
common::Expected<UnpackedArchive> read_tree_archive(const common::Fd& archive,
                                                    const PlaceEntry& place,
                                                    const ArchiveLimits& limits);

}  // namespace jobs
