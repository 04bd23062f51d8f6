#pragma once
// The `sandgate` executable is a small launcher. Starting a binary that links libcurl,
// libgit2, libmicrohttpd and SQLite (about 50 shared libraries with their dependencies) costs
// 15 ms on an idle machine and far more on a loaded one, and `sandgate exec` is started once
// per step. So `sandgate` links only the process core and runs `exec` (and the job-sandbox
// `broker`, which forks every step of a job) itself; every other
// command is handed, argv unchanged, to `sandgate-full` installed beside it (the same
// command table as agent::main), by execv, so that signals, exit status and stdio are the
// full binary's own.

namespace agent {

// The name of the full binary, looked up in the directory of the running `sandgate`.
inline constexpr const char* k_full_binary_name = "sandgate-full";

// Returns exec's exit status, or 127 with a one-line message when `sandgate-full` cannot be
// started (it is part of every installation).
int launcher_main(int argc, char** argv);

}  // namespace agent
