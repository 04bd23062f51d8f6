// The SQLite JobQueue. Every mutation runs in BEGIN IMMEDIATE, which takes the database's
// write lock before reading: two claimers (threads or processes) can never both see the same
// job queued. WAL lets readers (list/get, the API) proceed while a writer holds the lock.
#include "agent/store/job_store.hpp"

#include <mutex>
#include <nlohmann/json.hpp>

#include "agent/store/job_store_schema.hpp"
#include "agent/store/job_store_sql.hpp"
#include "agent/store/sqlite.hpp"

namespace agent {

using common::ErrorKind;
using common::Expected;
using common::fail;

namespace {

using queue_sql::conclude_body;

constexpr std::string_view k_report_columns =
    "r.id, r.job_id, r.kind, r.body, r.attempts, r.next_attempt, r.owner";

class SqliteQueue final : public JobQueue {
public:
    SqliteQueue(std::shared_ptr<sqlite::Database> db, std::filesystem::path path, Clock clock)
        : m_connection(std::move(db)),
          m_db(*m_connection),
          m_path(std::move(path)),
          m_clock(std::move(clock)) {}

    QueueBackend backend() const override { return QueueBackend::sqlite; }
    std::string describe() const override { return "sqlite " + m_path.string(); }

    Expected<Submitted> submit(const JobSpec& spec) override {
        std::lock_guard lock(m_mutex);
        auto tx = SANDGATE_TRY(sqlite::Transaction::begin(m_db));
        auto insert = SANDGATE_TRY(m_db.prepare(
            "INSERT INTO jobs (repository, sha, workflow_job, attempt, ref, event, source, "
            "payload, state, created) VALUES (?,?,?,?,?,?,?,?,'queued',?) "
            "ON CONFLICT (repository, sha, workflow_job, attempt) DO NOTHING"));
        const auto& key = spec.key;
        insert.bind(1, key.repository).bind(2, key.sha).bind(3, key.workflow_job);
        insert.bind(4, key.attempt).bind(5, spec.ref).bind(6, spec.event).bind(7, spec.source);
        insert.bind(8, spec.payload_json).bind(9, m_clock());
        SANDGATE_CHECK(insert.run());
        const auto outcome = m_db.changes() > 0 ? SubmitOutcome::created : SubmitOutcome::duplicate;
        auto found = SANDGATE_TRY(query_jobs(
            "repository=?1 AND sha=?2 AND workflow_job=?3 AND attempt=?4",
            [&](sqlite::Statement& select) {
                select.bind(1, key.repository).bind(2, key.sha).bind(3, key.workflow_job);
                select.bind(4, key.attempt);
            }));
        if (found.empty()) return fail(ErrorKind::permanent, "submitted job vanished");
        Submitted submitted{std::move(found.front()), outcome};
        SANDGATE_CHECK(tx.commit());
        return submitted;
    }

    Expected<std::optional<Job>> get(std::int64_t id) override {
        std::lock_guard lock(m_mutex);
        return get_locked(id);
    }

    Expected<std::vector<Job>> list(const JobFilter& filter) override {
        std::lock_guard lock(m_mutex);
        const std::optional<std::string> state =
            filter.state ? std::optional<std::string>(std::string(to_string(*filter.state)))
                         : std::nullopt;
        return query_jobs(
            "id > ?1 AND (?2 IS NULL OR state = ?2) AND (?3 IS NULL OR repository = ?3) AND "
            "(?4 IS NULL OR sha = ?4) ORDER BY id LIMIT ?5",
            [&](sqlite::Statement& select) {
                select.bind(1, filter.after_id).bind_optional(2, state);
                select.bind_optional(3, filter.repository).bind_optional(4, filter.sha);
                select.bind(5, static_cast<std::int64_t>(filter.limit));
            });
    }

    Expected<std::int64_t> count(JobState state) override {
        std::lock_guard lock(m_mutex);
        auto select = SANDGATE_TRY(m_db.prepare("SELECT count(*) FROM jobs WHERE state = ?"));
        select.bind(1, to_string(state));
        (void)SANDGATE_TRY(select.step());
        return select.column_int(0);
    }

