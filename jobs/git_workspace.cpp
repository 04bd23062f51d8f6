#include "jobs/git_workspace.hpp"

#include <sys/stat.h>

#include <spdlog/spdlog.h>

#include "jobs/git_handles.hpp"
#include "jobs/git_remove.hpp"

namespace jobs {
namespace {

namespace fs = std::filesystem;
using sandbox::ErrorKind;

struct SubmoduleEntry {
    std::string name;
    std::string path;
    std::string url;  // resolved against the superproject's origin
    git_oid commit{};
};

int collect_submodule(git_submodule* submodule, const char* name, void* payload) {
    auto* entries = static_cast<std::vector<SubmoduleEntry>*>(payload);
    const git_oid* head = git_submodule_head_id(submodule);
    const char* url = git_submodule_url(submodule);
    if (head == nullptr || url == nullptr) return 0;  // not in HEAD's tree, or no url
    GitBuf resolved;
    if (git_submodule_resolve_url(resolved.get(), git_submodule_owner(submodule), url) != 0) return -1;
    entries->push_back({name, git_submodule_path(submodule), std::string(resolved.view()), *head});
    git_submodule_init(submodule, 0);  // records submodule.<name>.url, as `git submodule init`
    return 0;
}

sandbox::Expected<std::vector<SubmoduleEntry>> list_submodules(const fs::path& worktree) {
    git_repository* raw = nullptr;
    if (int rc = git_repository_open_ext(&raw, worktree.c_str(), GIT_REPOSITORY_OPEN_NO_SEARCH, nullptr); rc != 0)
        return git_fail(ErrorKind::permanent, "open " + worktree.string(), rc);
    GitRepository repository(raw);
    std::vector<SubmoduleEntry> entries;
    if (int rc = git_submodule_foreach(repository.get(), collect_submodule, &entries); rc != 0)
        return git_fail(ErrorKind::invalid_input, "submodules of " + worktree.string(), rc);
    return entries;
}

sandbox::Expected<void> checkout_submodules(const MirrorCache& cache, const GitCheckoutRequest& request,
                                            GitCheckoutResult& result) {
    auto entries = list_submodules(request.path);
    if (!entries) return std::unexpected(entries.error());
    for (const auto& entry : *entries) {
        GitCheckoutRequest sub;
        sub.source.remote = entry.url;
        sub.source.sha = oid_hex(entry.commit);
        sub.source.token = request.source.token;  // offered to the same host only
        sub.path = request.path / entry.path;
        sub.depth = request.depth;
        sub.submodules = request.submodules == SubmoduleMode::recursive ? SubmoduleMode::recursive
                                                                        : SubmoduleMode::none;
        auto done = checkout_commit(cache, sub);
        if (!done)
            return sandbox::fail(done.error().kind, "submodule " + entry.name + ": " + done.error().message);
        if (done->mirror.presence == CommitPresence::missing)
            return sandbox::fail(ErrorKind::permanent, "submodule " + entry.name + ": commit " +
                                                           sub.source.sha + " is not in " + done->mirror.remote.fetch_url);
        result.mirror_gitdirs.insert(result.mirror_gitdirs.end(), done->mirror_gitdirs.begin(),
                                     done->mirror_gitdirs.end());
    }
    return {};
}

// Empties `path` for a second attempt, keeping the directory itself.
sandbox::Expected<void> reset_dir(const fs::path& path) {
    if (auto removed = remove_tree(path); !removed) return removed;
    if (::mkdir(path.c_str(), 0700) != 0)
        return sandbox::fail(ErrorKind::permanent, sandbox::errno_message("mkdir " + path.string()));
    return {};
}

}  // namespace

sandbox::Expected<GitCheckoutResult> checkout_commit(const MirrorCache& cache, const GitCheckoutRequest& request) {
    auto mirror = cache.ensure_commit(request.source);
    if (!mirror) return std::unexpected(mirror.error());
    GitCheckoutResult result;
    result.mirror = *mirror;
    if (mirror->presence == CommitPresence::missing) return result;
    WorktreeSpec spec;
    spec.mirror_gitdir = mirror->gitdir;
    spec.origin_url = mirror->remote.fetch_url;
    spec.commit = mirror->commit;
    spec.path = request.path;
    spec.depth = request.depth;
    spec.ref = request.source.ref;
    auto made = materialise_worktree(spec);
    if (!made) {
        // An object the quick check could not see as damaged (a corrupt pack, say): re-clone
        // once, never trusting the old mirror again, and retry from an empty directory.
        spdlog::warn("checkout from mirror {} failed ({}); re-cloning", mirror->gitdir.string(), made.error().message);
        if (auto reset = reset_dir(request.path); !reset) return std::unexpected(reset.error());
        mirror = cache.reclone(request.source);
        if (!mirror) return std::unexpected(mirror.error());
        result.mirror = *mirror;
        if (mirror->presence == CommitPresence::missing) return result;
        spec.mirror_gitdir = mirror->gitdir;
        if (made = materialise_worktree(spec); !made) return std::unexpected(made.error());
    }
    result.mirror_gitdirs.push_back(mirror->gitdir);
    if (request.submodules != SubmoduleMode::none)
        if (auto subs = checkout_submodules(cache, request, result); !subs) return std::unexpected(subs.error());
    return result;
}

}  // namespace jobs
