#pragma once
// Checking one commit out for a job: mirror (MirrorCache), worktree (materialise_worktree),
// submodules on request, and one re-clone when the checkout finds the mirror damaged.

#include <filesystem>
#include <vector>

#include "jobs/git/git_mirror.hpp"
#include "jobs/git/git_worktree.hpp"

namespace jobs {

enum class SubmoduleMode { none, top, recursive };

struct GitCheckoutRequest {
    MirrorRequest source;        // remote, sha, ref, token
    std::filesystem::path path;  // the worktree: missing or empty
    unsigned depth = 0;          // 0: whole history; N: shallow, as actions/checkout fetch-depth
    SubmoduleMode submodules = SubmoduleMode::none;
};

struct GitCheckoutResult {
    Mirror mirror;  // presence == missing: the remote lacks the SHA and nothing was written
    // Every mirror the worktree's alternates read (the superproject's and the submodules'),
    // all below mirror.scope: a wrap binds that (or these) read-only for git to work inside.
    std::vector<std::filesystem::path> mirror_gitdirs;
};

// Materialises request.source.sha at request.path; the submodules' mirrors live in the scope
// of request.source.scope (request.source.remote when empty). Errors as MirrorCache::ensure_commit,
// plus permanent when the checkout fails even after a re-clone, and unavailable/invalid_input for a
// submodule's remote (the message names the submodule). On error request.path may hold a
// partial checkout: the caller removes it (JobWorktree does).
common::Expected<GitCheckoutResult> checkout_commit(const MirrorCache& cache,
                                                    const GitCheckoutRequest& request);

// The mirrors of `mirror.commit`'s submodules, recursively, each made to hold its gitlinked
// commit (read from the commit's own .gitmodules; relative URLs resolved against the mirror's
// remote), in the scope of `mirror.scope_remote`. Fetching them ahead is optional: a wrap that
// binds mirror.scope sees them whenever they are made. Best effort: a submodule whose remote
// fails or is refused is logged and left out (its checkout will then fail).
std::vector<std::filesystem::path> submodule_mirrors(const MirrorCache& cache, const Mirror& mirror,
                                                     const std::optional<GitToken>& token);

// `url` resolved against `base` the way git resolves a submodule's "../x" or "./x" URL;
// other URLs are returned as they are.
std::string resolve_submodule_url(const std::string& base, const std::string& url);

}  // namespace jobs
