#pragma once
// The filesystem the wrapped command sees, as an ordered list of mounts that wrap_bwrap turns
// into bwrap options. Layout: the system (/usr and the usual top-level symlinks, a generated
// /etc with an allowlist of harmless host files) read-only; a private /proc, /dev and sized
// /tmp; the working directory and the scratch writable; the policy's extra binds; the agent's
// own state and config masked; the root read-only. Never /run, the host /tmp or the real HOME.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "sandbox/base.hpp"

namespace sandbox {

enum class MountKind {
    ro_bind,  // source bound read-only at dest
    // source bound read-only at dest when it exists: bwrap looks (`--ro-bind-try`), which
    // spares the plan a stat for system paths that may be missing on a given host
    ro_bind_try,
    bind,          // source bound read-write at dest
    hide_dir,      // an empty read-only tmpfs over dest
    hide_file,     // /dev/null bound read-only over dest
    symlink,       // dest is a symlink to source (a relative or absolute target)
    data,          // dest is a read-only file holding `content`, copied into the root (no mount)
    host_file,     // dest is a read-only copy of the host's regular file `source` (no mount)
    proc,          // a new procfs for the new pid namespace
    dev,           // a minimal /dev (null, zero, full, random, urandom, tty, pts, shm)
    tmpfs,         // a private tmpfs of `size` bytes, mode 1777
    private_dir,   // dest is a new directory, mode 0700, owned by the sandbox uid (no mount)
    private_file,  // dest is a new file holding `content`, mode 0644, the sandbox uid's
    program,       // dest is a read-only executable holding `content`, mode 0555 (no mount)
};

struct MountEntry {
    MountKind kind = MountKind::ro_bind;
    std::filesystem::path dest;
    std::filesystem::path source;
    std::string content;     // data, private_file and program only
    int priority = 0;        // same depth: lower first (a later mount covers an earlier one)
    std::uint64_t size = 0;  // tmpfs only
    int fd = -1;             // data, host_file, private_file: the fd bwrap copies the contents from
    // Set when plan_portal moved `source` to a portal path (seen only in the wrapper's mount
    // namespace): the host path the portal's fd was opened from, for lookups made out here.
    std::filesystem::path host_source{};
};

// Makes `path` absolute (against the current directory) and lexically normal, then refuses it
// when any existing component is a symlink (a link planted in a worktree must not redirect a
// bind), or when it does not exist and `must_exist`. `what` names the flag or field.
enum class MustExist { no, yes };
Expected<std::filesystem::path> checked_bind_path(const std::filesystem::path& path,
                                                  std::string_view what, MustExist must_exist);

// Refuses a bind (working directory, --read-only, --writable, --scratch, cache) that is, or
// contains, the host's /tmp, /var/tmp, /run, /var/run, /dev/shm, /proc, /sys, /dev, /etc,
// /boot or the real HOME.
Expected<void> refuse_host_roots(const std::filesystem::path& path, std::string_view what);

// True when `inner` is `outer` or lies below it (both absolute and normal).
bool path_within(const std::filesystem::path& inner, const std::filesystem::path& outer);

// The system part of the layout's mounts: /usr, top-level symlinks, procfs protection, the
// allowlisted /etc directories, resolv.conf only when `with_resolv`.
enum class WithResolv { no, yes };
std::vector<MountEntry> system_mounts(WithResolv with_resolv);

// The files of the generated /etc, which bwrap copies into the sandbox's root: passwd, group,
// hosts, nsswitch.conf and hostname for `uid`/`gid` with `home` (data entries), and the
// allowlisted host files (host_file entries, each looked at only when it is opened).
std::vector<MountEntry> system_files(unsigned uid, unsigned gid, const std::filesystem::path& home);

// The agent's own files that must never be visible: its state and config directories
// ($XDG_STATE_HOME/sandgate, $XDG_CONFIG_HOME/sandgate, their ~/.local/state and ~/.config
// defaults, $SANDGATE_STATE_DIR, $SANDGATE_CONFIG), those that exist and that a bind or
// read-only bind among `entries` would show (only those are looked up on disk).
std::vector<std::filesystem::path> agent_private_paths(const std::vector<MountEntry>& entries);

// Orders entries so that a parent is mounted before anything below it (depth, then priority).
void order_mounts(std::vector<MountEntry>& entries);

// Whether `path` (absolute, with no symlinks left) is visible inside the wrap: the deepest entry
// at or above it is a bind (hidden paths and plain tmpfs roots are not).
bool visible_inside(const std::vector<MountEntry>& ordered, const std::filesystem::path& path);

}  // namespace sandbox
