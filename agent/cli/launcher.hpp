#pragma once
// The `sandgate` executable is a small launcher. Starting a binary that links libcurl,
// libgit2, libmicrohttpd and SQLite (about 50 shared libraries with their dependencies) costs
// 15 ms on an idle machine and far more on a loaded one, and `sandgate exec` is started once
// per step. So `sandgate` links only the process core, statically (no dynamic loader at each
// start), and runs `exec` itself. The job-sandbox `broker`, which forks every step of a job,
// needs simdjson (its protocol) and spdlog, which have no static libraries: it is handed to
// `sandgate-broker`, a small dynamically linked binary. The agent daemon (`sandgate agent`,
// and `agent init`) is handed to `sandgate-agent`, linked without libcurl, libgit2 and OpenSSL
// so that it idles small (its GitHub traffic runs in `sandgate-full agent-github` rounds, see
// agent/daemon/github_rounds.hpp). Every other command is handed to `sandgate-full` (the same
// command table as agent::main). All are installed beside `sandgate` and started by execv with argv
// unchanged, so that signals, exit status and stdio are their own.

namespace agent {

// The names of the other binaries, looked up in the directory of the running `sandgate`.
inline constexpr const char* k_full_binary_name = "sandgate-full";
inline constexpr const char* k_broker_binary_name = "sandgate-broker";
inline constexpr const char* k_agent_binary_name = "sandgate-agent";

// Returns exec's exit status, or 127 with a one-line message when `sandgate-full`,
// `sandgate-broker` or `sandgate-agent` cannot be started (they are part of every
// installation).
int launcher_main(int argc, char** argv);

// `sandgate-broker`'s main: `sandgate-broker broker OPTIONS` (argv as `sandgate` got it).
int broker_main(int argc, char** argv);

// `sandgate-agent`'s main: `sandgate-agent agent OPTIONS` (argv as `sandgate` got it).
int agent_main(int argc, char** argv);

}  // namespace agent
