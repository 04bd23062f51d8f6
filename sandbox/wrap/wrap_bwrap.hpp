#pragma once
// The bubblewrap arm of the wrap (see wrap.hpp for the seam and issue 3 for the posture).

#include <string>
#include <vector>

#include "sandbox/wrap/wrap.hpp"

namespace sandbox {

inline constexpr unsigned k_sandbox_uid = 1000;
inline constexpr unsigned k_sandbox_gid = 1000;

// Plans `bwrap --hostname sandgate --args 3 -- PAYLOAD...`: fd 3 carries the NUL-separated bwrap
// options (so that the payload's environment never shows in the host's process list), fd 4
// the seccomp BPF, fds 5... the files bwrap copies in (the /etc files, generated or the
// host's; an in-wrap scratch's offline configuration), and the last one bwrap's status pipe
// (--json-status-fd; WrapPlan::status is its read end). fd 3 is a memfd for a complete plan,
// a socket bwrap blocks on for a pending one (see PendingWrap).
//
// The options end with `--unshare-uts`, which they hold nowhere else (the namespaces are
// named one by one, never with --unshare-all). bwrap refuses --hostname without it before it
// does anything ("Specifying --hostname requires --unshare-uts"), so an options stream cut
// short (this process killed while writing it) makes bwrap exit 1 instead of running the
// payload with part of its options.
Expected<WrapPlan> plan_bwrap(const RunRequest& request, PlanTiming timing);

// The options of a complete plan (what fd 3 carries), for tests and diagnostics.
Expected<std::vector<std::string>> read_bwrap_options(const WrapPlan& plan);

}  // namespace sandbox
