#pragma once
// The one way the trusted side (sandgate as the host: run, gate, hook, agent, broker) reaches a
// tree that a step can write: the worktree, the scratch and its HOME, TMPDIR, RUNNER_TEMP, the
// file-command files and their directory, problem-matcher files, the files hashFiles reads,
// reports, and whatever comes later (caches, artifacts). Nothing else opens such paths
// (tests/unit/sandbox/test_safe_access.cpp holds the code base to that).
//
// - A SafeDir is a directory fd the trusted side opened itself: from a path only it controls
//   (open_trusted: its own temp root, a worktree it made; the last component must not be a
//   symlink), or beneath another SafeDir.
// - Every path below a SafeDir is resolved by openat2(2) with RESOLVE_BENEATH |
//   RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV: a symlink in any component,
//   an absolute path, a ".." that leaves, a mount crossing all fail instead of leading out.
// - Files are opened O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY and fstat must say regular
//   file: a FIFO, socket, device or directory is refused before a byte is read (O_NONBLOCK makes
//   the open of a FIFO return at once).
// - Reads have a byte cap checked on the open file (a 1 TiB sparse file is refused unread), a
//   deadline and a cancel token, checked between chunks.
// - Files are created fresh (O_CREAT | O_EXCL) through the dirfd, never through a link and never
//   over an existing entry; directories with mkdirat, then opened beneath.
// - Walking lists entries with getdents64 on fds opened beneath; links are reported, never
//   followed. Removal is unlinkat beneath, never following a link.
//
// Errors are ErrorKind values whose messages name the caller's label (`$GITHUB_ENV`, a path
// relative to the tree) and what is wrong ("is not a regular file", "is larger than N bytes"):
// never the content, never a host path outside the tree, never whether one exists.
//
// Kernel: openat2 is Linux 5.6. Where it is missing (ENOSYS) or filtered (EPERM from a
// container's seccomp profile), every resolution fails with ErrorKind::unavailable ("needs
// openat2, Linux 5.6"): the trusted side then refuses to touch step-written files rather than
// fall back to a following open (fail closed). doctor reports it (openat2_available()).

#include <sys/stat.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sandbox/base.hpp"

namespace sandbox {

// The host identity that owns what the trusted side creates for the sandbox.
struct Owner {
    uid_t uid = 0;
    gid_t gid = 0;
};

// Bounds on one read (or one walk): at most max_bytes (a larger file is refused unread), until
// the deadline, until `cancel_fd` polls readable (a CancelToken's fd(): SIGTERM, a cancelled
// run); ErrorKind::timeout for both. An fd rather than the token keeps this module free of
// the process core.
struct ReadLimits {
    std::uint64_t max_bytes = 1 << 20;
    std::optional<std::chrono::steady_clock::time_point> deadline;
    int cancel_fd = -1;
};

enum class EntryKind { regular, directory, symlink, other };

struct WalkEntry {
    std::string relative;  // below the walked directory, '/'-separated
    EntryKind kind = EntryKind::other;
};

// What the visitor wants next: descend applies to directories only.
enum class WalkStep { descend, skip };

// Options for creating a file or a directory: its mode, and its owner when set (fchown right
// after creation, before anything else can reach it under its final mode).
struct CreateOptions {
    mode_t mode = 0644;
    std::optional<Owner> owner;
};

// True when this kernel resolves with openat2 (probed once, cached).
bool openat2_available();

// The raw resolution: openat2(dirfd, relative, flags | O_CLOEXEC | O_NOFOLLOW, the four
// RESOLVE_ flags). -1 with errno; ENOSYS also where openat2 is filtered. EAGAIN (a concurrent
// rename) is retried.
int open_beneath(int dirfd, const char* relative, int flags, mode_t mode = 0);

class SafeDir {
public:
    SafeDir() = default;
    SafeDir(SafeDir&&) noexcept = default;
    SafeDir& operator=(SafeDir&&) noexcept = default;

    // A directory whose path only the trusted side controls. The last component must be a
    // directory, not a symlink (O_NOFOLLOW | O_DIRECTORY); `label` names it in errors.
    static Expected<SafeDir> open_trusted(const std::filesystem::path& path, std::string label);
    // The same, created (mode, owner) when missing; its parent must exist.
    static Expected<SafeDir> make_trusted(const std::filesystem::path& path,
                                          const CreateOptions& options, std::string label);

    // A directory beneath (`relative` may have several components; none may be a symlink).
    Expected<SafeDir> open_dir(std::string_view relative, std::string label) const;
    // Creates each missing component of `relative` (mode, owner), then opens it. An existing
    // component must be a real directory.
    Expected<SafeDir> make_dirs(std::string_view relative, const CreateOptions& options,
                                std::string label) const;

