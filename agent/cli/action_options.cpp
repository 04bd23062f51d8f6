#include "agent/cli/action_options.hpp"

#include <cstdio>

#include "jobs/git/git_mirror.hpp"

namespace agent {

void add_action_options(CLI::App& app, ActionFlags& flags, NodeFlag node) {
    app.add_option("--actions-dir", flags.dir,
                   "the remote actions' archive store, OWNER_REPO/SHA.tar.gz (STATE/actions)");
    app.add_option(
        "--actions-source", flags.source,
        "where missing actions are fetched from: an https:// base, a file:// URL or directory of "
        "mirrors, or none (https://github.com)");
    if (node == NodeFlag::add)
        app.add_option("--node", flags.node,
                       "the node binary JavaScript actions run on (node on PATH)");
}

jobs::ActionStore action_store(const ActionFlags& flags, const std::filesystem::path& state_dir) {
    auto dirs = jobs::ActionStore::default_dirs(state_dir);
    if (!flags.dir.empty()) dirs.archives = std::filesystem::absolute(flags.dir).lexically_normal();
    return jobs::ActionStore(std::move(dirs));
}

common::Expected<std::unique_ptr<jobs::ActionResolver>> make_action_resolver(
    const ActionFlags& flags, const std::filesystem::path& state_dir,
    const std::filesystem::path& repository, jobs::PinRefresh refresh) {
    auto source = jobs::ActionSource::parse(flags.source);
    if (!source) return std::unexpected(source.error());
    jobs::ResolveOptions options;
    options.refresh = refresh;
    options.fill_command = "sandgate actions pull -C " + repository.string();
    if (!flags.dir.empty()) options.fill_command += " --actions-dir " + flags.dir;
    if (flags.source != jobs::k_default_action_source) options.fill_command += " --source SOURCE";
    return std::make_unique<jobs::ActionResolver>(action_store(flags, state_dir),
                                                  std::move(*source), std::move(options));
}

void resolve_run_actions(jobs::ActionResolver& resolver,
                         const std::vector<jobs::Workflow>& workflows,
                         const std::filesystem::path& repository, const char* program) {
    resolver.resolve_workflows(workflows, repository);
    for (const auto& entry : resolver.lock())
        if (!entry.error.empty()) std::fprintf(stderr, "%s: %s\n", program, entry.error.c_str());
}

}  // namespace agent
