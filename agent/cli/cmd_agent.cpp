// `sandgate agent --config FILE` (the daemon) and `sandgate agent init [FILE]`.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

#include "agent/cli/cli11.hpp"
#include "agent/cli/commands.hpp"
#include "agent/daemon/agent_config.hpp"
#include "agent/daemon/daemon.hpp"
#include "common/fd.hpp"

namespace agent {

namespace {
constexpr int k_exit_usage = 2;
constexpr int k_exit_config = 3;

int write_default_config(const std::string& path) {
    const auto text = default_agent_config();
    if (path == "-") {
        std::fwrite(text.data(), 1, text.size(), stdout);
        return 0;
    }
    // O_EXCL: never overwrite a configuration someone wrote.
    common::Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!fd) {
        std::fprintf(stderr, "sandgate agent init: %s\n", common::errno_message(path).c_str());
        return k_exit_config;
    }
    if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
        std::fprintf(stderr, "sandgate agent init: %s\n", common::errno_message(path).c_str());
        return k_exit_config;
    }
    std::fprintf(stderr, "sandgate agent init: wrote %s\n", path.c_str());
    return 0;
}
}  // namespace

int agent_command(CommandArgs args) {
    CLI::App app{"the merge-gate agent daemon: pulls jobs, runs them, serves the API",
                 "sandgate agent"};
    std::string config_path;
    std::string init_path = "sandgate-agent.yaml";
    bool verbose = false;
    app.add_option("--config", config_path, "the agent's YAML configuration");
    app.add_flag("-v,--verbose", verbose, "debug logging");
    auto* init = app.add_subcommand("init", "write a commented default configuration");
    init->add_option("file", init_path, "where to write it ('-' for stdout)");
    try {
        app.parse(static_cast<int>(args.size()), args.data());
    } catch (const CLI::ParseError& error) {
        const int code = app.exit(error);
        return code == 0 ? 0 : k_exit_usage;
    }
    if (init->parsed()) return write_default_config(init_path);
    if (config_path.empty()) {
        std::fprintf(stderr,
                     "sandgate agent: --config FILE is required "
                     "(`sandgate agent init` writes one)\n");
        return k_exit_usage;
    }
    auto config = load_agent_config(config_path);
    if (!config) {
        std::fprintf(stderr, "sandgate agent: %s\n", config.error().message.c_str());
        return k_exit_config;
    }
    // Structured, one event a line: ts=... level=... msg (key=value details inside).
    use_agent_log_format("", verbose ? LogDetail::debug : LogDetail::info);
    block_stop_signals();  // before any thread exists
    return run_daemon(*config);
}

}  // namespace agent
