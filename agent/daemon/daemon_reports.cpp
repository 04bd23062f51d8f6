#include "agent/daemon/daemon_reports.hpp"

#include <simdjson.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <thread>

#include "agent/daemon/secret_file_token.hpp"
#include "agent/gate/gate_reporting.hpp"
#include "github/journal.hpp"

namespace agent {

using common::ErrorKind;
using common::Expected;
using common::fail;

namespace {

std::optional<github::Conclusion> conclusion_of(JobState state) {
    switch (state) {
        case JobState::succeeded:
            return github::Conclusion::success;
        case JobState::failed:
            return github::Conclusion::failure;
        case JobState::cancelled:
            return github::Conclusion::cancelled;
        case JobState::timed_out:
            return github::Conclusion::timed_out;
        case JobState::skipped:
            return github::Conclusion::skipped;
        case JobState::queued:
        case JobState::running:
            break;
    }
    return std::nullopt;
}

std::chrono::system_clock::time_point from_ms(std::int64_t ms) {
    return std::chrono::system_clock::time_point(std::chrono::milliseconds(ms));
}

bool owner_name(const std::string& repository) {
    return github::Repository::parse(repository).has_value() &&
           repository.find("://") == std::string::npos;
}

// The steps, annotations and failing step of the job's run report, each step named
// "job / step" (one agent job may run several workflow jobs).
void add_run_report(const std::filesystem::path& path, github::JobReport& report) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return;
    std::ostringstream text;
    text << in.rdbuf();
    auto jobs = job_reports_from_run_report(text.str(), report.sha);
    if (!jobs) {
        spdlog::warn("{}: {}", path.string(), jobs.error().message);
        return;
    }
    for (auto& job : *jobs) {
        for (auto& step : job.steps) {
            step.name = job.job + " / " + step.name;
            report.steps.push_back(std::move(step));
        }
        for (auto& note : job.annotations) report.annotations.push_back(std::move(note));
        if (report.failing_step.empty() && !job.failing_step.empty()) {
            report.failing_step = job.job + " / " + job.failing_step;
            report.exit_code = job.exit_code;
            report.log_tail += "\n\n" + job.log_tail;
        }
    }
}

}  // namespace

github::ClientOptions agent_client_options(const AgentConfig& config) {
    github::ClientOptions options;
    options.api_url = config.api_url;
    options.max_attempts = 2;
    options.rate_limit_max_wait = k_agent_rate_limit_wait;
    return options;
}

Expected<std::optional<github::HttpClient>> agent_github_client(const AgentConfig& config) {
    if (!config.github_token_file) return std::optional<github::HttpClient>();
    auto token = SANDGATE_TRY(SecretFileToken::open(*config.github_token_file));
    auto client =
        SANDGATE_TRY(github::HttpClient::create(agent_client_options(config), std::move(token)));
    return std::optional<github::HttpClient>(std::move(client));
}

ReportSender::ReportSender(const AgentConfig& config, JobQueue& queue,
                           std::optional<github::HttpClient> client)
    : m_config(config), m_queue(queue), m_client(std::move(client)) {}

Expected<github::JobReport> ReportSender::job_report(const Job& job, const Report& queued) const {
    github::JobReport report;
    report.workflow = "sandgate";
    report.workflow_path = ".github/workflows";
    report.job = job.spec.key.workflow_job.empty() ? "gate" : job.spec.key.workflow_job;
    report.job_key = report.job;
    report.sha = job.spec.key.sha;
    report.started_at = from_ms(job.started_ms ? job.started_ms : system_now_ms());
    if (queued.kind == "start") return report;
    if (queued.kind != "conclude")
        return fail(ErrorKind::invalid_input, "report kind '" + queued.kind + "' is unknown");
    simdjson::dom::parser parser;
    simdjson::dom::element body;
    std::string_view state_text, reason;
    if (parser.parse(queued.body_json).get(body) != simdjson::SUCCESS ||
        body["state"].get(state_text) != simdjson::SUCCESS)
        return fail(ErrorKind::invalid_input, "conclude report: field state is missing");
    if (body["reason"].get(reason) != simdjson::SUCCESS) reason = "";
    const auto state = parse_job_state(state_text);
    const auto conclusion = state ? conclusion_of(*state) : std::nullopt;
    if (!conclusion)
        return fail(ErrorKind::invalid_input,
                    "conclude report: state '" + std::string(state_text) + "' is not terminal");
    report.status = github::JobStatus::completed;
    report.conclusion = conclusion;
    report.completed_at = from_ms(job.finished_ms ? job.finished_ms : system_now_ms());
    report.log_tail = "sandgate job " + std::to_string(job.id) + ": " + std::string(state_text) +
                      (reason.empty() ? "" : " (" + std::string(reason) + ")");
    add_run_report(job_report_path(m_config, job.id), report);
    return report;
}

Expected<github::Reporter*> ReportSender::reporter_for(const std::string& repository) {
    if (auto it = m_reporters.find(repository); it != m_reporters.end()) return &it->second;
    auto parsed = SANDGATE_TRY(github::Repository::parse(repository));
    github::ReporterOptions options;
    options.repository = parsed;
    options.check_name_template = m_config.check_name;
    auto reporter = SANDGATE_TRY(github::Reporter::create(*m_client, std::move(options)));
    return &m_reporters.emplace(repository, std::move(reporter)).first->second;
}

std::chrono::milliseconds ReportSender::rate_limit_wait() const {
    if (!m_client) return std::chrono::milliseconds(0);
    const auto until = m_client->rate_limited_until();
    if (!until) return std::chrono::milliseconds(0);
    return std::chrono::duration_cast<std::chrono::milliseconds>(*until -
                                                                 std::chrono::system_clock::now()) +
           std::chrono::milliseconds(1);
}

