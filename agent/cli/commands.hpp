#pragma once
// One function per `sandgate` command. Each takes the arguments after the command name
// (argv[0] is "sandgate COMMAND") and returns the process exit status.

#include <span>

namespace agent {

using CommandArgs = std::span<char*>;

int exec_command(CommandArgs args);
int doctor_command(CommandArgs args);
int expr_command(CommandArgs args);
int hook_command(CommandArgs args);
int report_command(CommandArgs args);
int broker_command(CommandArgs args);
int agent_command(CommandArgs args);
int agent_github_command(CommandArgs args);
int jobs_command(CommandArgs args);
int sandboxes_command(CommandArgs args);
int run_command(CommandArgs args);
int gate_command(CommandArgs args);
int tools_command(CommandArgs args);
int actions_command(CommandArgs args);

}  // namespace agent
