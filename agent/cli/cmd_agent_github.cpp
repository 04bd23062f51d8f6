// `sandgate agent-github --config FILE [--poll] [-v]` (internal): one round of the agent's
// GitHub traffic (agent/daemon/github_worker.hpp), started by the daemon
// (agent/daemon/github_rounds.hpp). Exit 0: the round ran (failed reports and repositories are
// logged and retried by a later round); 1: it could not start (queue, token); 2: usage; 3: the
// configuration is invalid.
#include <spdlog/spdlog.h>

#include <cstdio>

#include "agent/cli/cli11.hpp"
#include "agent/cli/commands.hpp"
#include "agent/daemon/github_worker.hpp"

namespace agent {

int agent_github_command(CommandArgs args) {
    constexpr int k_exit_failed = 1;
    constexpr int k_exit_usage = 2;
    constexpr int k_exit_config = 3;
    CLI::App app{"one round of the agent's GitHub traffic (started by the agent daemon)",
                 "sandgate agent-github"};
    std::string config_path;
    bool poll = false;
    bool verbose = false;
    app.add_option("--config", config_path, "the agent's YAML configuration")->required();
    app.add_flag("--poll", poll, "also poll the configured repositories once");
    app.add_flag("-v,--verbose", verbose, "debug logging");
    try {
        app.parse(static_cast<int>(args.size()), args.data());
    } catch (const CLI::ParseError& error) {
        const int code = app.exit(error);
        return code == 0 ? 0 : k_exit_usage;
    }
    auto config = load_agent_config(config_path);
    if (!config) {
        std::fprintf(stderr, "sandgate agent-github: %s\n", config.error().message.c_str());
        return k_exit_config;
    }
    // The daemon's log format: this process writes to the daemon's stderr.
    use_agent_log_format("agent-github", verbose ? LogDetail::debug : LogDetail::info);
    auto round = run_github_round(*config, poll ? PollNow::yes : PollNow::no);
    if (!round) {
        spdlog::error("{}", round.error().message);
        return k_exit_failed;
    }
    return 0;
}

}  // namespace agent
