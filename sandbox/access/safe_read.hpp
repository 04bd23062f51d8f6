#pragma once
// One read of a file a step may have written, named by path: for callers that hold a path
// beneath a tree (a local action's manifest, a called workflow, a matcher file) rather than a
// SafeDir of it (sandbox/access/safe_access.hpp).

#include <filesystem>
#include <string>

#include "sandbox/access/safe_access.hpp"

namespace sandbox {

// Reads `path`, which must lie lexically beneath `root` (a repository or workspace that steps
// may have written), through a SafeDir of `root` (open_trusted: `root` itself is the trusted
// side's path): a regular file reached without a link, within `limits`. invalid_input
// "<label> is not beneath <root>" for a path outside it; otherwise read_file's errors.
Expected<std::string> read_file_beneath(const std::filesystem::path& root,
                                        const std::filesystem::path& path, const ReadLimits& limits,
                                        const std::string& label);

}  // namespace sandbox
