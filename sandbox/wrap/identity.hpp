#pragma once
// The host identity of a wrapped run. bwrap maps the sandbox's uid (1000 inside) to the uid of
// the bwrap process, so when sandgate runs as root the sandbox would hold root's owner rights
// on the host (root's 0700 files with every capability dropped: threat row 34). As root, the
// process core therefore drops to an unprivileged host uid/gid between fork and exec of bwrap
// (SpawnSpec::identity), with no supplementary groups, and the trees the run may write (its
// working directory, --writable, the scratch) are given to that identity first.
//
// Default: 65534:65534 (nobody/nogroup on Debian); `--sandbox-user UID[:GID]` chooses another
// (a dedicated uid per agent keeps concurrent agents apart). Root is refused. Numbers only:
// sandgate is linked statically, without the name service.
// An unprivileged sandgate runs the sandbox as itself: there is nothing to drop.

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

#include "sandbox/base.hpp"
#include "sandbox/process/run.hpp"

namespace sandbox {

inline constexpr uid_t k_default_host_uid = 65534;
inline constexpr gid_t k_default_host_gid = 65534;

// The identity the wrapped run of `policy` gets on the host, when it differs from the
// caller's: set only for the bwrap arm when the caller is root.
std::optional<Owner> sandbox_owner(const Policy& policy);

// `UID[:GID]` (numbers; GID defaults to UID). invalid_input naming `flag` for anything else,
// and for uid or gid 0.
Expected<Owner> parse_host_identity(std::string_view text, std::string_view flag);

// "65534:65534", for doctor and the posture.
std::string to_string(const Owner& owner);

}  // namespace sandbox
