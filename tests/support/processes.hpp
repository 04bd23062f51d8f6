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

namespace tests {

// A string that appears in no other process's command line: "sgmark-<pid>-<n>-<random>".
inline std::string unique_marker() {
    static std::atomic<unsigned> counter{0};
    static const unsigned salt = std::random_device{}();
    return "sgmark-" + std::to_string(::getpid()) + "-" + std::to_string(++counter) + "-" +
           std::to_string(salt);
}

// Pids of live (non-zombie) processes whose command line contains `marker`. Zombies have an
// empty command line, so they never match.
inline std::vector<int> processes_with(const std::string& marker) {
    std::vector<int> found;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
        const std::string name = entry.path().filename().string();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        const int fd = ::open((entry.path() / "cmdline").c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        std::string cmdline;
        char buf[4096];
        for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;)
            cmdline.append(buf, static_cast<std::size_t>(n));
        ::close(fd);
        if (cmdline.find(marker) != std::string::npos) found.push_back(std::stoi(name));
    }
    return found;
}

// Sends `signal` to `pid` and waits for it; returns its wait status (-1 when either call
// failed). For tests that interrupt a sandgate command and check how it ended.
inline int signal_and_wait(pid_t pid, int signal) {
    if (::kill(pid, signal) != 0) return -1;
    int status = 0;
    while (::waitpid(pid, &status, 0) != pid)
        if (errno != EINTR) return -1;
    return status;
}

}  // namespace tests
