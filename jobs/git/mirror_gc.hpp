#pragma once
// Garbage collection of the mirror cache (its layout: jobs/git/git_mirror_layout.hpp). Disk is
// reclaimed from the scopes of repositories no longer served and from mirrors nobody used
// for a while, including the flat mirrors of earlier versions (<state>/mirrors/<name>.git).
//
// Last use: <state>/mirrors/last-use/<scope> is touched (its mtime) when a job of that
// repository starts (make_mirror_scope) and whenever a fetch goes through the scope's mirrors
// (MirrorCache). A scope without that record (made by an older version) counts as used at the
// newest mtime of its directory, its repo.git and repo.git/FETCH_HEAD; a flat mirror likewise
// (its directory, FETCH_HEAD, its lock file).
//
// Contract of collect_mirrors():
// - removes a scope (or flat mirror) when its name is not among `served` (when set), or when
//   it was last used more than `max_idle` ago; never one named in `in_use` (running jobs);
// - takes the locks the fetch path takes, without waiting (a mirror being fetched into is
//   kept and reported busy): <scope>.lock and every <scope>.<module>.lock, or the flat
//   mirror's <name>.lock. Under them it looks at the last use again (a job that started
//   meanwhile keeps its scope) and renames the directory into <state>/mirrors/gc-trash.*/
//   before removing anything, so a later fetch finds either the whole mirror or none: never
//   a half-deleted one. Trash left by an interrupted collection is removed first.
// - the last-use record goes with its scope, and so do its lock files (<scope>.lock, every
//   <scope>.<module>.lock; a flat mirror's <name>.lock), each unlinked while held: a fetch
//   that opened one and waits for it re-checks after its flock that the path still names the
//   file it locked, and else locks the path's new file (jobs/git/git_lock.hpp), so two fetches
//   never both hold "the" lock. A lock file that cannot be unlinked is left (warned; empty).
// - errors are values: one mirror that cannot be removed is logged and reported in `failed`,
//   the others are still collected; the call fails (permanent) only when the mirrors directory
//   cannot be read. A missing mirrors directory is an empty report.
// Needs neither libgit2 nor OpenSSL: the agent daemon runs it.

#include <chrono>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"

namespace jobs {

inline constexpr std::chrono::hours k_default_mirror_max_idle{14 * 24};

// Records a use of the scope `scope_name` now (creating <mirrors>/last-use/ when missing).
// permanent on I/O errors; callers log it and go on (a missed record only ages the scope).
common::Expected<void> record_mirror_use(const std::filesystem::path& mirrors_dir,
                                         std::string_view scope_name);

// The scope directory name (mirror_dir_name) of the repository `remote`, as a job is given it.
// invalid_input for a remote parse_remote refuses.
common::Expected<std::string> mirror_scope_name(std::string_view remote);

struct MirrorGcPolicy {
    std::chrono::seconds max_idle = k_default_mirror_max_idle;
    // Scope names of the repositories the agent serves; nullopt: any repository may be served,
    // so none is removed for not being listed (only for being idle).
    std::optional<std::set<std::string>> served;
    std::set<std::string> in_use;  // scope names of running jobs: never removed
};

enum class MirrorGcReason { unserved, idle };
std::string_view to_string(MirrorGcReason reason);
enum class MirrorKind { scope, flat };

struct MirrorGcRemoval {
    std::string name;  // the scope's directory name, or the flat mirror's (<name>.git)
    MirrorKind kind = MirrorKind::scope;
    MirrorGcReason reason = MirrorGcReason::idle;
};

struct MirrorGcReport {
    std::vector<MirrorGcRemoval> removed;
    std::vector<std::string> busy;    // names kept because a fetch held their lock
    std::vector<std::string> failed;  // one message per mirror that could not be removed
    std::size_t kept = 0;             // mirrors looked at and kept (served, used, in use)
};

// now: removes the trash (the old and this collection's) before returning. deferred: leaves
// it for empty_mirror_trash(), so a caller with a loop to keep turning (the agent daemon)
// removes large mirrors on another thread; the renames, under the locks, are done either way.
enum class TrashRemoval { now, deferred };

common::Expected<MirrorGcReport> collect_mirrors(
    const std::filesystem::path& state_dir, const MirrorGcPolicy& policy,
    std::chrono::system_clock::time_point now = std::chrono::system_clock::now(),
    TrashRemoval removal = TrashRemoval::now);

// Removes every <state>/mirrors/gc-trash.* directory; returns how many went. Failures are
// logged and the first is returned (permanent); what could be removed is gone. Must not run
// beside a collect_mirrors() with TrashRemoval::now on the same state directory.
common::Expected<std::size_t> empty_mirror_trash(const std::filesystem::path& state_dir);

}  // namespace jobs
