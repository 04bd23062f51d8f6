#pragma once
// The runner tools a workflow takes for granted, inside the bwrap wrap, in a directory of the
// wrap's own root (k_shim_dir, on the payload's PATH before the system directories; read-only:
// the root is remounted read-only, and nothing is bound there):
//   sudo      runs a command as root of a user namespace of the sandbox's own: uid 0 inside,
//             the sandbox's unprivileged host uid outside (gen/sudo.cpp says how and why);
//             -E, -H, -n, -S, -k, `-u root` and `--` are accepted, `-u OTHER` refused.
//   apt-get, apt
//             `install PACKAGES` succeeds with one line when the machine has them all (dpkg's
//             status, bound read-only) and fails with exit 100 naming the missing ones and
//             saying the machine's administrator adds them; `update`, `upgrade`, `clean`, ...
//             are a no-op line; anything else (remove, source, ...) fails with exit 100.
//   python    a symlink to the machine's python3 where there is no python beside it.
// Nothing here gives a step anything it could not do with its own uid; the machine's packages
// stay its administrator's.

#include <string>
#include <string_view>
#include <vector>

#include "sandbox/process/run.hpp"
#include "sandbox/wrap/mounts.hpp"

namespace sandbox {

inline constexpr std::string_view k_shim_dir = "/.sandgate/bin";

// The embedded sudo (static, freestanding).
std::string_view sudo_program();

// The apt-get/apt script (POSIX sh).
std::string_view apt_script();

// The files bwrap copies in: sudo and apt-get (program entries, with their contents).
std::vector<MountEntry> shim_programs();

// The rest of the shims' layout: apt (a symlink to apt-get), python (a symlink, when the machine
// has python3 in /usr/bin or /usr/local/bin and no python there), and dpkg's database
// (/var/lib/dpkg, read-only, when the machine has one).
std::vector<MountEntry> shim_mounts();

// Puts k_shim_dir on env's PATH just before its first system directory (/usr/local/sbin,
// /usr/local/bin, /usr/sbin, /usr/bin, /sbin, /bin), at its end when it has none, and sets
// the default PATH with it first when there is no PATH.
void prepend_shim_path(Environment& env);

}  // namespace sandbox
