// `sandgate broker`: the job-sandbox broker (sandbox/broker/broker.hpp), started by the sandbox
// manager inside a wrap. Hidden from `sandgate --help`: people never run it by hand.
#include <spdlog/spdlog.h>

#include <cstdio>

#include "agent/cli/cli11.hpp"
#include "agent/cli/commands.hpp"
#include "sandbox/broker/broker.hpp"

namespace agent {

namespace {
constexpr int k_exit_usage = 2;
constexpr int k_exit_failed = 1;
}  // namespace

int broker_command(CommandArgs args) {
    CLI::App app{"the job-sandbox broker (started by `sandgate agent`)", "sandgate broker"};
    sandbox::BrokerConfig config;
    std::string root;
    app.add_option("--socket", config.socket, "the unix socket to listen on")->required();
    app.add_option("--identity", config.identity, "the sandbox's identity")->required();
    app.add_option("--expires-at", config.expires_at_ms, "expiry, ms since the epoch")->required();
    app.add_option("--root", root, "the directory requests' cwd must stay in")->required();
    bool reap_steps = false;
    app.add_flag("--reap-steps", reap_steps,
                 "reap steps' orphans in the broker (only as the first process under a pid "
                 "namespace's init, as bwrap starts it)");
    try {
        app.parse(static_cast<int>(args.size()), args.data());
    } catch (const CLI::ParseError& error) {
        const int code = app.exit(error);
        return code == 0 ? 0 : k_exit_usage;
    }
    spdlog::set_level(spdlog::level::info);
    config.root = root;
    if (reap_steps) config.reaper = sandbox::StepReaper::broker;
    config.base_env = sandbox::current_environment();
    if (auto ok = sandbox::serve_broker(config); !ok) {
        std::fprintf(stderr, "sandgate broker: %s\n", ok.error().message.c_str());
        return k_exit_failed;
    }
    return 0;
}

}  // namespace agent