    Expected<std::optional<Job>> claim(std::string_view owner, std::chrono::milliseconds lease,
                                       std::size_t max_running) override {
        if (owner.empty()) return fail(ErrorKind::invalid_input, "claim: empty owner id");
        std::lock_guard lock(m_mutex);
        auto tx = SANDGATE_TRY(sqlite::Transaction::begin(m_db));
        auto running =
            m_db.prepare("SELECT count(*) FROM jobs WHERE state='running' AND lease_owner=?");
        if (!running) return std::unexpected(running.error());
        running->bind(1, owner);
        (void)SANDGATE_TRY(running->step());
        if (running->column_int(0) >= static_cast<std::int64_t>(max_running))
            return std::optional<Job>();
        const auto now = m_clock();
        auto update = SANDGATE_TRY(m_db.prepare(
            "UPDATE jobs SET state='running', lease_owner=?1, lease_expires=?2, "
            "claims=claims+1, started=CASE WHEN started=0 THEN ?3 ELSE started END "
            "WHERE id = (SELECT id FROM jobs WHERE state='queued' ORDER BY id LIMIT 1) "
            "RETURNING id"));
        update.bind(1, owner).bind(2, now + lease.count()).bind(3, now);
        auto row = SANDGATE_TRY(update.step());
        if (!row) return std::optional<Job>();
        const auto id = update.column_int(0);
        SANDGATE_CHECK(update.run());
        auto job = get_locked(id);
        if (!job) return std::unexpected(job.error());
        SANDGATE_CHECK(tx.commit());
        return job;
    }

    Expected<Heartbeat> heartbeat(std::int64_t id, std::string_view owner,
                                  std::chrono::milliseconds lease) override {
        std::lock_guard lock(m_mutex);
        const auto expires = m_clock() + lease.count();
        auto update = SANDGATE_TRY(
            m_db.prepare("UPDATE jobs SET lease_expires=?1 WHERE id=?2 AND lease_owner=?3 AND "
                         "state='running' RETURNING cancel_requested"));
        update.bind(1, expires).bind(2, id).bind(3, owner);
        auto row = SANDGATE_TRY(update.step());
        if (!row) return lease_lost(id, owner);
        Heartbeat beat{expires, update.column_int(0) != 0};
        SANDGATE_CHECK(update.run());
        return beat;
    }

    Expected<void> complete(std::int64_t id, std::string_view owner, JobState state,
                            std::string_view reason, std::string_view result_json) override {
        if (!is_terminal(state))
            return fail(ErrorKind::invalid_input,
                        "complete: state " + std::string(to_string(state)) + " is not terminal");
        std::lock_guard lock(m_mutex);
        auto tx = SANDGATE_TRY(sqlite::Transaction::begin(m_db));
        auto update = SANDGATE_TRY(m_db.prepare(
            "UPDATE jobs SET state=?1, reason=?2, result=?3, finished=?4, lease_owner='', "
            "lease_expires=0 WHERE id=?5 AND lease_owner=?6 AND state='running'"));
        update.bind(1, to_string(state)).bind(2, reason).bind(3, result_json);
        update.bind(4, m_clock()).bind(5, id).bind(6, owner);
        if (auto ok = update.run(); !ok) return ok;
        if (m_db.changes() == 0) return std::unexpected(lease_lost(id, owner).error());
        SANDGATE_CHECK(insert_report(id, "conclude", conclude_body(state, reason), owner));
        return tx.commit();
    }

    Expected<CancelOutcome> cancel(std::int64_t id, std::string_view reason) override {
        std::lock_guard lock(m_mutex);
        auto tx = SANDGATE_TRY(sqlite::Transaction::begin(m_db));
        auto job = SANDGATE_TRY(get_locked(id));
        if (!job) return fail(ErrorKind::invalid_input, "no job " + std::to_string(id));
        auto outcome = cancel_locked(*job, reason);
        if (!outcome) return outcome;
        SANDGATE_CHECK(tx.commit());
        return outcome;
    }

    Expected<std::vector<std::int64_t>> cancel_matching(std::string_view repository,
                                                        std::string_view sha,
                                                        std::string_view reason) override {
        std::lock_guard lock(m_mutex);
        auto tx = SANDGATE_TRY(sqlite::Transaction::begin(m_db));
        auto jobs = SANDGATE_TRY(select_jobs(
            "repository=?1 AND sha=?2 AND state IN ('queued','running')", repository, sha));
        std::vector<std::int64_t> ids;
        for (const auto& job : jobs) {
            (void)SANDGATE_TRY(cancel_locked(job, reason));
            ids.push_back(job.id);
        }
        SANDGATE_CHECK(tx.commit());
        return ids;
    }

