#include "jobs/git/git_workspace.hpp"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>

#include "common/fd.hpp"
#include "common/temp_dir.hpp"
#include "jobs/git/git_handles.hpp"
#include "jobs/git/git_remove.hpp"

namespace jobs {
namespace {

namespace fs = std::filesystem;
using common::ErrorKind;

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
    if (git_submodule_resolve_url(resolved.get(), git_submodule_owner(submodule), url) != 0)
        return -1;
    entries->push_back({name, git_submodule_path(submodule), std::string(resolved.view()), *head});
    git_submodule_init(submodule, 0);  // records submodule.<name>.url, as `git submodule init`
    return 0;
}

common::Expected<std::vector<SubmoduleEntry>> list_submodules(const fs::path& worktree) {
    git_repository* raw = nullptr;
    if (int rc =
            git_repository_open_ext(&raw, worktree.c_str(), GIT_REPOSITORY_OPEN_NO_SEARCH, nullptr);
        rc != 0)
        return git_fail(ErrorKind::permanent, "open " + worktree.string(), rc);
    GitRepository repository(raw);
    std::vector<SubmoduleEntry> entries;
    if (int rc = git_submodule_foreach(repository.get(), collect_submodule, &entries); rc != 0)
        return git_fail(ErrorKind::invalid_input, "submodules of " + worktree.string(), rc);
    return entries;
}

common::Expected<void> checkout_submodules(const MirrorCache& cache,
                                           const GitCheckoutRequest& request,
                                           GitCheckoutResult& result) {
    auto entries = SANDGATE_TRY(list_submodules(request.path));
    for (const auto& entry : entries) {
        GitCheckoutRequest sub;
        sub.source.remote = entry.url;
        sub.source.sha = oid_hex(entry.commit);
        sub.source.token = request.source.token;  // sent only if it is the gated repository itself
        sub.source.scope =
            request.source.scope.empty() ? request.source.remote : request.source.scope;
        sub.path = request.path / entry.path;
        sub.depth = request.depth;
        sub.submodules = request.submodules == SubmoduleMode::recursive ? SubmoduleMode::recursive
                                                                        : SubmoduleMode::none;
        auto done = checkout_commit(cache, sub);
        if (!done)
            return common::fail(done.error().kind,
                                "submodule " + entry.name + ": " + done.error().message);
        if (done->mirror.presence == CommitPresence::missing)
            return common::fail(ErrorKind::permanent, "submodule " + entry.name + ": commit " +
                                                          sub.source.sha + " is not in " +
                                                          done->mirror.remote.fetch_url);
        result.mirror_gitdirs.insert(result.mirror_gitdirs.end(), done->mirror_gitdirs.begin(),
                                     done->mirror_gitdirs.end());
    }
    return {};
}

// Empties `path` for a second attempt, keeping the directory itself.
common::Expected<void> reset_dir(const fs::path& path) {
    if (auto removed = remove_tree(path); !removed) return removed;
    if (::mkdir(path.c_str(), 0700) != 0)
        return common::fail(ErrorKind::permanent, common::errno_message("mkdir " + path.string()));
    return {};
}

struct GitmodulesEntry {
    std::string path;
    std::string url;
};

int collect_gitmodules(const git_config_entry* entry, void* payload) {
    auto* entries = static_cast<std::map<std::string, GitmodulesEntry>*>(payload);
    const std::string key = entry->name;  // submodule.<name>.path / .url
    const auto last = key.rfind('.');
    const std::string name = key.substr(10, last - 10);
    if (key.substr(last + 1) == "path")
        (*entries)[name].path = entry->value;
    else
        (*entries)[name].url = entry->value;
    return 0;
}

// submodule name -> path and url, from the .gitmodules blob of `tree` (empty when none).
std::map<std::string, GitmodulesEntry> read_gitmodules(git_repository* repository, git_tree* tree) {
    std::map<std::string, GitmodulesEntry> entries;
    git_tree_entry* raw = nullptr;
    if (git_tree_entry_bypath(&raw, tree, ".gitmodules") != 0) return entries;
    std::unique_ptr<git_tree_entry, GitFree<git_tree_entry, git_tree_entry_free>> entry(raw);
    git_blob* blob_raw = nullptr;
    if (git_blob_lookup(&blob_raw, repository, git_tree_entry_id(entry.get())) != 0) return entries;
    std::unique_ptr<git_blob, GitFree<git_blob, git_blob_free>> blob(blob_raw);
    // libgit2 parses config files only from disk: an unlinked-on-exit temp file.
    std::string path = (common::host_temp_dir() / "sandgate-gitmodules-XXXXXX").string();
    common::Fd fd(::mkstemp(path.data()));
    if (!fd) return entries;
    const auto size = static_cast<std::size_t>(git_blob_rawsize(blob.get()));
    const bool written =
        ::write(fd.get(), git_blob_rawcontent(blob.get()), size) == static_cast<ssize_t>(size);
    git_config* config_raw = nullptr;
    if (written && git_config_open_ondisk(&config_raw, path.c_str()) == 0) {
        GitConfig config(config_raw);
        git_config_foreach_match(config.get(), "^submodule\\..*\\.(path|url)$", collect_gitmodules,
                                 &entries);
    }
    ::unlink(path.c_str());
    return entries;
}

void collect_submodule_mirrors(const MirrorCache& cache, const Mirror& mirror,
                               const std::optional<GitToken>& token, int depth,
                               std::vector<fs::path>& out) {
    if (depth > 8) return;  // submodules of submodules of ...: enough
    git_repository* raw = nullptr;
    if (git_repository_open_bare(&raw, mirror.gitdir.c_str()) != 0) return;
    GitRepository repository(raw);
    git_commit* commit_raw = nullptr;
    if (git_commit_lookup(&commit_raw, repository.get(), &mirror.commit) != 0) return;
    GitCommit commit(commit_raw);
    git_tree* tree_raw = nullptr;
    if (git_commit_tree(&tree_raw, commit.get()) != 0) return;
    GitTree tree(tree_raw);
    for (const auto& [name, entry] : read_gitmodules(repository.get(), tree.get())) {
        git_tree_entry* link_raw = nullptr;
        if (entry.path.empty() || entry.url.empty() ||
            git_tree_entry_bypath(&link_raw, tree.get(), entry.path.c_str()) != 0)
            continue;
        std::unique_ptr<git_tree_entry, GitFree<git_tree_entry, git_tree_entry_free>> link(
            link_raw);
        if (git_tree_entry_type(link.get()) != GIT_OBJECT_COMMIT) continue;
        MirrorRequest request{resolve_submodule_url(mirror.remote.fetch_url, entry.url),
                              oid_hex(*git_tree_entry_id(link.get())), "", token,
                              mirror.scope_remote.fetch_url};
        auto sub = cache.ensure_commit(request);
        if (!sub || sub->presence == CommitPresence::missing) {
            spdlog::warn("submodule {}: {}", name,
                         sub ? "commit " + request.sha + " is not in " + sub->remote.fetch_url
                             : sub.error().message);
            continue;
        }
        if (std::find(out.begin(), out.end(), sub->gitdir) == out.end()) out.push_back(sub->gitdir);
        collect_submodule_mirrors(cache, *sub, token, depth + 1, out);
    }
}

}  // namespace

