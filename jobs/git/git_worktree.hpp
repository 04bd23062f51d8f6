#pragma once
// Per-job worktrees: a standalone repository whose .git/ lives in the worktree (so git inside
// the wrap can write its index, HEAD and config) and whose objects come from the shared mirror
// through .git/objects/info/alternates (so the mirror can stay read-only to the job). Checked
// out with libgit2 at the exact commit, HEAD detached, index written: `git status` is clean.
//
// Why not `git worktree add`: a linked worktree's .git file points into the mirror's
// worktrees/<id>/, which must be writable for git to work; not acceptable for a shared mirror.
//
// Layout of the area (<state>/worktrees/):
//   <id>/        the worktree
//   <id>.lease   flock held by the owning process for the worktree's lifetime; holds its pid.
// A lease nobody holds belongs to a crashed run: reap_stale() removes its worktree.

#include <git2.h>

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "jobs/git/git_lock.hpp"

namespace jobs {

struct WorktreeSpec {
    std::filesystem::path mirror_gitdir;  // the bare mirror holding the commit
    std::string origin_url;               // recorded as remote.origin.url (never a credential)
    git_oid commit{};
    std::filesystem::path path;  // the worktree: must be missing or an empty directory
    unsigned depth = 0;          // 0: whole history; N: shallow at N commits, as fetch-depth N
    std::string ref;             // optional: also recorded as refs/remotes/origin/<branch>
};

// Creates the repository at spec.path and checks the commit out (detached). On error,
// whatever was written under spec.path is left for the caller to remove. permanent on I/O or
// an unreadable object (the mirror may be damaged: see MirrorCache::reclone).
common::Expected<void> materialise_worktree(const WorktreeSpec& spec);

// Environment for git run by a job in `worktree`: marks it a safe.directory through
// GIT_CONFIG_COUNT (git honours that as command-line configuration), for when the uid inside
// the wrap differs from the worktree's owner.
std::vector<std::pair<std::string, std::string>> worktree_git_environment(
    const std::filesystem::path& worktree);

// One job's worktree directory, with its lease held. Destruction removes the directory (never
// following symlinks out of it) and the lease.
class JobWorktree {
public:
    JobWorktree(JobWorktree&& other) noexcept;
    JobWorktree& operator=(JobWorktree&&) noexcept;
    ~JobWorktree();

    const std::filesystem::path& path() const { return m_path; }

    // Removes the worktree now; the error says what could not be removed.
    common::Expected<void> remove();

private:
    friend class WorktreeArea;
    JobWorktree(std::filesystem::path path, std::filesystem::path lease_path, FileLock lease);

    std::filesystem::path m_path;
    std::filesystem::path m_lease_path;
    std::optional<FileLock> m_lease;
};

class WorktreeArea {
public:
    // Worktrees live under `state_dir`/worktrees.
    explicit WorktreeArea(const std::filesystem::path& state_dir);

    // A new, empty worktree directory "<label>-<random>" with its lease held.
    common::Expected<JobWorktree> create(std::string_view label);

    // Removes worktrees whose lease is not held by a live process (and directories that have
    // no lease). Returns how many it removed.
    std::size_t reap_stale();

    const std::filesystem::path& dir() const { return m_dir; }

private:
    std::filesystem::path m_dir;
};

}  // namespace jobs
