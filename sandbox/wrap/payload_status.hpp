#pragma once
// How the payload ended, told from inside the bwrap wrap. bwrap reports an exit code only: its
// monitor and its pid 1 fold a death by signal N into 128+N (and --json-status-fd carries
// that number), so a wrapped `kill -9` would read as `exit 137`. The wrap therefore starts the
// payload through a reporter of its own (gen/status_init.cpp, a few KB, copied in at
// k_status_init_path) that writes "exit N" or "signal N" on a pipe before exiting as bwrap
// would; run() reads it after the end and reports the signal as an unwrapped run does.

#include <optional>
#include <string_view>

#include "sandbox/base.hpp"
#include "sandbox/process/run.hpp"

namespace sandbox {

// Where the reporter is inside the wrap.
inline constexpr std::string_view k_status_init_path = "/.sandgate-status-init";

// The reporter's executable (static, freestanding).
std::string_view status_init_program();

// The signal a report names ("signal N\n"); nullopt for an exit or anything else.
std::optional<int> reported_signal(std::string_view report);

// Reads the reporter's pipe (non-blocking, after the run) and, when the payload died of a
// signal and the wrapper's exit agrees (128+N), turns the result into that signal's.
void apply_payload_status(const Fd& report, RunResult& result);

}  // namespace sandbox
