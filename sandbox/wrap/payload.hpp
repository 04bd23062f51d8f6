#pragma once
// The wrapped command's program, looked up the way execvp will inside the wrap: bwrap reports
// an exec failure as a plain exit 1, indistinguishable from the payload's own `exit 1`, so the
// verdict is decided before the run and a failing payload reports it with the exact status.

#include <filesystem>
#include <string>
#include <vector>

#include "sandbox/process/run.hpp"
#include "sandbox/wrap/mounts.hpp"

namespace sandbox {

// execvp's verdict for `name` with the environment's PATH and the working directory, counting
// only files visible inside the wrap (`ordered`: the plan's mounts in bwrap's order): 0 found,
// 127 not found, 126 found but not executable (EACCES is remembered while the search goes on).
int resolve_payload(const std::string& name, const Environment& env,
                    const std::filesystem::path& cwd, const std::vector<MountEntry>& ordered);

// A payload that prints why `name` cannot run and exits with `status` (126 or 127), inside the
// wrap.
std::vector<std::string> failing_payload(int status, const std::string& name);

}  // namespace sandbox
