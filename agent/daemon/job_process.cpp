#include "agent/daemon/job_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <thread>

namespace agent {

using common::ErrorKind;
using common::Expected;
using common::fail;

namespace {

// Whether the leader has exited, without reaping it (WNOWAIT): the zombie keeps its pid, and
// so the group's id, from being reused until kill_group_and_reap() has signalled the group.
bool leader_exited(pid_t pid) {
    siginfo_t info{};
    int rc = 0;
    do {
        rc = ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT);
    } while (rc < 0 && errno == EINTR);
    return rc < 0 || info.si_pid != 0;  // ECHILD: nothing left to wait for
}

common::Fd open_log(const std::filesystem::path& log_file) {
    std::error_code ec;
    // trusted path: the agent's own log directory
    std::filesystem::create_directories(log_file.parent_path(), ec);
    return common::Fd(::open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
}

}  // namespace

Expected<JobProcess> JobProcess::start(const std::vector<std::string>& argv,
                                       const sandbox::Environment& env,
                                       const std::filesystem::path& log_file) {
    if (argv.empty() || argv.front().find('/') == std::string::npos)
        return fail(ErrorKind::invalid_input, "job command: argv[0] must be a path");
    common::Fd log;
    if (!log_file.empty()) {
        log = open_log(log_file);
        if (!log) return fail(ErrorKind::permanent, common::errno_message(log_file.string()));
    }
    common::Fd null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!null) return fail(ErrorKind::permanent, common::errno_message("/dev/null"));
    sandbox::SpawnSpec spec;
    spec.argv = argv;
    spec.env = env;
    spec.stdin_fd = null.get();
    spec.stdout_fd = log ? log.get() : STDOUT_FILENO;
    spec.stderr_fd = log ? log.get() : STDERR_FILENO;
    // A command that cannot be started exits 127, as a shell's would (seen at its exit).
    spec.exec_check = sandbox::ExecCheck::at_reap;
    auto child = sandbox::spawn(spec);
    if (!child) return fail(ErrorKind::transient, child.error().message);
    return JobProcess(std::move(*child));
}

JobProcess::JobProcess(JobProcess&& other) noexcept
    : m_pid(std::exchange(other.m_pid, -1)), m_child(std::move(other.m_child)) {
    other.m_child.reset();
}

JobProcess::~JobProcess() {
    if (m_child) (void)kill_group_and_reap();
}

JobExit JobProcess::kill_group_and_reap() {
    // The leader is gone or going: whatever it left in its group goes with it.
    ::kill(-m_pid, SIGKILL);
    m_child->signal(SIGKILL);
    auto info = m_child->reap();
    m_child.reset();
    JobExit exit;
    if (!info) return exit;
    exit.exit_code = info->exit_code;
    exit.signal = info->signal;
    if (info->not_started) exit.exit_code = 127;
    return exit;
}

std::optional<JobExit> JobProcess::poll() {
    if (!m_child) return JobExit{};
    if (!leader_exited(m_pid)) return std::nullopt;
    return kill_group_and_reap();
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
        pollfd exited{m_child->wait_fd(), POLLIN, 0};
        if (exited.fd < 0 || (::poll(&exited, 1, static_cast<int>(slice)) < 0 && errno != EINTR))
            std::this_thread::sleep_for(std::min(left, std::chrono::milliseconds(50)));
    }
}

void JobProcess::signal_group(int sig) const {
    // Safe while unreaped: the leader (alive or a zombie) holds the group's id.
    if (m_child) ::kill(-m_pid, sig);
}

}  // namespace agent
