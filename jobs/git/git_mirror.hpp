#pragma once
// The repository cache: bare mirrors under <state-dir>/mirrors/, one directory (scope) per
// repository jobs are run for, holding its mirror and its submodules' mirrors (the layout, its
// locks and the adoption of the old flat layout: jobs/git/git_mirror_layout.hpp). Jobs only ever
// read mirrors; a mirror's lock is held exclusively while it is checked, created, fetched into
// or replaced, and a mirror being created is renamed into place when whole.
//
// A mirror is trusted only when its completion marker (written last, before the rename into
// place) is present, libgit2 opens it as a bare repository, every ref's object exists, and the
// wanted commit, its tree and the tree's entries are readable. Anything else is moved aside and
// re-cloned. Fetches only add objects (packs are renamed into place), so readers such as the
// worktrees' alternates never need the lock.

#include <git2.h>

#include <filesystem>
#include <optional>
#include <string>

#include "common/error.hpp"
#include "jobs/git/git_fetch.hpp"
#include "jobs/git/git_url.hpp"

namespace jobs {

struct MirrorRequest {
    std::string remote;  // a path, file:// or http(s):// URL, as the user gave it
    std::string sha;     // a full 40-hex commit SHA
    std::string ref;     // optional: a ref to fetch besides the mirror's refspecs
    // http(s) only; kept in memory. Sent only to the gated repository (`scope`, or `remote`
    // when scope is empty): a submodule on another path or host is fetched without it.
    std::optional<GitToken> token;
    // The repository the job is for, as given, when `remote` is one of its submodules: the
    // mirror then lives in that repository's scope. Empty: `remote` is the job's repository.
    std::string scope;
};

enum class CommitPresence { present, missing };
enum class MirrorEvent { none, fetched, cloned, recloned };

struct Mirror {
    std::filesystem::path gitdir;  // the bare mirror
    std::filesystem::path scope;   // the directory holding it: what a job's sandbox binds
    RemoteUrl remote;
    RemoteUrl scope_remote;  // the job's repository (== remote unless a submodule)
    git_oid commit{};
    CommitPresence presence = CommitPresence::missing;  // missing: the remote lacks the SHA
    MirrorEvent event = MirrorEvent::none;              // what ensure_commit had to do
};

class MirrorCache {
public:
    // `state_dir` is created (0700) on first use.
    explicit MirrorCache(std::filesystem::path state_dir);

    // $XDG_STATE_HOME/sandgate, falling back to $HOME/.local/state/sandgate.
    static std::filesystem::path default_state_dir();

    // Makes sure the mirror of request.remote holds request.sha: fetches only when the commit
    // is missing; creates or re-clones the mirror when absent or untrustworthy. Holds the
    // mirror's lock throughout, so concurrent callers serialise per mirror. A SHA the remote
    // does not have is not an error: presence == missing. Errors: invalid_input (bad SHA or
    // remote, or a submodule remote refused by check_module_remote), unavailable (remote
    // unreachable or credentials refused), permanent (local I/O).
    common::Expected<Mirror> ensure_commit(const MirrorRequest& request) const;

    // Re-clones the mirror of `request.remote` unconditionally (after a checkout found an
    // object unreadable), then ensures the commit as above.
    common::Expected<Mirror> reclone(const MirrorRequest& request) const;

    // make_mirror_scope(state_dir(), remote): the directory a job of that repository binds.
    common::Expected<std::filesystem::path> scope_dir(std::string_view remote) const;

    const std::filesystem::path& state_dir() const { return m_state_dir; }
    std::filesystem::path mirrors_dir() const { return m_state_dir / "mirrors"; }

private:
    enum class Trust { verify, distrust };
    common::Expected<Mirror> ensure(const MirrorRequest& request, Trust trust) const;

    std::filesystem::path m_state_dir;
};

// The file whose presence marks a mirror as completely created.
inline constexpr const char* k_mirror_marker = "sandgate-mirror";

}  // namespace jobs
