// `sandgate actions pull|list|prune`: the remote-action store (jobs/actions/action_store.hpp) from
// the command line. pull resolves every remote `uses:` of a repository's workflows (or those named)
// from the source, pins each ref to its commit and fills the archive store; list shows what
// the store holds; prune removes the unpacked trees and leftovers (and unpinned archives).
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "agent/cli/action_options.hpp"
#include "agent/cli/cli11.hpp"
#include "agent/cli/commands.hpp"
#include "agent/cli/run_setup.hpp"
#include "jobs/git/git_mirror.hpp"

namespace agent {
namespace {

constexpr int k_exit_failed = 1;
constexpr int k_exit_usage = 2;

constexpr const char* k_footer =
    "Exit status: 0 done; 1 an action could not be pulled (each named on one line) or the store\n"
    "could not be read or pruned; 2 bad usage or an invalid workflow (nothing fetched).\n";

int say(int code, const std::string& message) {
    std::fprintf(stderr, "sandgate actions: %s\n", message.c_str());
    return code;
}

struct Options {
    ActionFlags actions;
    std::string state_dir;
    std::string directory;
    std::string workflows = ".github/workflows";
    std::vector<std::string> uses;
    bool unreferenced = false;
};

std::filesystem::path state_dir(const Options& o) {
    return o.state_dir.empty() ? jobs::MirrorCache::default_state_dir()
                               : std::filesystem::absolute(o.state_dir);
}

int pull(const Options& o) {
    std::error_code ec;
    const auto root =
        std::filesystem::absolute(o.directory.empty() ? "." : o.directory, ec).lexically_normal();
    auto resolver =
        make_action_resolver(o.actions, state_dir(o), root, jobs::PinRefresh::from_source);
    if (!resolver) return say(k_exit_usage, resolver.error().message);
    if (o.uses.empty()) {
        auto files = workflow_files(root, o.workflows);
        if (!files) return say(k_exit_usage, files.error().message);
        auto workflows = load_workflows(root, *files, jobs::Dialect::act);
        if (!workflows) return say(k_exit_usage, workflows.error().message);
        (*resolver)->resolve_workflows(*workflows, root);
    }
    for (const auto& uses : o.uses) {
        if (!jobs::is_remote_uses(uses))
            return say(k_exit_usage,
                       "'" + uses + "' is not a remote action (OWNER/REPO[/PATH]@REF)");
        (void)(*resolver)->get(uses);
    }
    int code = 0;
    for (const auto& entry : (*resolver)->lock()) {
        if (!entry.error.empty()) {
            std::fprintf(stderr, "sandgate actions: %s\n", entry.error.c_str());
            code = k_exit_failed;
            continue;
        }
        std::printf("%s %s\n", entry.sha.c_str(), entry.uses.c_str());
    }
    if ((*resolver)->lock().empty())
        std::printf("sandgate actions: no remote action in %s\n", o.workflows.c_str());
    return code;
}

int list(const Options& o) {
    auto stored = action_store(o.actions, state_dir(o)).list();
    if (!stored) return say(k_exit_failed, stored.error().message);
    for (const auto& action : *stored) {
        std::string refs;
        for (const auto& ref : action.refs) refs += (refs.empty() ? "" : ",") + ref;
        std::printf("%-40s %s %10llu %-8s %s\n", action.name.c_str(), action.sha.c_str(),
                    static_cast<unsigned long long>(action.bytes),
                    action.unpacked ? "unpacked" : "packed", refs.empty() ? "-" : refs.c_str());
    }
    return 0;
}

int prune(const Options& o) {
    auto removed =
        action_store(o.actions, state_dir(o))
            .prune(o.unreferenced ? jobs::PruneArchives::unreferenced : jobs::PruneArchives::keep);
    if (!removed) return say(k_exit_failed, removed.error().message);
    for (const auto& path : *removed) std::printf("removed %s\n", path.c_str());
    return 0;
}

void add_store_options(CLI::App& app, Options& o) {
    app.add_option("--actions-dir", o.actions.dir,
                   "the archive store, OWNER_REPO/SHA.tar.gz (STATE/actions)");
    app.add_option("--state-dir", o.state_dir,
                   "STATE: the unpacked trees and mirrors live in STATE/action-work "
                   "($XDG_STATE_HOME/sandgate)");
}

}  // namespace

int actions_command(CommandArgs args) {
    CLI::App app{"the remote-action store: pull, list, prune", "sandgate actions"};
    app.require_subcommand(1);
    app.footer(k_footer);
    Options o;
    auto* pull_cmd =
        app.add_subcommand("pull",
                           "fill the store with the remote actions of a repository's workflows "
                           "(or the OWNER/REPO@REF given), pinning each ref to its commit");
    pull_cmd->add_option("uses", o.uses, "OWNER/REPO[/PATH]@REF to pull instead of the workflows'");
    pull_cmd->add_option("-C,--directory", o.directory, "the repository (the current directory)");
    pull_cmd->add_option("-W,--workflows", o.workflows,
                         "a workflow file or a directory of them (.github/workflows)");
    pull_cmd->add_option(
        "--source,--actions-source", o.actions.source,
        "an https:// base, a file:// URL or a directory of mirrors (https://github.com)");
    add_store_options(*pull_cmd, o);
    auto* list_cmd = app.add_subcommand(
        "list", "list the stored actions: name, commit, bytes, unpacked, pinned refs");
    add_store_options(*list_cmd, o);
    auto* prune_cmd =
        app.add_subcommand("prune", "remove the unpacked trees and leftovers of interrupted pulls");
    prune_cmd->add_flag("--unreferenced", o.unreferenced,
                        "also remove the archives no pinned ref names");
    add_store_options(*prune_cmd, o);
    try {
        app.parse(static_cast<int>(args.size()), args.data());
    } catch (const CLI::ParseError& error) {
        if (error.get_exit_code() == 0) return app.exit(error);  // --help
        if (app.get_subcommands().empty() && dynamic_cast<const CLI::RequiredError*>(&error))
            return say(k_exit_usage, "a subcommand is required: pull, list, prune");
        return say(k_exit_usage, error.what());
    }
    if (pull_cmd->parsed()) return pull(o);
    if (list_cmd->parsed()) return list(o);
    return prune(o);
}

}  // namespace agent
