#pragma once
// Process helpers for tests that start real process trees: unique markers to put on command
// lines, and a scan of /proc for processes still carrying one (a survivor).

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "tests/support/numbers.hpp"
#include "tests/support/read_fd.hpp"

namespace tests {

// A string that appears in no other process's command line: "sgmark-<pid>-<n>-<random>".
inline std::string unique_marker() {
    static std::atomic<unsigned> counter{0};
    static const unsigned salt = std::random_device{}();
    return "sgmark-" + std::to_string(::getpid()) + "-" + std::to_string(++counter) + "-" +
           std::to_string(salt);
}

// Pids of the processes whose /proc/PID/`file` satisfies `match` (given the file's whole text).
template <typename Match>
std::vector<int> processes_whose(const char* file, Match&& match) {
    std::vector<int> found;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
        const std::string pid = entry.path().filename().string();
        if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
        const int fd = ::open((entry.path() / file).c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        const std::string text = read_to_eof(fd);
        ::close(fd);
        if (match(text)) found.push_back(tests::to_number<int>(pid).value_or(-1));
    }
    return found;
}

// Pids of live (non-zombie) processes whose command line contains `marker`. Zombies have an
// empty command line, so they never match.
inline std::vector<int> processes_with(const std::string& marker) {
    return processes_whose("cmdline", [&](const std::string& cmdline) {
        return cmdline.find(marker) != std::string::npos;
    });
}

// Pids of processes, live or already exiting, whose name (comm, which a process keeps until it
// is reaped, unlike its command line) is `name`.
inline std::vector<int> processes_named(const std::string& name) {
    return processes_whose("comm", [&](const std::string& comm) { return comm == name + "\n"; });
}

// A Python program for the wrap's tests: forks a daemon that closes its stdio (so the output
// pipes say nothing about it), names itself argv[1] (at most 15 bytes) and touches 256 MiB,
// which makes its death take a while; returns once the daemon is ready.
inline const char* const k_slow_dying_daemon =
    "import os, sys, ctypes, time\n"
    "r, w = os.pipe()\n"
    "if os.fork() == 0:\n"
    "    os.close(r); os.setsid()\n"
    "    null = os.open('/dev/null', os.O_RDWR)\n"
    "    for fd in (0, 1, 2): os.dup2(null, fd)\n"
    "    ctypes.CDLL(None).prctl(15, sys.argv[1].encode(), 0, 0, 0)\n"
    "    memory = bytearray(256 << 20)\n"
    "    for i in range(0, len(memory), 4096): memory[i] = 1\n"
    "    os.write(w, b'x'); time.sleep(600)\n"
    "os.close(w); os.read(r, 1)\n";

// A process name (comm) no other process has: "sgl<pid>-<random>", at most 15 bytes.
inline std::string unique_process_name() {
    return "sgl" + std::to_string(::getpid() % 100000) + "-" +
           std::to_string(std::random_device{}() % 100000);
}

// Waits for `pid`; its wait status, or -1.
inline int wait_for(pid_t pid) {
    int status = 0;
    while (::waitpid(pid, &status, 0) != pid)
        if (errno != EINTR) return -1;
    return status;
}

// Sends `signal` to `pid` and waits for it; returns its wait status (-1 when either call
// failed). For tests that interrupt a sandgate command and check how it ended.
inline int signal_and_wait(pid_t pid, int signal) {
    if (::kill(pid, signal) != 0) return -1;
    return wait_for(pid);
}

// Starts argv[0] (a path) with exactly `env`, stdin read from `input` and stdout and stderr
// appended to `output`; returns its pid (the caller waits), or -1 when fork failed.
inline pid_t start_with_files(const std::vector<std::string>& argv,
                              const std::vector<std::string>& env,
                              const std::filesystem::path& input,
                              const std::filesystem::path& output) {
    std::vector<char*> args, vars;
    for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    for (const auto& var : env) vars.push_back(const_cast<char*>(var.c_str()));
    args.push_back(nullptr);
    vars.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid != 0) return pid;
    const int in = ::open(input.c_str(), O_RDONLY | O_CLOEXEC);
    const int out = ::open(output.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (in < 0 || out < 0 || ::dup2(in, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(out, 2) < 0)
        ::_exit(126);
    ::execve(args[0], args.data(), vars.data());
    ::_exit(127);
}

}  // namespace tests
