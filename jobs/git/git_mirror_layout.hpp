#pragma once
// Where MirrorCache keeps each mirror: one directory per repository jobs are run for (its
// "scope"), so that a job's sandbox binds exactly the mirrors its checkout reads, and nothing
// of the other repositories the agent serves.
//
//   <state>/mirrors/<scope>/                    bound read-only into the jobs of that repository
//   <state>/mirrors/<scope>/repo.git            the repository's bare mirror
//   <state>/mirrors/<scope>/modules/<name>.git  the mirrors of its submodules, at any depth
//   <state>/mirrors/<scope>/...tmp-*, ...trash-*  mirrors being created or replaced
//   <state>/mirrors/locks/<scope>.lock          the flock of repo.git
//   <state>/mirrors/locks/<scope>.<name>.lock   the flock of modules/<name>.git
//   <state>/mirrors/last-use/<scope>            its mtime: the scope's last use (mirror_gc.hpp)
//   <state>/mirrors/gc-trash.*/                 mirrors being removed by the gc
//
// <scope> and <name> are mirror_dir_name() of the remotes ("<name>-<16 hex>", so "locks" is
// never a scope). The scope exists before any job's sandbox does and mirrors are renamed into
// it, so a live bind of it shows mirrors made later (submodules found only after a fetch). The
// locks lie outside every scope: a step that can read a lock file can also flock it, and would
// stall its repository's next fetch.
//
// A submodule shared by two repositories is mirrored once under each: disk traded for
// isolation. A submodule's remote comes from the commit under test (.gitmodules), so it is
// checked before anything is fetched: a local path (or file://) is refused under an http(s)
// repository (git's protocol.file.allow=user for submodules), and a local path inside the
// state directory is always refused (it would copy another repository's mirror, or another
// job's worktree, into this scope).
//
// The flat layout of earlier versions (<state>/mirrors/<name>.git beside <name>.lock) is
// adopted on first use: the old mirror is renamed into the first scope that asks for its
// remote (under its old lock too), then trusted or re-cloned like any mirror; another scope
// wanting the same remote later clones its own.

#include <filesystem>
#include <string_view>

#include "common/error.hpp"
#include "jobs/git/git_url.hpp"

namespace jobs {

struct MirrorLayout {
    std::filesystem::path scope;          // <state>/mirrors/<scope>
    std::filesystem::path gitdir;         // scope/repo.git, or scope/modules/<name>.git
    std::filesystem::path lock;           // <state>/mirrors/locks/...
    std::filesystem::path legacy_gitdir;  // the flat layout's <state>/mirrors/<name>.git
    std::filesystem::path legacy_lock;    // and its lock
};

// The paths for mirroring `remote` in the scope of `scope` (the job's repository; `remote`
// itself when its keys match). Pure: nothing is created.
MirrorLayout mirror_layout(const std::filesystem::path& mirrors_dir, const RemoteUrl& scope,
                           const RemoteUrl& remote);

// The scope directory of the repository `remote` (as a job is given it) under `state_dir`,
// created when missing (the mirrors directory 0700), as a physical path (the wrap binds
// physical paths): every mirror a checkout of that repository reads lies below it, now or once
// fetched. invalid_input for a remote parse_remote refuses; permanent on I/O errors. Needs
// neither libgit2 nor OpenSSL: the agent daemon calls it before creating a job's sandbox.
common::Expected<std::filesystem::path> make_mirror_scope(const std::filesystem::path& state_dir,
                                                          std::string_view remote);

// invalid_input (naming the remote) when a submodule `remote` may not be mirrored in the
// scope of `scope` (see above). `state_dir` need not be canonical.
common::Expected<void> check_module_remote(const std::filesystem::path& state_dir,
                                           const RemoteUrl& scope, const RemoteUrl& remote);

// When layout.gitdir is absent and layout.legacy_gitdir exists, renames the latter into place
// while holding its old lock (the caller holds layout.lock), and removes the old lock file and
// the old layout's leftovers. permanent on I/O errors (the caller then simply clones).
common::Expected<void> adopt_legacy_mirror(const MirrorLayout& layout);

}  // namespace jobs