    Expected<std::vector<Recovered>> recover_expired(OnLostLease policy,
                                                     std::int64_t max_claims) override {
        std::lock_guard lock(m_mutex);
        const auto now = std::to_string(m_clock());
        return recover_where("state='running' AND lease_expires < " + now, "", policy, max_claims);
    }

    Expected<std::vector<Recovered>> recover_owner(std::string_view owner, OnLostLease policy,
                                                   std::int64_t max_claims) override {
        std::lock_guard lock(m_mutex);
        return recover_where("state='running' AND lease_owner=?1", owner, policy, max_claims);
    }

    Expected<void> record_policy(std::int64_t id, std::string_view policy_json) override {
        std::lock_guard lock(m_mutex);
        auto update = SANDGATE_TRY(m_db.prepare("UPDATE jobs SET policy=?1 WHERE id=?2"));
        update.bind(1, policy_json).bind(2, id);
        if (auto ok = update.run(); !ok) return ok;
        if (m_db.changes() == 0)
            return fail(ErrorKind::invalid_input, "no job " + std::to_string(id));
        return {};
    }

    Expected<void> append_event(std::int64_t id, std::string_view kind,
                                std::string_view body_json) override {
        std::lock_guard lock(m_mutex);
        auto insert =
            m_db.prepare("INSERT INTO job_events (job_id, at, kind, body) VALUES (?,?,?,?)");
        if (!insert) return std::unexpected(insert.error());
        insert->bind(1, id).bind(2, m_clock()).bind(3, kind).bind(4, body_json);
        return insert->run();
    }

    Expected<std::vector<JobEvent>> events(std::int64_t id) override {
        std::lock_guard lock(m_mutex);
        auto select = SANDGATE_TRY(m_db.prepare(
            "SELECT id, job_id, at, kind, body FROM job_events WHERE job_id=? ORDER BY id"));
        select.bind(1, id);
        std::vector<JobEvent> out;
        while (true) {
            auto row = SANDGATE_TRY(select.step());
            if (!row) return out;
            out.push_back({select.column_int(0), select.column_int(1), select.column_int(2),
                           select.column_text(3), select.column_text(4)});
        }
    }

    Expected<std::int64_t> add_report(std::int64_t job_id, std::string_view kind,
                                      std::string_view body_json) override {
        std::lock_guard lock(m_mutex);
        // Owned by whoever holds the job now (the agent that runs it queues its start).
        auto insert = SANDGATE_TRY(m_db.prepare(
            "INSERT INTO reports (job_id, kind, body, next_attempt, owner) "
            "SELECT ?1, ?2, ?3, 0, COALESCE((SELECT lease_owner FROM jobs WHERE id = ?1), '')"));
        insert.bind(1, job_id).bind(2, kind).bind(3, body_json);
        SANDGATE_CHECK(insert.run());
        return m_db.last_insert_id();
    }

    Expected<std::vector<Report>> due_reports(std::size_t limit) override {
        std::lock_guard lock(m_mutex);
        return select_due(limit, m_clock());
    }

    Expected<std::vector<Report>> claim_reports(std::size_t limit,
                                                std::chrono::milliseconds lease) override {
        std::lock_guard lock(m_mutex);
        auto tx = SANDGATE_TRY(sqlite::Transaction::begin(m_db));
        const auto now = m_clock();
        auto obsolete =
            m_db.prepare("DELETE FROM reports AS r WHERE " + queue_sql::obsolete_start("r", "?1"));
        if (!obsolete) return std::unexpected(obsolete.error());
        obsolete->bind(1, now);
        SANDGATE_CHECK(obsolete->run());
        auto due = select_due(limit, now);
        if (!due) return due;
        auto hold =
            SANDGATE_TRY(m_db.prepare("UPDATE reports SET claimed_until = ?1 WHERE id = ?2"));
        for (const auto& report : *due) {
            hold.reset();
            hold.bind(1, now + lease.count()).bind(2, report.id);
            SANDGATE_CHECK(hold.run());
        }
        SANDGATE_CHECK(tx.commit());
        return due;
    }

    Expected<void> report_delivered(std::int64_t report_id) override {
        std::lock_guard lock(m_mutex);
        auto remove = SANDGATE_TRY(m_db.prepare("DELETE FROM reports WHERE id=?"));
        remove.bind(1, report_id);
        return remove.run();
    }

    Expected<void> report_failed(std::int64_t report_id,
                                 std::chrono::milliseconds retry_after) override {
        return reschedule(report_id, retry_after, 1);
    }

