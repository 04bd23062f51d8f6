// The reporter's flow: journal ahead, send, forget; and the replay of what was kept.

#include "github/check_runs.hpp"

#include <spdlog/spdlog.h>

#include <map>
#include <mutex>
#include <set>

#include "github/check_run_api.hpp"
#include "github/journal.hpp"
#include "github/report_format.hpp"

namespace github {
namespace {

using common::ErrorKind;

bool valid_name_part(std::string_view part) {
    return !part.empty() && part != "." && part != ".." &&
           part.find_first_of("/ \t\r\n?#%") == std::string_view::npos;
}

constexpr std::string_view k_abandoned_note =
    "The sandgate process that ran this job stopped before the job finished; the run was "
    "concluded as cancelled when its report journal was replayed.";

}  // namespace

std::optional<ReportAs> parse_report_as(std::string_view text) {
    if (text == "checks") return ReportAs::checks;
    if (text == "status") return ReportAs::status;
    return std::nullopt;
}

common::Expected<Repository> Repository::parse(std::string_view text) {
    const auto slash = text.find('/');
    if (slash == std::string_view::npos || !valid_name_part(text.substr(0, slash)) ||
        !valid_name_part(text.substr(slash + 1))) {
        return common::fail(ErrorKind::invalid_input,
                            "--github-repo: expected OWNER/NAME, got '" + std::string(text) + "'");
    }
    return Repository{std::string(text.substr(0, slash)), std::string(text.substr(slash + 1))};
}

struct Reporter::State {
    State(HttpClient http, ReporterOptions reporter_options)
        : client(std::move(http)), options(std::move(reporter_options)) {}

    HttpClient client;
    ReporterOptions options;
    std::optional<Journal> journal;
    ProcessIdentity self = ProcessIdentity::self();
    mutable std::mutex mutex;
    std::map<std::string, std::int64_t> ids;  // journal key -> check run id
    std::set<std::string> in_flight;          // keys of jobs started here and not finished

