#pragma once
// The action store: remote actions content-addressed on the trusted side, in the official
// runner's archive layout, so that the same directory can serve actions/runner's
// ACTIONS_RUNNER_ACTION_ARCHIVE_CACHE (and a runner's pre-filled one serves sandgate):
//
//   ARCHIVES/OWNER_REPO/SHA.tar.gz    the tree at SHA, one top directory (GitHub's tarball)
//   ARCHIVES/OWNER_REPO/refs          sandgate's pins: "REF<TAB>SHA" lines, written by pulls
//   WORK/trees/OWNER_REPO/SHA/        the archive unpacked, read-only (bound read-only into steps)
//   WORK/mirrors/OWNER_REPO.git       bare mirrors the git sources fetch into
//   WORK/lock                         held shared by every run using trees, exclusive by prune
//
// Nothing here is reachable by a step except the trees, and those only read-only. Archives
// and trees appear atomically (written under a `.tmp-` name, then renamed): a crashed unpack
// leaves only a `.tmp-` entry, which is never used and which prune removes. ARCHIVES may be
// read-only (a pre-filled cache): only pulls write to it.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "jobs/actions/action_ref.hpp"
#include "jobs/git/git_lock.hpp"

namespace jobs {

struct ActionStoreDirs {
    std::filesystem::path archives;  // ACTIONS_DIR
    std::filesystem::path work;      // trees, mirrors, lock
};

struct StoredAction {
    std::string name;  // OWNER_REPO
    std::string sha;
    std::uint64_t bytes = 0;        // the archive's size
    std::vector<std::string> refs;  // pinned refs naming this SHA
    bool unpacked = false;
};

enum class PruneArchives { keep, unreferenced };

class ActionStore {
public:
    explicit ActionStore(ActionStoreDirs dirs) : m_dirs(std::move(dirs)) {}

    // STATE/actions and STATE/action-work (inline: the agent daemon binds the trees without
    // linking the store).
    static ActionStoreDirs default_dirs(const std::filesystem::path& state_dir) {
        return {state_dir / "actions", state_dir / "action-work"};
    }

    const ActionStoreDirs& dirs() const { return m_dirs; }
    std::filesystem::path archive_path(const ActionRef& ref, const std::string& sha) const;
    bool has_archive(const ActionRef& ref, const std::string& sha) const;
    std::filesystem::path trees_root() const { return m_dirs.work / "trees"; }
    std::filesystem::path mirrors_root() const { return m_dirs.work / "mirrors"; }

    // The SHA the refs index pins `ref.ref` to, if any.
    std::optional<std::string> pinned(const ActionRef& ref) const;
    // Pins ref.ref to `sha` (the index rewritten atomically; other refs kept).
    common::Expected<void> pin(const ActionRef& ref, const std::string& sha) const;

    // Moves a finished archive written at `temp` (in the archive's own directory, made with
    // archive_temp_path) into place; an archive already there is kept and `temp` removed.
    common::Expected<std::filesystem::path> archive_temp_path(const ActionRef& ref,
                                                              const std::string& sha) const;
    common::Expected<void> commit_archive(const std::filesystem::path& temp, const ActionRef& ref,
                                          const std::string& sha) const;

    // The unpacked read-only tree of ref's repository at `sha`, unpacked from its archive
    // when not there yet (see the header comment). invalid_input when the archive is refused,
    // unavailable when there is no archive.
    common::Expected<std::filesystem::path> tree(const ActionRef& ref,
                                                 const std::string& sha) const;

    // Held by a run for as long as it uses trees (shared); prune takes it exclusively.
    common::Expected<FileLock> lock_shared() const;

    common::Expected<std::vector<StoredAction>> list() const;
    // Removes `.tmp-` leftovers and every unpacked tree (unpacked again on next use); with
    // PruneArchives::unreferenced also the archives no pin names. Refused (transient) while a
    // run holds the store. Returns what was removed, one line each.
    common::Expected<std::vector<std::string>> prune(PruneArchives archives) const;

private:
    ActionStoreDirs m_dirs;
};

}  // namespace jobs
