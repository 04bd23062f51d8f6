#pragma once
// Removing a job's worktree without ever following a symlink out of it. A step may plant
// symlinks (to /, to the mirror, to HOME) or leave read-only directories behind; remove_tree
// unlinks symlinks as entries, descends only through O_NOFOLLOW|O_DIRECTORY descriptors
// (openat/unlinkat relative to them), restores owner rwx on directories it must empty, and
// holds O(1) descriptors however deep the tree is.

#include <filesystem>

#include "common/error.hpp"

namespace jobs {

// Removes `path` and everything beneath it. `path`'s parent is trusted (followed); `path`
// itself, when a symlink, is unlinked, never followed. A missing `path` is success. On error
// (EPERM on an immutable file, EBUSY on a mount point, ...) returns ErrorKind::permanent
// naming the entry; whatever could be removed is gone.
common::Expected<void> remove_tree(const std::filesystem::path& path);

}  // namespace jobs
