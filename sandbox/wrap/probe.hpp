#pragma once
// What this machine allows the wrap to use: bwrap on PATH, user namespaces, seccomp, cgroups,
// container runtimes. The cheap probes are cached per process (they run on every plan); the
// report for `sandgate doctor` runs them all fresh.

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sandbox/base.hpp"

namespace sandbox {

// Looks `name` up the way execvp does in the directories of `path_list` (colon-separated; an
// empty entry is the current directory). Returns the first regular, executable candidate.
std::optional<std::filesystem::path> find_on_path(std::string_view name,
                                                  std::string_view path_list);

// The PATH sandgate itself searches for wrappers: $PATH, else a safe default.
std::string host_path_list();

// bwrap from PATH, or unavailable with what to install.
Expected<std::filesystem::path> find_bwrap();

// Whether this process may create the user, mount, pid and network namespaces bwrap needs
// (probed once per process in a short-lived child; cached). On refusal the message names the
// cause and the fix (kernel.apparmor_restrict_unprivileged_userns, max_user_namespaces, ...).
Expected<void> check_user_namespaces();

// Whether the kernel can load a seccomp filter (CONFIG_SECCOMP_FILTER).
Expected<void> check_seccomp();

// Reads a small /proc or /sys file, trimmed; nullopt when unreadable.
std::optional<std::string> read_small_file(const std::filesystem::path& path);

// The mount point of the cgroup2 hierarchy (from /proc/self/mountinfo), if any.
std::optional<std::filesystem::path> cgroup2_mount();

// The mount point of a cgroup v1 hierarchy carrying `controller` ("pids", "memory"), if any.
std::optional<std::filesystem::path> cgroup1_mount(std::string_view controller);

}  // namespace sandbox