    Expected<void> report_deferred(std::int64_t report_id,
                                   std::chrono::milliseconds delay) override {
        return reschedule(report_id, delay, 0);
    }

    Expected<std::int64_t> owed_reports(std::optional<std::string_view> owner) override {
        std::lock_guard lock(m_mutex);
        auto select = SANDGATE_TRY(
            m_db.prepare("SELECT count(*) FROM reports WHERE ?1 IS NULL OR owner = ?1"));
        if (owner)
            select.bind(1, *owner);
        else
            select.bind_null(1);
        (void)SANDGATE_TRY(select.step());
        return select.column_int(0);
    }

private:
    Expected<std::vector<Report>> select_due(std::size_t limit, std::int64_t now) {
        auto select =
            m_db.prepare("SELECT " + std::string(k_report_columns) + " FROM reports AS r WHERE " +
                         queue_sql::due_report("?1") + " ORDER BY r.id LIMIT ?2");
        if (!select) return std::unexpected(select.error());
        select->bind(1, now).bind(2, static_cast<std::int64_t>(limit));
        std::vector<Report> out;
        while (true) {
            auto row = SANDGATE_TRY(select->step());
            if (!row) return out;
            out.push_back({select->column_int(0), select->column_int(1), select->column_text(2),
                           select->column_text(3), select->column_int(4), select->column_int(5),
                           select->column_text(6)});
        }
    }

    Expected<void> reschedule(std::int64_t report_id, std::chrono::milliseconds delay,
                              int attempt) {
        std::lock_guard lock(m_mutex);
        auto update = SANDGATE_TRY(m_db.prepare(
            "UPDATE reports SET attempts=attempts+?1, next_attempt=?2, claimed_until=0 WHERE "
            "id=?3"));
        update.bind(1, std::int64_t{attempt}).bind(2, m_clock() + delay.count()).bind(3, report_id);
        return update.run();
    }

    Expected<std::optional<Job>> get_locked(std::int64_t id) {
        auto jobs = SANDGATE_TRY(select_jobs("id=?1", std::to_string(id), ""));
        if (jobs.empty()) return std::optional<Job>();
        return std::optional<Job>(std::move(jobs.front()));
    }

    // The one job lookup: SELECT every column WHERE `tail` (conditions, then any ORDER BY /
    // LIMIT), its parameters bound by `bind`, each row read into a Job.
    template <typename Bind>
    Expected<std::vector<Job>> query_jobs(std::string_view tail, Bind&& bind) {
        auto select = SANDGATE_TRY(m_db.prepare("SELECT " + std::string(k_job_columns) +
                                                " FROM jobs WHERE " + std::string(tail)));
        bind(select);
        std::vector<Job> jobs;
        while (true) {
            auto row = SANDGATE_TRY(select.step());
            if (!row) return jobs;
            jobs.push_back(read_job(select));
        }
    }

    // query_jobs with up to two text parameters (?1, ?2), in id order.
    Expected<std::vector<Job>> select_jobs(const std::string& where, std::string_view first,
                                           std::string_view second) {
        return query_jobs(where + " ORDER BY id", [&](sqlite::Statement& select) {
            const int parameters = select.parameter_count();
            if (parameters >= 1) select.bind(1, first);
            if (parameters >= 2) select.bind(2, second);
        });
    }

    Expected<CancelOutcome> cancel_locked(const Job& job, std::string_view reason) {
        if (is_terminal(job.state)) return CancelOutcome::already_finished;
        if (job.state == JobState::running) {
            auto update = SANDGATE_TRY(m_db.prepare(
                "UPDATE jobs SET cancel_requested=1, reason=?1 WHERE id=?2 AND state='running'"));
            update.bind(1, reason).bind(2, job.id);
            SANDGATE_CHECK(update.run());
            return CancelOutcome::requested;
        }
        auto update = SANDGATE_TRY(m_db.prepare(
            "UPDATE jobs SET state='cancelled', reason=?1, finished=?2 WHERE id=?3 AND "
            "state='queued'"));
        update.bind(1, reason).bind(2, m_clock()).bind(3, job.id);
        SANDGATE_CHECK(update.run());
        // A re-queued job already has a check run in progress: conclude it too.
        if (job.claims > 0)
            SANDGATE_CHECK(
                insert_report(job.id, "conclude", conclude_body(JobState::cancelled, reason), ""));
        return CancelOutcome::cancelled;
    }

