#include "agent/cli/cli.hpp"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "agent/cli/commands.hpp"
#include "common/warnings.hpp"

namespace agent {
namespace {

constexpr int k_exit_usage = 2;

enum class Listed { shown, hidden };

struct Command {
    std::string_view name;
    std::string_view summary;
    int (*handler)(CommandArgs);
    Listed listed = Listed::shown;
};

// The command table: adding a command is one line here and one in commands.hpp.
constexpr Command k_commands[] = {
    {"exec", "run one command bounded, tree-killed and (by default) inside the wrap", exec_command},
    {"doctor", "report what this machine allows the sandbox to use", doctor_command},
    {"expr", "evaluate one GitHub Actions expression against JSON contexts", expr_command},
    {"hook", "answer the GitHub Actions runner's container hooks with the wrap", hook_command},
    {"report", "post a run report to GitHub as check runs or commit statuses", report_command},
    {"broker", "the job-sandbox broker (internal)", broker_command, Listed::hidden},
    {"agent", "the merge-gate agent daemon (`agent init` writes a config)", agent_command},
    {"agent-github", "one round of the agent's GitHub traffic (internal)", agent_github_command,
     Listed::hidden},
    {"jobs", "talk to a running agent: submit, list, get, cancel, log", jobs_command},
    {"sandboxes", "a running agent's job sandboxes: create, exec, list, get, rm, cancel",
     sandboxes_command},
    {"run", "run a repository's GitHub Actions workflows, every step through the wrap",
     run_command},
    {"gate", "check one commit of a repository (mirror, worktree, workflows) as a merge gate",
     gate_command},
    {"tools", "the hosted tool cache (setup-python & co. offline): list, add", tools_command},
    {"actions", "the remote-action store: pull a repository's actions, list, prune",
     actions_command},
};

void print_usage(std::FILE* to) {
    std::fprintf(to, "usage: sandgate COMMAND [OPTIONS]\n\ncommands:\n");
    for (const auto& command : k_commands) {
        if (command.listed == Listed::hidden) continue;
        std::fprintf(to, "  %-9.*s %.*s\n", static_cast<int>(command.name.size()),
                     command.name.data(), static_cast<int>(command.summary.size()),
                     command.summary.data());
    }
    std::fprintf(to, "\n`sandgate COMMAND --help` describes each.\n");
}

}  // namespace

int main(int argc, char** argv) {
    spdlog::set_pattern("sandgate: %^%l%$: %v");
    spdlog::set_level(spdlog::level::warn);
    common::set_warning_sink([](std::string_view message) { spdlog::warn("{}", message); });
    if (argc < 2) {
        print_usage(stderr);
        return k_exit_usage;
    }
    const std::string_view name = argv[1];
    if (name == "--help" || name == "-h" || name == "help") {
        print_usage(stdout);
        return 0;
    }
    if (name == "--version") {
        std::printf("sandgate 0.1.0\n");
        return 0;
    }
    for (const auto& command : k_commands) {
        if (command.name == name) {
            std::string program = std::string("sandgate ") + argv[1];
            std::vector<char*> args;
            args.push_back(program.data());
            for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
            return command.handler(CommandArgs(args));
        }
    }
    std::fprintf(stderr, "sandgate: unknown command '%s' (see `sandgate --help`)\n", argv[1]);
    return k_exit_usage;
}

}  // namespace agent
