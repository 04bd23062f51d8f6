#pragma once
// What the process core's child does for SpawnSpec::portal and SpawnSpec::identity
// (sandbox/process/spawn.hpp), for a caller that forks a child of its own from a WrapPlan
// (tests/support/wrap_spawn.hpp) and must do the same, in the same order. Called in the child,
// before exec; async-signal-safe (no allocation); false with errno.

#include <string>
#include <vector>

#include "sandbox/access/safe_access.hpp"

namespace sandbox {

// Enters a mount namespace of this task's own (slave: nothing propagates back) with a small
// tmpfs over `portal_dir`, and attaches sources[i] (an O_PATH fd of the caller's; a directory
// when directories[i]) at targets[i] (portal_dir/<i>). Run as root, before drop_identity.
bool enter_portal(const char* portal_dir, const std::vector<int>& sources,
                  const std::vector<std::string>& targets, const std::vector<bool>& directories);

// Drops this task (only: raw system calls, not glibc's all-threads wrappers) to `owner`, with
// no supplementary groups.
bool drop_identity(const Owner& owner);

}  // namespace sandbox