    // A regular file beneath, read-only; `stat` receives its fstat when not null. ENOENT comes
    // back as ErrorKind::invalid_input "<label> does not exist" (see exists_file to ask first).
    Expected<Fd> open_file(std::string_view relative, const std::string& label,
                           struct stat* stat = nullptr) const;
    // As open_file, nullopt when nothing is there.
    Expected<std::optional<Fd>> open_file_if_present(std::string_view relative,
                                                     const std::string& label,
                                                     struct stat* stat = nullptr) const;
    // The whole content of a regular file beneath, within `limits`.
    Expected<std::string> read_file(std::string_view relative, const ReadLimits& limits,
                                    const std::string& label) const;
    // As read_file, nullopt when nothing is there.
    Expected<std::optional<std::string>> read_file_if_present(std::string_view relative,
                                                              const ReadLimits& limits,
                                                              const std::string& label) const;
    // Creates a new file beneath holding `content` (O_CREAT | O_EXCL: an existing entry, link or
    // not, is an error, ErrorKind::invalid_input "<label> exists already").
    Expected<void> create_file(std::string_view relative, std::string_view content,
                               const CreateOptions& options, const std::string& label) const;
    // The same, but an existing entry is left as it is (returns false): for seeding.
    Expected<bool> create_file_once(std::string_view relative, std::string_view content,
                                    const CreateOptions& options, const std::string& label) const;

    // Replaces the entry `name` (one component) by a new file holding `content`, atomically:
    // written under a fresh name (O_EXCL) and renamed over it (renameat replaces a link planted
    // there, never follows it). A reader never sees half of it.
    Expected<void> replace_file(std::string_view name, std::string_view content,
                                const CreateOptions& options, const std::string& label) const;

    // Removes the entry `relative` beneath this directory (its parents opened beneath, never
    // followed): a file or a link is unlinked, a directory is emptied depth-first without
    // following links (owner rwx restored on directories a step left closed) and removed. A
    // missing entry or parent is success.
    Expected<void> remove(std::string_view relative, const std::string& label) const;
    // Removes everything in this directory, keeping the directory itself.
    Expected<void> clear() const;

    // Visits every entry below this directory, depth-first, in no particular order; symlinks
    // and special files are reported, never followed or opened. A subdirectory that cannot be
    // opened beneath (another mount, no permission) is skipped. ErrorKind::timeout when the
    // limits' deadline passes or its token fires (max_bytes does not apply).
    Expected<void> walk(const std::function<WalkStep(const WalkEntry&)>& visit,
                        const ReadLimits& limits = {}) const;

    // Gives this directory and everything below it to `owner` (fchownat AT_SYMLINK_NOFOLLOW:
    // links themselves, never their targets), except the relative paths in `skip` (and what is
    // below them); entries owned already are left alone.
    Expected<void> chown_tree(const Owner& owner, const std::vector<std::string>& skip = {}) const;

    int fd() const { return m_fd.get(); }
    // The trusted side's path of this directory (for messages and binds; never re-resolved).
    const std::filesystem::path& path() const { return m_path; }
    const std::string& label() const { return m_label; }
    explicit operator bool() const { return m_fd.valid(); }

private:
    Expected<Fd> open_regular(std::string_view relative, const std::string& label,
                              struct stat* stat, bool* missing) const;
    SafeDir(Fd fd, std::filesystem::path path, std::string label)
        : m_fd(std::move(fd)), m_path(std::move(path)), m_label(std::move(label)) {}
    Fd m_fd;
    std::filesystem::path m_path;
    std::string m_label;
};

// Copies everything below `from` into `to` (which exists): directories made, regular files
// copied with their permission bits (no set-id bits), symlinks copied as links (never
// followed), anything else skipped; every new entry given to `owner` when set. An entry that
// exists in `to` already is an error (ErrorKind::invalid_input): `to` is expected fresh.
// Entries whose relative path is in `skip` are left out with everything below them.
Expected<void> copy_tree(const SafeDir& from, const SafeDir& to, const std::optional<Owner>& owner,
                         const std::vector<std::string>& skip = {});

// Removes `path` and everything beneath it (SafeDir::remove on its parent): the parent is the
// trusted side's (followed), `path` itself is unlinked when a link, never followed. A missing
// path (or parent) is success.
Expected<void> remove_tree(const std::filesystem::path& path);

// `path` relative to `root` when it lies beneath it lexically (no ".." left); nullopt otherwise.
std::optional<std::string> relative_beneath(const std::filesystem::path& root,
                                            const std::filesystem::path& path);

// Reads all of `fd` (a regular file) within `limits`; `label` names it in errors.
Expected<std::string> read_all(const Fd& fd, const ReadLimits& limits, const std::string& label);

}  // namespace sandbox
