#pragma once
// The remote-action flags `sandgate run`, `sandgate gate` and `sandgate actions` share, and the
// resolver they describe (jobs/actions/action_resolve.hpp):
//   --actions-dir DIR       the archive store (OWNER_REPO/SHA.tar.gz; default STATE/actions)
//   --actions-source SRC    https://... base, file:// URL or directory of mirrors, or `none`
//                           (default https://github.com)
//   --node PATH             the JavaScript actions' runtime (default: `node` on PATH)
// Unpacked trees and the sources' mirrors live in STATE/action-work.

#include <filesystem>
#include <memory>
#include <string>

#include "agent/cli/cli11.hpp"
#include "common/error.hpp"
#include "jobs/actions/action_resolve.hpp"
#include "jobs/run/run_report.hpp"
#include "jobs/workflow/workflow_model.hpp"

namespace agent {

struct ActionFlags {
    std::string dir;
    std::string source = std::string(jobs::k_default_action_source);
    std::string node = "node";
};

enum class NodeFlag { add, omit };
void add_action_options(CLI::App& app, ActionFlags& flags, NodeFlag node = NodeFlag::add);

// The store the flags name (work beneath `state_dir`).
jobs::ActionStore action_store(const ActionFlags& flags, const std::filesystem::path& state_dir);

// The resolver the flags describe; invalid_input naming the flag when they are wrong.
// `repository` is what the cache-miss line tells the user to pull (`-C DIR`).
common::Expected<std::unique_ptr<jobs::ActionResolver>> make_action_resolver(
    const ActionFlags& flags, const std::filesystem::path& state_dir,
    const std::filesystem::path& repository,
    jobs::PinRefresh refresh = jobs::PinRefresh::cached_first);

// For run and gate: resolves every remote action of `workflows` before any job starts and
// prints one line per action that cannot run (its steps will fail closed with it).
void resolve_run_actions(jobs::ActionResolver& resolver,
                         const std::vector<jobs::Workflow>& workflows,
                         const std::filesystem::path& repository, const char* program);

}  // namespace agent
