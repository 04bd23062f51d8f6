#pragma once
// Action archives in the layout GitHub's tarball endpoint serves (and the official runner's
// ACTIONS_RUNNER_ACTION_ARCHIVE_CACHE holds): a gzip'd tar with exactly one top directory,
// `OWNER-REPO-SHORTSHA/`, holding the repository's tree at one commit. Read and written with
// libarchive.
//
// unpack_action_archive refuses (and leaves nothing behind) an archive with an entry that
// would escape its tree or is not plain content: an absolute name, a `..` component, more
// than one top directory, a hard link, a symbolic link whose target is absolute or leads out
// of the tree, a device, FIFO or socket; and one larger than the limits (entries, bytes per
// entry, bytes in all: a decompression bomb stops at the cap). Files are written 0644 (0755
// when executable), never setuid, never owned by anyone but the caller.

#include <git2.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "common/error.hpp"

namespace jobs {

struct ArchiveLimits {
    std::uint64_t max_total_bytes = 1024ull * 1024 * 1024;  // unpacked content, all entries
    std::uint64_t max_entry_bytes = 512ull * 1024 * 1024;   // one file
    std::uint64_t max_entries = 200000;
};

// Unpacks `archive` so that its top directory's contents become `dest`, which must not exist
// (its parent must, and is trusted: a physical path). On error (invalid_input for a refused
// entry or a corrupt archive, naming the archive and the entry; permanent for local I/O),
// whatever was written under `dest` is removed.
common::Expected<void> unpack_action_archive(const std::filesystem::path& archive,
                                             const std::filesystem::path& dest,
                                             const ArchiveLimits& limits = {});

// Writes the tree of `commit` in `repository` as a tar.gz with the one top directory `top`
// to `out` (created or truncated). Submodule entries are left out (GitHub's tarball has them
// as empty directories); symbolic links are kept as links.
common::Expected<void> write_commit_archive(git_repository* repository, const git_oid& commit,
                                            const std::string& top,
                                            const std::filesystem::path& out);

// Makes every file and directory under `root` read-only (write bits cleared; links untouched).
common::Expected<void> make_tree_read_only(const std::filesystem::path& root);
// (jobs::remove_tree removes such a tree: it restores the write bits it needs.)

}  // namespace jobs
