#pragma once
// Where a job's workspace comes from, behind a small interface so that the gate can back it
// with libgit2 worktrees later. `actions/checkout` is a builtin that asks the provider.
//
// CopyWorkspace, `sandgate run`'s default (act's): each job leg's workspace is a copy of the
// repository directory made when the leg starts, in a directory of the leg's own
// (runner.workspace, kept for the leg's steps: `cmake -B ../build` works); checkout of the
// repository into it is a no-op that reports what it used. DirectoryWorkspace (`--bind`): the
// workspace is the repository directory itself, every job of the run sharing it. With either,
// checkout into a `path:` below the workspace copies the repository tree there, and fetching
// anything else (another repository, a ref) is refused: sandgate runs offline.

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>

#include "common/error.hpp"

namespace jobs {

struct CheckoutRequest {
    std::string repository;   // `with.repository`; empty: the workflow's own repository
    std::string ref;          // `with.ref`; empty: the event's
    std::string path;         // `with.path`, relative to the workspace; empty: the workspace
    std::string fetch_depth;  // `with.fetch-depth` as written; empty: the default (1)
    std::string submodules;   // `with.submodules`: "", "false", "true" or "recursive"
};

class WorkspaceProvider {
public:
    virtual ~WorkspaceProvider() = default;
    // The workspace (GITHUB_WORKSPACE) for one job leg, created when missing. `job_key`
    // names the leg (job id plus matrix values). Thread-safe.
    virtual common::Expected<std::filesystem::path> workspace_for(const std::string& job_key) = 0;
    // Materialises the repository for actions/checkout into `workspace`. Returns a line for
    // the log. Errors fail the step. Thread-safe.
    virtual common::Expected<std::string> checkout(const std::filesystem::path& workspace,
                                                   const CheckoutRequest& request) = 0;
    // The directory the leg's steps may write that holds `workspace` (bound writable, the root
    // of the leg's sandbox): the workspace itself unless the provider gives each leg a parent
    // of its own.
    virtual std::filesystem::path leg_root(const std::filesystem::path& workspace) const {
        return workspace;
    }
};

class DirectoryWorkspace final : public WorkspaceProvider {
public:
    // `repository`: the repository directory (absolute); `name`: its owner/name.
    DirectoryWorkspace(std::filesystem::path repository, std::string name);
    common::Expected<std::filesystem::path> workspace_for(const std::string& job_key) override;
    common::Expected<std::string> checkout(const std::filesystem::path& workspace,
                                           const CheckoutRequest& request) override;

private:
    std::filesystem::path m_repository;
    std::string m_name;
};

class CopyWorkspace final : public WorkspaceProvider {
public:
    // `repository`: the directory copied (absolute); `name`: its owner/name. The legs'
    // directories are made in a private directory of this object's own (under $TMPDIR, no step
    // can reach it but through its leg's bind), removed when it ends.
    static common::Expected<std::unique_ptr<CopyWorkspace>> create(std::filesystem::path repository,
                                                                   std::string name);
    ~CopyWorkspace() override;
    CopyWorkspace(const CopyWorkspace&) = delete;
    CopyWorkspace& operator=(const CopyWorkspace&) = delete;

    // DIR/N/<the repository directory's name>, a fresh copy: regular files, directories and
    // links (as links) of the repository directory, .git included, what git ignores left out
    // (as act leaves it out) when the directory is a repository libgit2 may open.
    common::Expected<std::filesystem::path> workspace_for(const std::string& job_key) override;
    common::Expected<std::string> checkout(const std::filesystem::path& workspace,
                                           const CheckoutRequest& request) override;
    // DIR/N: the leg's own.
    std::filesystem::path leg_root(const std::filesystem::path& workspace) const override;

private:
    CopyWorkspace(std::filesystem::path repository, std::string name, std::filesystem::path dir);

    std::filesystem::path m_repository;
    std::string m_name;
    std::filesystem::path m_dir;
    DirectoryWorkspace m_paths;  // checkout with `path:`
    std::mutex m_mutex;
    unsigned m_legs = 0;
};

}  // namespace jobs
