#pragma once
// `sandgate sandboxes exec`: one step in a sandbox of a running agent, through
// POST /v1/sandboxes/ID/exec (api.hpp). The sandbox's identity is read from
// GET /v1/sandboxes/ID and sent with the step, so the caller names the sandbox only.
//
// Without --json the step's stdout and stderr go to ours once it ends (the API answers with
// the whole result: the first --output-limit bytes of each stream and its last bytes; a line
// on stderr says how much was dropped between them); with --json the API's answer is printed.
// Exit status: `sandgate exec`'s (the step's code, 128+N for signal N, 124 timeout, 130
// cancelled, 125 nothing ran: the agent unreachable, the sandbox unknown, the exec refused or
// malformed); 2 bad flags (nothing sent). SIGINT, SIGTERM or SIGHUP cancel the exec on the agent
// (its cancel request for the exec id; hanging up when that is refused) and the command exits
// 128+N once the agent says the step was stopped.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "agent/cli/api_client.hpp"
#include "agent/cli/cli11.hpp"

namespace agent {

inline constexpr int k_sandbox_exec_nothing_ran = 125;

struct SandboxExecOptions {
    std::string sandbox;  // the sandbox id
    std::string exec_id;  // empty: one is chosen here ("ex-" and 16 hex digits)
    std::vector<std::string> env;
    std::string cwd;
    std::string timeout;
    std::string kill_grace;
    std::string output_limit;
    std::optional<std::string> stdin_text;
    std::string shell;
    std::vector<std::string> argv;
    bool json = false;
};

// The exec subcommand's flags and positionals (ID, then `-- PROGRAM ARGS...`).
void add_sandbox_exec_options(CLI::App& exec, SandboxExecOptions& options);

// The exec's body without its identity; invalid_input naming the flag when one is malformed.
common::Expected<nlohmann::ordered_json> sandbox_exec_body(const SandboxExecOptions& options);

// Runs it (the body from sandbox_exec_body); returns the exit status described above.
int run_sandbox_exec(const ApiTarget& target, const SandboxExecOptions& options,
                     nlohmann::ordered_json body);

}  // namespace agent