std::string resolve_submodule_url(const std::string& base, const std::string& url) {
    if (!url.starts_with("./") && !url.starts_with("../")) return url;
    std::string result = base;
    while (result.size() > 1 && result.back() == '/') result.pop_back();
    std::string_view rest = url;
    for (;;) {
        if (rest.starts_with("./")) {
            rest.remove_prefix(2);
        } else if (rest.starts_with("../")) {
            rest.remove_prefix(3);
            const auto slash = result.rfind('/');
            if (slash != std::string::npos && slash > 0) result.resize(slash);
        } else {
            break;
        }
    }
    return result + "/" + std::string(rest);
}

std::vector<fs::path> submodule_mirrors(const MirrorCache& cache, const Mirror& mirror,
                                        const std::optional<GitToken>& token) {
    std::vector<fs::path> out;
    collect_submodule_mirrors(cache, mirror, token, 0, out);
    return out;
}

common::Expected<GitCheckoutResult> checkout_commit(const MirrorCache& cache,
                                                    const GitCheckoutRequest& request) {
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
        spdlog::warn("checkout from mirror {} failed ({}); re-cloning", mirror->gitdir.string(),
                     made.error().message);
        SANDGATE_CHECK(reset_dir(request.path));
        mirror = cache.reclone(request.source);
        if (!mirror) return std::unexpected(mirror.error());
        result.mirror = *mirror;
        if (mirror->presence == CommitPresence::missing) return result;
        spec.mirror_gitdir = mirror->gitdir;
        if (made = materialise_worktree(spec); !made) return std::unexpected(made.error());
    }
    result.mirror_gitdirs.push_back(mirror->gitdir);
    if (request.submodules != SubmoduleMode::none)
        SANDGATE_CHECK(checkout_submodules(cache, request, result));
    return result;
}

}  // namespace jobs