void ReportSender::failed(const Report& report, const common::Error& error, DeliveryStats& stats) {
    const bool refused = error.kind == ErrorKind::invalid_input;
    const bool denied = error.kind == ErrorKind::permanent;
    if (refused || (denied && report.attempts + 1 >= k_max_report_attempts)) {
        spdlog::error("job {}: {} report dropped after {} attempt(s): {}", report.job_id,
                      report.kind, report.attempts + 1, error.message);
        (void)m_queue.report_delivered(report.id);
        ++stats.dropped;
        return;
    }
    const std::chrono::milliseconds backoff =
        denied ? std::chrono::milliseconds(k_report_backoff_cap)
               : std::min<std::chrono::milliseconds>(
                     k_report_backoff_cap,
                     std::chrono::seconds(std::int64_t{1}
                                          << std::min<std::int64_t>(report.attempts, 16)));
    // GitHub said when: never sooner (and not capped: a primary rate limit resets hourly).
    const auto retry = std::max(backoff, rate_limit_wait());
    spdlog::warn("job {}: {} report not sent (attempt {}), retry in {} s: {}", report.job_id,
                 report.kind, report.attempts + 1, (retry.count() + 999) / 1000, error.message);
    (void)m_queue.report_failed(report.id, retry);
    ++stats.kept;
}

Expected<github::Delivery> ReportSender::send(const Job& job, const Report& report) {
    auto built = SANDGATE_TRY(job_report(job, report));
    auto reporter = SANDGATE_TRY(reporter_for(job.spec.key.repository));
    return report.kind == "start" ? (reporter)->start(built) : (reporter)->finish(built);
}

void ReportSender::deliver(const Report& report, DeliveryStats& stats) {
    if (const auto wait = rate_limit_wait(); wait.count() > 0) {
        spdlog::debug("job {}: {} report put back for {} ms (GitHub's rate limit)", report.job_id,
                      report.kind, wait.count());
        (void)m_queue.report_deferred(report.id, wait);
        ++stats.kept;
        return;
    }
    auto job = m_queue.get(report.job_id);
    if (!job) {  // the queue is out of reach: the report's lease runs out, it is due again
        spdlog::warn("job {}: {} report: {}", report.job_id, report.kind, job.error().message);
        ++stats.kept;
        return;
    }
    if (!*job || !m_client || !owner_name((*job)->spec.key.repository)) {
        spdlog::debug("job {}: {} report not sent (no GitHub to report to)", report.job_id,
                      report.kind);
        (void)m_queue.report_delivered(report.id);
        ++stats.dropped;
        return;
    }
    auto sent = send(**job, report);
    if (!sent) return failed(report, sent.error(), stats);
    if (auto ok = m_queue.report_delivered(report.id); !ok) {
        spdlog::warn("job {}: {} report sent, not yet marked: {}", report.job_id, report.kind,
                     ok.error().message);
        m_unmarked.push_back(report);
    }
    ++stats.sent;
}

// Sent, but the queue could not be told (its database went away that moment): told again for
// a while, else the report would go out a second time once its lease ends, and the job's later
// reports would wait for that.
void ReportSender::mark_sent() {
    auto delay = std::chrono::milliseconds(250);
    const auto until = std::chrono::steady_clock::now() + k_mark_patience;
    while (!m_unmarked.empty()) {
        std::erase_if(m_unmarked, [this](const Report& report) {
            return m_queue.report_delivered(report.id).has_value();
        });
        if (m_unmarked.empty() || std::chrono::steady_clock::now() + delay > until) break;
        std::this_thread::sleep_for(delay);
        delay = std::min<std::chrono::milliseconds>(delay * 2, std::chrono::seconds(4));
    }
    for (const auto& report : m_unmarked)
        spdlog::warn(
            "job {}: {} report sent but not marked (the queue is out of reach): it goes out "
            "again when its lease ends",
            report.job_id, report.kind);
    m_unmarked.clear();
}

DeliveryStats ReportSender::deliver_due(std::size_t limit) {
    DeliveryStats stats;
    std::size_t handled = 0;
    // One by one, each claimed right before it is sent (its lease covers one send); a job's
    // next report becomes due once the one before it was sent.
    while (handled < limit) {
        auto reports = m_queue.claim_reports(1, k_report_lease);
        if (!reports) {
            spdlog::warn("reports: {}", reports.error().message);
            break;
        }
        if (reports->empty()) break;
        for (const auto& report : *reports) deliver(report, stats);
        handled += reports->size();
    }
    mark_sent();
    replay_journal();
    return stats;
}

void ReportSender::replay_journal() {
    if (!m_client) return;
    const auto directory = github::journal_directory(m_config.state_dir);
    std::error_code ec;
    if (std::filesystem::is_empty(directory, ec) || ec) return;
    for (const auto& repository : m_config.repositories) {
        auto it = m_journal_reporters.find(repository);
        if (it == m_journal_reporters.end()) {
            auto parsed = github::Repository::parse(repository);
            if (!parsed) continue;
            github::ReporterOptions options;
            options.repository = *parsed;
            options.journal_dir = directory;
            auto reporter = github::Reporter::create(*m_client, std::move(options));
            if (!reporter) continue;
            it = m_journal_reporters.emplace(repository, std::move(*reporter)).first;
        }
        auto replayed = it->second.replay();
        if (!replayed)
            spdlog::warn("journal {}: {}", repository, replayed.error().message);
        else if (replayed->sent > 0)
            spdlog::info("journal {}: {} report(s) sent", repository, replayed->sent);
    }
}

}  // namespace agent