    JournalEntry entry_for(const JobReport& report, JournalPhase phase) const;
    common::Expected<void> send_start(JournalEntry& entry);
    common::Expected<void> send_finish(JournalEntry& entry);
    common::Expected<std::int64_t> resolve_id(JournalEntry& entry, const api::Target& target);
    void remember(const JournalEntry& entry);
    void keep(const JournalEntry& entry) const;
    void forget(const std::string& key);
    common::Expected<Delivery> deliver(JournalEntry entry);
};

common::Expected<Reporter> Reporter::create(HttpClient client, ReporterOptions options) {
    JobReport probe;
    probe.workflow = "w";
    probe.job = "j";
    probe.job_key = "k";
    probe.sha = "0000000";
    (void)SANDGATE_TRY(render_check_name(options.check_name_template, probe));
    auto state = std::make_shared<State>(std::move(client), std::move(options));
    if (state->options.journal_dir) {
        auto journal = Journal::open(*state->options.journal_dir);
        if (!journal) return std::unexpected(journal.error());
        state->journal = std::move(*journal);
    }
    return Reporter(std::move(state));
}

JournalEntry Reporter::State::entry_for(const JobReport& report, JournalPhase phase) const {
    JournalEntry entry;
    entry.kind =
        options.report_as == ReportAs::status ? JournalKind::status : JournalKind::check_run;
    entry.phase = phase;
    entry.api_url = client.api_url();
    entry.owner = options.repository.owner;
    entry.repo = options.repository.name;
    entry.check_name = render_check_name(options.check_name_template, report).value_or("");
    entry.details_url = options.details_url;
    entry.owner_process = self;
    entry.report = report;
    std::lock_guard lock(mutex);
    if (auto it = ids.find(entry.key()); it != ids.end()) entry.check_run_id = it->second;
    return entry;
}

void Reporter::State::remember(const JournalEntry& entry) {
    if (!entry.check_run_id) return;
    std::lock_guard lock(mutex);
    ids[entry.key()] = *entry.check_run_id;
}

void Reporter::State::keep(const JournalEntry& entry) const {
    if (!journal) return;
    if (auto written = journal->put(entry); !written) {
        spdlog::error("github: cannot journal the report of {}: {}", entry.check_name,
                      written.error().message);
    }
}

void Reporter::State::forget(const std::string& key) {
    if (journal) {
        if (auto removed = journal->remove(key); !removed) {
            spdlog::warn("github: {}", removed.error().message);
        }
    }
}

common::Expected<std::int64_t> Reporter::State::resolve_id(JournalEntry& entry,
                                                           const api::Target& target) {
    if (entry.check_run_id) return *entry.check_run_id;
    auto found = SANDGATE_TRY(api::find_check_run(target, entry.report));
    if (!found) return common::fail(ErrorKind::invalid_input, "no run yet");
    entry.check_run_id = *found;
    remember(entry);
    return *found;
}

common::Expected<void> Reporter::State::send_start(JournalEntry& entry) {
    const api::Target target{client, options.repository, entry.check_name, entry.details_url};
    if (entry.kind == JournalKind::status) return api::post_status(target, entry.report);
    auto id = resolve_id(entry, target);
    if (id) return api::reopen(target, *id, entry.report);
    if (id.error().message != "no run yet") return std::unexpected(id.error());
    auto created = SANDGATE_TRY(api::create_in_progress(target, entry.report));
    entry.check_run_id = created;
    remember(entry);
    return {};
}

common::Expected<void> Reporter::State::send_finish(JournalEntry& entry) {
    const api::Target target{client, options.repository, entry.check_name, entry.details_url};
    if (entry.kind == JournalKind::status) return api::post_status(target, entry.report);
    const std::size_t total = entry.report.annotations.size();
    if (entry.annotations_sent == 0) {
        auto id = resolve_id(entry, target);
        if (!id && id.error().message != "no run yet") return std::unexpected(id.error());
        if (id) {
            auto concluded = api::conclude(target, *id, entry.report);
            if (!concluded && concluded.error().kind == ErrorKind::invalid_input) {
                // GitHub refused the full report: still conclude, then report the refusal.
                (void)api::conclude_plainly(target, *id, entry.report, concluded.error().message);
            }
            if (!concluded) return concluded;
        } else {
            auto created = SANDGATE_TRY(api::create_completed(target, entry.report));
            entry.check_run_id = created;
            remember(entry);
        }
        entry.annotations_sent = std::min(total, k_annotations_per_request);
        if (entry.annotations_sent < total) keep(entry);  // progress survives a crash
    }
    while (entry.annotations_sent < total) {
        auto id = SANDGATE_TRY(resolve_id(entry, target));
        auto added = api::add_annotations(target, id, entry.report, entry.annotations_sent);
        if (!added) return added;
        entry.annotations_sent =
            std::min(total, entry.annotations_sent + k_annotations_per_request);
        if (entry.annotations_sent < total) keep(entry);
    }
    return {};
}

// Sends one entry (start or finish); journals it on failure. Shared by start() and finish().
common::Expected<Delivery> Reporter::State::deliver(JournalEntry entry) {
    const std::string key = entry.key();
    const bool finishing = entry.phase == JournalPhase::finishing;
    keep(entry);  // written ahead: a crash while sending loses nothing
    auto sent = finishing ? send_finish(entry) : send_start(entry);
    if (sent) {
        if (finishing) {
            forget(key);
        } else if (entry.check_run_id) {
            keep(entry);  // the id is worth keeping for the finish of a later process
        }
        return Delivery::sent;
    }
    const common::Error& error = sent.error();
    spdlog::warn("github: reporting {} ({}) failed: {}", entry.check_name,
                 finishing ? "finish" : "start", error.message);
    if (error.kind == ErrorKind::invalid_input || !journal) {
        if (finishing || error.kind == ErrorKind::invalid_input) forget(key);
        return std::unexpected(error);
    }
    keep(entry);
    return Delivery::journaled;
}

common::Expected<Delivery> Reporter::start(const JobReport& report) {
    SANDGATE_CHECK(validate(report));
    JobReport started = report;
    started.status = JobStatus::in_progress;
    started.conclusion.reset();
    JournalEntry entry = m_state->entry_for(started, JournalPhase::started);
    {
        std::lock_guard lock(m_state->mutex);
        m_state->in_flight.insert(entry.key());
    }
    return m_state->deliver(std::move(entry));
}

common::Expected<Delivery> Reporter::finish(const JobReport& report) {
    SANDGATE_CHECK(validate(report));
    if (report.status != JobStatus::completed) {
        return common::fail(ErrorKind::invalid_input, "finish(): the job report is not completed");
    }
    JournalEntry entry = m_state->entry_for(report, JournalPhase::finishing);
    const std::string key = entry.key();
    auto delivered = m_state->deliver(std::move(entry));
    std::lock_guard lock(m_state->mutex);
    m_state->in_flight.erase(key);
    return delivered;
}

std::optional<std::int64_t> Reporter::check_run_id(const JobReport& report) const {
    JournalEntry entry = m_state->entry_for(report, JournalPhase::started);
    return entry.check_run_id;
}

common::Expected<ReplayResult> Reporter::replay() {
    ReplayResult result;
    if (!m_state->journal) return result;
    auto entries = m_state->journal->entries();
    if (!entries) return std::unexpected(entries.error());
    for (JournalEntry& entry : *entries) {
        const std::string key = entry.key();
        bool busy = false;
        {
            std::lock_guard lock(m_state->mutex);
            busy = m_state->in_flight.contains(key);
        }
        const bool ours = entry.owner_process.pid == m_state->self.pid &&
                          entry.owner_process.start_time == m_state->self.start_time;
        const bool other_alive = !ours && entry.owner_process.alive();
        if (busy || other_alive || entry.api_url != m_state->client.api_url() ||
            entry.owner != m_state->options.repository.owner ||
            entry.repo != m_state->options.repository.name) {
            ++result.skipped;
            continue;
        }
        if (entry.phase == JournalPhase::started) {
            // Its process is gone (or it is ours and no longer running): conclude it.
            entry.phase = JournalPhase::finishing;
            entry.report.status = JobStatus::completed;
            entry.report.conclusion = Conclusion::cancelled;
            if (!entry.report.completed_at)
                entry.report.completed_at = std::chrono::system_clock::now();
            entry.report.log_tail = std::string(k_abandoned_note);
        }
        entry.owner_process = m_state->self;
        auto sent = m_state->send_finish(entry);
        if (sent) {
            m_state->forget(key);
            ++result.sent;
        } else if (sent.error().kind == ErrorKind::invalid_input) {
            spdlog::error("github: journaled report of {} rejected, dropped: {}", entry.check_name,
                          sent.error().message);
            m_state->forget(key);
            ++result.dropped;
        } else {
            m_state->keep(entry);
            ++result.kept;
        }
    }
    return result;
}

}  // namespace github