    Expected<std::vector<Recovered>> recover_where(const std::string& where, std::string_view owner,
                                                   OnLostLease policy, std::int64_t max_claims) {
        auto tx = SANDGATE_TRY(sqlite::Transaction::begin(m_db));
        auto jobs = SANDGATE_TRY(select_jobs(where, owner, ""));
        std::vector<Recovered> recovered;
        for (const auto& job : jobs) {
            auto outcome = SANDGATE_TRY(recover_one(job, policy, max_claims));
            recovered.push_back({job.id, outcome});
        }
        SANDGATE_CHECK(tx.commit());
        return recovered;
    }

    Expected<JobState> recover_one(const Job& job, OnLostLease policy, std::int64_t max_claims) {
        const bool rerun =
            policy == OnLostLease::requeue && !job.cancel_requested && job.claims < max_claims;
        if (rerun) {
            auto update = SANDGATE_TRY(m_db.prepare(
                "UPDATE jobs SET state='queued', lease_owner='', lease_expires=0, reason=?1 "
                "WHERE id=?2"));
            update.bind(1, "re-queued: the agent " + job.lease_owner + " lost its lease");
            update.bind(2, job.id);
            SANDGATE_CHECK(update.run());
            return JobState::queued;
        }
        const auto state = job.cancel_requested ? JobState::cancelled : JobState::failed;
        const std::string reason = job.cancel_requested
                                       ? job.reason
                                       : "the agent " + job.lease_owner +
                                             " died or lost its lease "
                                             "mid-job (after " +
                                             std::to_string(job.claims) + " attempt(s))";
        auto update = SANDGATE_TRY(m_db.prepare(
            "UPDATE jobs SET state=?1, reason=?2, finished=?3, lease_owner='', lease_expires=0 "
            "WHERE id=?4"));
        update.bind(1, to_string(state)).bind(2, reason).bind(3, m_clock()).bind(4, job.id);
        SANDGATE_CHECK(update.run());
        if (auto ok =
                insert_report(job.id, "conclude", conclude_body(state, reason), job.lease_owner);
            !ok)
            return std::unexpected(ok.error());
        return state;
    }

    Expected<void> insert_report(std::int64_t job_id, std::string_view kind, std::string_view body,
                                 std::string_view owner) {
        auto insert = SANDGATE_TRY(m_db.prepare(
            "INSERT INTO reports (job_id, kind, body, next_attempt, owner) VALUES (?,?,?,0,?)"));
        insert.bind(1, job_id).bind(2, kind).bind(3, body).bind(4, owner);
        return insert.run();
    }

    static std::unexpected<common::Error> lease_lost(std::int64_t id, std::string_view owner) {
        return fail(ErrorKind::permanent, "lease lost: job " + std::to_string(id) +
                                              " is no longer running under " + std::string(owner));
    }

    std::mutex m_mutex;  // one connection: calls from several threads are serialised
    std::shared_ptr<sqlite::Database> m_connection;  // shared with open_sqlite_store's stores
    sqlite::Database& m_db;
    std::filesystem::path m_path;
    Clock m_clock;
};

}  // namespace

Expected<std::shared_ptr<sqlite::Database>> open_sqlite_database(
    const std::filesystem::path& path, std::chrono::milliseconds busy_timeout) {
    std::error_code ec;
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) return fail(ErrorKind::permanent, path.parent_path().string() + ": " + ec.message());
    auto db = SANDGATE_TRY(sqlite::Database::open(path, busy_timeout));
    return std::make_shared<sqlite::Database>(std::move(db));
}

Expected<std::unique_ptr<JobQueue>> sqlite_queue_on(std::shared_ptr<sqlite::Database> db,
                                                    const std::filesystem::path& path,
                                                    Clock clock) {
    if (auto ok = migrate_job_store(*db); !ok) {
        auto err = ok.error();
        err.message = path.string() + ": " + err.message;
        return std::unexpected(err);
    }
    return std::unique_ptr<JobQueue>(
        std::make_unique<SqliteQueue>(std::move(db), path, std::move(clock)));
}

Expected<std::unique_ptr<JobQueue>> open_sqlite_queue(const std::filesystem::path& path,
                                                      SqliteOptions options) {
    auto db = SANDGATE_TRY(open_sqlite_database(path, options.busy_timeout));
    return sqlite_queue_on(std::move(db), path, std::move(options.clock));
}

}  // namespace agent
