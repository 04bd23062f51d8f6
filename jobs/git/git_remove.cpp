#include "jobs/git/git_remove.hpp"

#include "sandbox/access/safe_access.hpp"

namespace jobs {

// The safe-access module's removal (sandbox/access/safe_access.hpp): links are unlinked as entries,
// directories entered only through descriptors opened beneath, never by a path a step controls.
common::Expected<void> remove_tree(const std::filesystem::path& path) {
    return sandbox::remove_tree(path);
}

}  // namespace jobs
