// The container hook's job directories (see runner_hook_jobs.hpp).
#include "agent/hook/runner_hook_jobs.hpp"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <ctime>
#include <thread>
#include <vector>

#include "sandbox/wrap/probe.hpp"

namespace agent {
namespace {

using common::ErrorKind;
using common::fail;

constexpr sandbox::ReadLimits k_mark_limits{256, std::nullopt, -1};
constexpr std::chrono::milliseconds k_poll{50};
constexpr std::chrono::milliseconds k_after_kill{2000};
constexpr std::time_t k_ownerless_age_seconds = 60;
constexpr int k_start_time_token = 19;  // field 22 of /proc/PID/stat, counted after ") "

// The next unsigned number of `text` from `at`, after blanks; nullopt when there is none.
std::optional<std::uint64_t> next_number(std::string_view text, std::size_t& at) {
    while (at < text.size() && text[at] == ' ') ++at;
    std::uint64_t value = 0;
    const auto [end, parsed] = std::from_chars(text.data() + at, text.data() + text.size(), value);
    if (parsed != std::errc()) return std::nullopt;
    at = static_cast<std::size_t>(end - text.data());
    return value;
}

std::string mark_text(const ProcessMark& mark) {
    return std::to_string(mark.pid) + " " + std::to_string(mark.start) + "\n";
}

std::optional<ProcessMark> parse_mark(std::string_view text) {
    std::size_t at = 0;
    const auto pid = next_number(text, at);
    const auto start = next_number(text, at);
    if (!pid || !start || *pid == 0 || *pid > static_cast<std::uint64_t>(INT32_MAX))
        return std::nullopt;
    return ProcessMark{static_cast<pid_t>(*pid), *start};
}

// The marks recorded in `steps` (each file steps/PID).
std::vector<ProcessMark> recorded_steps(const sandbox::SafeDir& steps) {
    std::vector<std::string> names;
    (void)steps.walk([&](const sandbox::WalkEntry& entry) {
        if (entry.kind == sandbox::EntryKind::regular) names.push_back(entry.relative);
        return sandbox::WalkStep::skip;
    });
    std::vector<ProcessMark> marks;
    for (const auto& name : names) {
        auto text = steps.read_file_if_present(name, k_mark_limits, "a step's record");
        if (!text || !*text) continue;
        if (auto mark = parse_mark(**text)) marks.push_back(*mark);
    }
    return marks;
}

// Waits until none of `marks` runs any more, or the deadline; returns those still running.
std::vector<ProcessMark> wait_gone(std::vector<ProcessMark> marks,
                                   std::chrono::milliseconds within) {
    const auto deadline = std::chrono::steady_clock::now() + within;
    for (;;) {
        std::erase_if(marks, [](const ProcessMark& mark) { return !still_running(mark); });
        if (marks.empty() || std::chrono::steady_clock::now() >= deadline) return marks;
        std::this_thread::sleep_for(k_poll);
    }
}

// SIGTERM to each step's `sandgate hook` (it stops its tree, then exits), SIGKILL after the
// grace. Signals go only to the very processes recorded (checked by start time just before).
void stop_steps(const std::vector<ProcessMark>& marks, std::chrono::milliseconds grace) {
    std::vector<ProcessMark> running;
    for (const auto& mark : marks) {
        if (mark.pid == ::getpid() || !still_running(mark)) continue;
        spdlog::info("stopping a step of the job still running (pid {})", mark.pid);
        ::kill(mark.pid, SIGTERM);
        running.push_back(mark);
    }
    for (const auto& mark : wait_gone(running, grace)) {
        if (still_running(mark)) ::kill(mark.pid, SIGKILL);
    }
    (void)wait_gone(running, k_after_kill);
}

}  // namespace

std::optional<ProcessMark> process_mark(pid_t pid) {
    const auto text = sandbox::read_small_file("/proc/" + std::to_string(pid) + "/stat");
    if (!text) return std::nullopt;
    // After the command (which may hold ')'): ") STATE PPID ... STARTTIME ...".
    const auto close = text->rfind(')');
    if (close == std::string::npos || close + 3 > text->size()) return std::nullopt;
    const char state = (*text)[close + 2];
    if (state == 'Z' || state == 'X') return std::nullopt;
    std::size_t at = close + 2;  // the state; the fields before the start time are skipped
    for (int token = 1; token <= k_start_time_token && at != std::string::npos; ++token)
        at = text->find(' ', at + 1);
    if (at == std::string::npos) return std::nullopt;
    const auto start = next_number(*text, at);
    if (!start) return std::nullopt;
    return ProcessMark{pid, *start};
}

bool still_running(const ProcessMark& mark) {
    const auto now = process_mark(mark.pid);
    return now && now->start == mark.start;
}

StepRecord::~StepRecord() {
    if (!m_name.empty()) (void)m_steps.remove(m_name, "the step's record");
}

common::Expected<sandbox::SafeDir> HookJobs::open_root() const {
    std::error_code ec;
    // trusted path: the hook's own state directory
    std::filesystem::create_directories(m_root, ec);
    if (ec)
        return fail(ErrorKind::permanent, "cannot create " + m_root.string() + ": " + ec.message());
    return sandbox::SafeDir::open_trusted(m_root, "the hook's job directories");
}

common::Expected<std::filesystem::path> HookJobs::create(
    const std::string& id, ProcessMark owner, std::optional<sandbox::Owner> sandbox) const {
    auto root = SANDGATE_TRY(open_root());
    auto job = root.make_dirs(id, {0700, std::nullopt}, "the job's directory");
    if (!job) return std::unexpected(job.error());
    if (auto ok =
            job->create_file("owner", mark_text(owner), {0600, std::nullopt}, "the job's owner");
        !ok)
        return std::unexpected(ok.error());
    if (auto steps = job->make_dirs("steps", {0700, std::nullopt}, "the job's steps"); !steps)
        return std::unexpected(steps.error());
    (void)SANDGATE_TRY(job->make_dirs("scratch", {0700, sandbox}, "the job's scratch"));
    return scratch(id);
}

common::Expected<StepRecord> HookJobs::record_step(const std::string& id) const {
    auto root = SANDGATE_TRY(open_root());
    auto steps = root.open_dir(id + "/steps", "the job's steps");
    if (!steps)
        return fail(ErrorKind::invalid_input, "state.sandgate.job: job " + id +
                                                  " is not prepared here (cleaned up already?)");
    const auto self = process_mark(::getpid());
    if (!self) return fail(ErrorKind::unavailable, "cannot read this process's /proc/self/stat");
    const std::string name = std::to_string(self->pid);
    (void)steps->remove(name, "a stale step record");  // a record of an earlier, reused pid
    if (auto ok =
            steps->create_file(name, mark_text(*self), {0600, std::nullopt}, "the step's record");
        !ok)
        return std::unexpected(ok.error());
    return StepRecord(std::move(*steps), name);
}

common::Expected<void> HookJobs::finish(const std::string& id,
                                        std::chrono::milliseconds grace) const {
    auto root = SANDGATE_TRY(open_root());
    if (auto steps = root.open_dir(id + "/steps", "the job's steps"))
        stop_steps(recorded_steps(*steps), grace);
    return root.remove(id, "the job's directory");
}

std::size_t HookJobs::reap_stale(std::chrono::milliseconds grace) const {
    auto root = open_root();
    if (!root) return 0;
    std::vector<std::string> ids;
    (void)root->walk([&](const sandbox::WalkEntry& entry) {
        if (entry.kind == sandbox::EntryKind::directory) ids.push_back(entry.relative);
        return sandbox::WalkStep::skip;
    });
    std::size_t reaped = 0;
    for (const auto& id : ids) {
        auto job = root->open_dir(id, "a job's directory");
        if (!job) continue;
        auto owner = job->read_file_if_present("owner", k_mark_limits, "a job's owner");
        if (!owner) continue;
        if (*owner) {
            const auto mark = parse_mark(**owner);
            if (mark && still_running(*mark)) continue;
        } else {
            struct stat st {};
            if (::fstat(job->fd(), &st) != 0 ||
                std::time(nullptr) - st.st_mtime < k_ownerless_age_seconds)
                continue;  // a prepare_job making it right now
        }
        if (auto done = finish(id, grace); !done) {
            spdlog::warn("hook job {}: {}", id, done.error().message);
            continue;
        }
        spdlog::info("hook job {}: its owner is gone; its steps stopped and its scratch removed",
                     id);
        ++reaped;
    }
    return reaped;
}

}  // namespace agent
