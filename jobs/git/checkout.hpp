#pragma once
// Where a job's workspace comes from, behind a small interface so that the gate can back it
// with libgit2 worktrees later. `actions/checkout` is a builtin that asks the provider.
//
// DirectoryWorkspace, the default: the workspace is the repository directory itself (act's
// bind mode; every job of the run shares it), and checkout of the repository into it is a
// no-op that reports what it used; checkout into a `path:` below the workspace copies the
// repository tree there. Fetching anything else (another repository, a ref) is refused:
// sandgate runs offline.

#include <filesystem>
#include <memory>
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

}  // namespace jobs
