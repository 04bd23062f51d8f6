#pragma once
// The bubblewrap arm of the wrap (see wrap.hpp for the seam and issue 3 for the posture).

#include <string>
#include <vector>

#include "sandbox/wrap.hpp"

namespace sandbox {

inline constexpr unsigned k_sandbox_uid = 1000;
inline constexpr unsigned k_sandbox_gid = 1000;

// Plans `bwrap --args 4 -- PAYLOAD...`: fd 3 carries the seccomp BPF, fd 4 the NUL-separated
// bwrap options (so that the payload's environment never shows in the host's process list),
// fds 5... the /etc files (generated or the host's), and the last one bwrap's status pipe
// (--json-status-fd; WrapPlan::status is its read end).
Expected<WrapPlan> plan_bwrap(const RunRequest& request);

// The options of a plan (what fd 4 carries), for tests and diagnostics.
Expected<std::vector<std::string>> read_bwrap_options(const WrapPlan& plan);

}  // namespace sandbox
