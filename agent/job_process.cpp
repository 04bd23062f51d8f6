#include "agent/job_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <thread>

#include "sandbox/spawn.hpp"

namespace agent {

using sandbox::ErrorKind;
using sandbox::Expected;
using sandbox::fail;

namespace {

// In the child after fork: async-signal-safe calls only.
[[noreturn]] void exec_child(int log_fd, int null_fd, char* const* argv, char* const* envp) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::dup2(null_fd, 0);
    if (log_fd >= 0) {
        ::dup2(log_fd, 1);
        ::dup2(log_fd, 2);
    }
    // Nothing of the agent's (the database, the API socket) reaches the job.
    if (::syscall(SYS_close_range, 3U, ~0U, 0U) != 0)
        for (int fd = 3; fd < 4096; ++fd) ::close(fd);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(argv[0], argv, envp);
    ::_exit(127);
}

}  // namespace

Expected<JobProcess> JobProcess::start(const std::vector<std::string>& argv,
                                       const sandbox::Environment& env,
                                       const std::filesystem::path& log_file) {
    if (argv.empty() || argv.front().find('/') == std::string::npos)
        return fail(ErrorKind::invalid_input, "job command: argv[0] must be a path");
    sandbox::Fd log;
    if (!log_file.empty()) {
        std::error_code ec;
        std::filesystem::create_directories(log_file.parent_path(), ec);
        log =
            sandbox::Fd(::open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
        if (!log) return fail(ErrorKind::permanent, sandbox::errno_message(log_file.string()));
    }
    sandbox::Fd null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!null) return fail(ErrorKind::permanent, sandbox::errno_message("/dev/null"));
    // Everything the child needs is built before fork: no allocation after it.
    std::vector<std::string> env_strings;
    for (const auto& [name, value] : env) env_strings.push_back(name + "=" + value);
    std::vector<char*> args, envp;
    for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    for (auto& entry : env_strings) envp.push_back(entry.data());
    envp.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) return fail(ErrorKind::transient, sandbox::errno_message("fork"));
    if (pid == 0) exec_child(log.get(), null.get(), args.data(), envp.data());
    ::setpgid(pid, pid);  // also in the parent: no window where the group does not exist
    sandbox::Fd pidfd = sandbox::open_pidfd(pid);
    return JobProcess(pid, std::move(pidfd));
}

JobProcess::JobProcess(JobProcess&& other) noexcept
    : m_pid(std::exchange(other.m_pid, -1)),
      m_pidfd(std::move(other.m_pidfd)),
      m_reaped(std::exchange(other.m_reaped, true)) {}

JobProcess::~JobProcess() {
    if (m_pid <= 0 || m_reaped) return;
    signal_group(SIGKILL);
    ::waitpid(m_pid, nullptr, 0);
}

std::optional<JobExit> JobProcess::poll() {
    if (m_reaped) return JobExit{};
    int status = 0;
    const pid_t done = ::waitpid(m_pid, &status, WNOHANG);
    if (done == 0) return std::nullopt;
    m_reaped = true;
    // The leader is gone: whatever it left in its group goes with it.
    ::kill(-m_pid, SIGKILL);
    JobExit exit;
    if (done == m_pid && WIFEXITED(status)) exit.exit_code = WEXITSTATUS(status);
    if (done == m_pid && WIFSIGNALED(status)) exit.signal = WTERMSIG(status);
    return exit;
}

std::optional<JobExit> JobProcess::wait_for(std::chrono::milliseconds timeout) {
    using std::chrono::steady_clock;
    const auto until = steady_clock::now() + timeout;
    while (true) {
        if (auto exit = poll()) return exit;
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - steady_clock::now());
        if (left.count() <= 0) return std::nullopt;
        const auto slice = std::min<std::chrono::milliseconds::rep>(left.count(), INT_MAX);
        // A pidfd turns readable when its process exits. Without one (pidfd_open failed, a
        // kernel before 5.3) or when poll fails for anything but EINTR, look again shortly
        // rather than spin.
        pollfd exited{m_pidfd.get(), POLLIN, 0};
        if (!m_pidfd || (::poll(&exited, 1, static_cast<int>(slice)) < 0 && errno != EINTR))
            std::this_thread::sleep_for(std::min(left, std::chrono::milliseconds(50)));
    }
}

void JobProcess::signal_group(int sig) const {
    if (m_pid > 0 && !m_reaped) ::kill(-m_pid, sig);
}

}  // namespace agent
