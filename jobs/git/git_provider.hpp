#pragma once
// GitWorkspace: the WorkspaceProvider behind `sandgate gate`. Each job leg gets a fresh
// directory leased in the WorktreeArea (removed when the provider is destroyed, or reaped after
// a crash), the leg's own (runner.workspace, kept for its steps), and in it the empty workspace
// `<name>` (the repository's name, as GitHub names it); `actions/checkout` materialises a commit of
// the gate's mirror into it (or into `path:` below it): the gate's SHA by default, another ref or
// SHA of the same mirror when `ref:` says so, shallow per `fetch-depth` (default 1, 0 for all
// history) and with submodules per `submodules` (false, true, recursive). Only the repository under
// test can be checked out: anything else would need the network the steps do not have.

#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "jobs/git/checkout.hpp"
#include "jobs/git/git_workspace.hpp"

namespace jobs {

struct GitSource {
    std::string remote;      // as given to the gate
    std::string sha;         // the commit under test
    std::string ref;         // the ref it was pushed to (may be empty)
    std::string repository;  // owner/name, for matching `with.repository`; may be empty
    std::optional<GitToken> token;
};

class GitWorkspace final : public WorkspaceProvider {
public:
    // `cache` and `area` must outlive the provider.
    GitWorkspace(const MirrorCache& cache, WorktreeArea& area, GitSource source);
    ~GitWorkspace() override = default;

    common::Expected<std::filesystem::path> workspace_for(const std::string& job_key) override;
    common::Expected<std::string> checkout(const std::filesystem::path& workspace,
                                           const CheckoutRequest& request) override;
    // The leased directory holding the workspace.
    std::filesystem::path leg_root(const std::filesystem::path& workspace) const override;

    // Mirrors the checkouts so far read through alternates.
    std::vector<std::filesystem::path> mirrors_used() const;

private:
    common::Expected<std::string> resolve_ref(const std::string& ref) const;

    const MirrorCache& m_cache;
    WorktreeArea& m_area;
    GitSource m_source;
    mutable std::mutex m_mutex;
    std::vector<JobWorktree> m_worktrees;
    std::vector<std::filesystem::path> m_mirrors;
};

// Parses actions/checkout's `fetch-depth` ("" means 1) and `submodules` ("", "false", "true",
// "recursive"); invalid_input naming the input otherwise.
common::Expected<unsigned> parse_fetch_depth(const std::string& text);
common::Expected<SubmoduleMode> parse_submodules(const std::string& text);

}  // namespace jobs
