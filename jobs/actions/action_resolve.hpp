#pragma once
// Resolution of a run's remote actions on the trusted side, before any job starts: every
// `uses: OWNER/REPO[/PATH]@REF` of the selected workflows' steps (through local reusable
// workflows they call and, recursively, the composite actions they use) is resolved to a full
// commit SHA, its archive found in (or fetched into) the action store, unpacked read-only and
// its action.yml read. The result is the run's lock (reported in the run's JSON report).
//
// A ref resolves from the store's pins first (a pulled ref stays pinned until the next pull),
// then from the source; PinRefresh::from_source (`sandgate actions pull`) asks the source
// first. What cannot be resolved is an entry with `error` set: the step that uses it fails
// closed with that one line, which names the action and the command that fills the cache.
//
// Thread-safe. An action met only while jobs run is resolved then, the same way.

#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "jobs/actions/action_ref.hpp"
#include "jobs/actions/action_source.hpp"
#include "jobs/actions/action_store.hpp"
#include "jobs/git/git_lock.hpp"
#include "jobs/workflow/workflow_model.hpp"

namespace jobs {

enum class PinRefresh { cached_first, from_source };

struct ResolveOptions {
    PinRefresh refresh = PinRefresh::cached_first;
    // The command a cache miss names, e.g. "sandgate actions pull -C /src/repo".
    std::string fill_command = "sandgate actions pull";
};

// The actions sandgate answers itself, never resolved nor fetched: actions/checkout (its own
// checkout), egress monitors whose job the wrap already does (step-security/harden-runner),
// which succeed as a logged no-op, and the services the official runner talks to: actions/cache
// (and cache/restore, cache/save) on a local store, upload-artifact and download-artifact on
// the run's artifacts (jobs/builtins/step_builtins.cpp).
enum class BuiltinAction {
    none,
    checkout,
    wrap_does_it,
    cache,
    cache_restore,
    cache_save,
    upload_artifact,
    download_artifact
};
BuiltinAction builtin_action(std::string_view uses);
bool is_builtin_action(std::string_view uses);

class ActionResolver {
public:
    ActionResolver(ActionStore store, ActionSource source, ResolveOptions options);

    // Resolves every remote `uses:` of `workflows` (local reusable workflows they call are
    // loaded relative to `repository`).
    void resolve_workflows(const std::vector<Workflow>& workflows,
                           const std::filesystem::path& repository);

    // The entry for `uses` (a remote reference), resolved earlier or now.
    LockedAction get(std::string_view uses);

    // The lock so far, in the order first met.
    std::vector<LockedAction> lock() const;
    // The directory binding every tree (empty until one was unpacked).
    std::filesystem::path trees_root() const;

    const ActionStore& store() const { return m_store; }

private:
    const LockedAction& resolve_locked(std::string_view uses, int depth);
    LockedAction resolve_entry(std::string_view uses);
    void resolve_steps(const std::vector<Step>& steps, int depth);
    std::string miss_message(const ActionRef& ref, const std::string& why) const;

    ActionStore m_store;
    ActionSource m_source;
    ResolveOptions m_options;
    mutable std::mutex m_mutex;
    std::vector<LockedAction> m_entries;
    std::optional<FileLock> m_store_lock;  // shared, while trees are in use (prune waits)
};

}  // namespace jobs
