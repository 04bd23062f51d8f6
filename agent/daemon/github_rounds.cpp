#include "agent/daemon/github_rounds.hpp"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>

#include "github/journal.hpp"  // journal_directory only (inline): no GitHub code is linked
#include "sandbox/process/run.hpp"

namespace agent {

namespace {

constexpr std::chrono::seconds k_report_check{1};
constexpr std::size_t k_report_peek = 20;

std::string describe(const JobExit& exit) {
    return exit.exit_code ? "the worker exited " + std::to_string(*exit.exit_code)
                          : "the worker died of signal " + std::to_string(exit.signal.value_or(0));
}

// k_round_backoff_first doubled per failure after the first, at most k_round_backoff_cap.
std::chrono::seconds backoff_after(int failures) {
    auto delay = k_round_backoff_first;
    for (int i = 1; i < failures && delay < k_round_backoff_cap; ++i) delay *= 2;
    return std::min(delay, k_round_backoff_cap);
}

}  // namespace

GitHubRounds::GitHubRounds(const AgentConfig& config, JobQueue& queue,
                           std::filesystem::path worker_binary, std::chrono::milliseconds deadline)
    : m_config(config),
      m_queue(queue),
      m_binary(std::move(worker_binary)),
      m_round_deadline(deadline) {
    const auto now = Clock::now();
    m_next_poll = m_next_report_check = m_next_journal = m_not_before = now;
}

bool GitHubRounds::tick(Draining draining) {
    const bool ended = reap();
    if (m_worker) {
        if (Clock::now() >= m_deadline) {
            spdlog::warn("github round: still running after {} ms, killed",
                         m_round_deadline.count());
            m_worker->signal_group(SIGKILL);
            m_deadline = Clock::time_point::max();  // reaped at a later tick
        }
        return ended;
    }
    if (!m_config.github_token_file) {
        drop_reports();
        return ended;
    }
    // Backing off: nothing starts, not even for a wake-up (it stays pending).
    if (Clock::now() < m_not_before) return ended;
    const bool poll = draining == Draining::no && m_config.poll_interval.count() > 0 &&
                      !m_config.repositories.empty() && Clock::now() >= m_next_poll;
    if (poll || reports_due() || journal_due()) start(poll ? PollNow::yes : PollNow::no);
    return ended;
}

bool GitHubRounds::reap() {
    if (!m_worker) return false;
    const auto exit = m_worker->poll();
    if (!exit) return false;
    m_worker.reset();
    // A round that ran may leave reports (a poll's cancellations): look at once. One that
    // failed backs off: a worker failing at start would otherwise be started again on every
    // tick that finds something due, as fast as it fails.
    if (exit->exit_code == 0) {
        round_succeeded();
        m_woken = true;
    } else {
        round_failed(describe(*exit));
    }
    return true;
}

void GitHubRounds::round_failed(const std::string& why) {
    ++m_failures;
    const auto delay = backoff_after(m_failures);
    m_not_before = Clock::now() + delay;
    if (delay == m_backoff) {
        spdlog::debug("github round: {}; next round in {} s", why, delay.count());
        return;
    }
    m_backoff = delay;
    spdlog::warn("github round: {}; {} failed round(s) in a row, next round in {} s", why,
                 m_failures, delay.count());
}

void GitHubRounds::round_succeeded() {
    if (m_failures > 0)
        spdlog::info("github round: succeeded after {} failed round(s); no more backoff",
                     m_failures);
    m_failures = 0;
    m_backoff = std::chrono::seconds(0);
}

// Whether to look at the queue's owed reports now: once a second, or at once after a wake-up.
bool GitHubRounds::report_check_due() {
    const auto now = Clock::now();
    if (!m_woken && now < m_next_report_check) return false;
    m_woken = false;
    m_next_report_check = now + k_report_check;
    return true;
}

bool GitHubRounds::reports_due() {
    if (!report_check_due()) return false;
    auto due = m_queue.due_reports(k_report_peek);
    // A queue out of reach is the loop's to report (once), not every second here.
    if (!due && due.error().kind == common::ErrorKind::transient)
        spdlog::debug("reports: {}", due.error().message);
    else if (!due)
        spdlog::warn("reports: {}", due.error().message);
    if (!due || due->empty()) return false;
    // Ours (or nobody's): now. Another agent's of a pool's: its own rounds send them, so we
    // look only every k_foreign_reports (for those of an agent that is gone), or every agent
    // would start a round for each report of the pool.
    for (const auto& report : *due)
        if (report.owner.empty() || report.owner == m_config.id) return true;
    const auto now = Clock::now();
    if (now < m_next_foreign_check) return false;
    m_next_foreign_check = now + k_foreign_reports;
    return true;
}

bool GitHubRounds::journal_due() {
    if (Clock::now() < m_next_journal) return false;
    m_next_journal = Clock::now() + k_journal_retry;
    if (m_config.repositories.empty()) return false;  // nothing to replay towards
    std::error_code ec;
    const auto directory = github::journal_directory(m_config.state_dir);
    return std::filesystem::exists(directory, ec) && !std::filesystem::is_empty(directory, ec) &&
           !ec;
}

void GitHubRounds::drop_reports() {
    if (!report_check_due()) return;
    auto due = m_queue.due_reports(100);
    if (!due) {
        spdlog::warn("reports: {}", due.error().message);
        return;
    }
    for (const auto& report : *due) {
        spdlog::debug("job {}: {} report not sent (no GitHub to report to)", report.job_id,
                      report.kind);
        if (auto ok = m_queue.report_delivered(report.id); !ok)
            spdlog::warn("job {}: {} report not removed: {}", report.job_id, report.kind,
                         ok.error().message);
    }
}

void GitHubRounds::start(PollNow poll) {
    std::vector<std::string> argv = {m_binary.string(), "agent-github", "--config",
                                     m_config.source.string()};
    if (poll == PollNow::yes) argv.emplace_back("--poll");
    if (spdlog::get_level() <= spdlog::level::debug) argv.emplace_back("-v");
    // The daemon's whole environment, as when the round ran in one of its threads (proxies,
    // CA bundles, XDG_STATE_HOME).
    const auto env = sandbox::current_environment();
    const auto now = Clock::now();
    if (poll == PollNow::yes) m_next_poll = now + m_config.poll_interval;
    m_next_journal = now + k_journal_retry;  // every round replays the journal
    auto worker = JobProcess::start(argv, env, {});
    if (!worker) {
        round_failed("cannot start " + m_binary.string() + ": " + worker.error().message);
        return;
    }
    spdlog::debug("github round: worker {} started{}", worker->pid(),
                  poll == PollNow::yes ? " (poll)" : "");
    m_worker.emplace(std::move(*worker));
    m_deadline = now + m_round_deadline;
}

void GitHubRounds::finish(std::chrono::seconds grace) {
    if (m_worker) {
        // Woken by the worker's pidfd the moment it exits, not by a timer.
        if (auto exit = m_worker->wait_for(grace)) {
            if (exit->exit_code != 0) spdlog::warn("github round: {}", describe(*exit));
            m_worker.reset();
            return;
        }
        spdlog::warn("github round: still running {} s into shutdown, killed", grace.count());
    }
    m_worker.reset();  // kills its group and reaps it
}

}  // namespace agent
