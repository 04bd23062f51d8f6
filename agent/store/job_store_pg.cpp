// The PostgreSQL JobQueue: one queue shared by a pool of agents. Each method is one
// transaction on one connection (serialised by a mutex), re-established after a loss by
// pg::Session. Claims take the oldest queued row FOR UPDATE SKIP LOCKED, so concurrent
// claimers never wait on each other nor get the same job; every other mutation is a
// conditional UPDATE keyed on (id, lease_owner, state). Submits, re-queues and cancel requests
// NOTIFY sandgate_jobs (delivered at commit) for idle agents (agent/store/job_store_pg_listen.cpp).
#include "agent/store/job_store_pg.hpp"

#include <algorithm>
#include <mutex>

#include "agent/store/job_store_pg_schema.hpp"
#include "agent/store/job_store_sql.hpp"
#include "agent/store/pg_session.hpp"

namespace agent {

using common::ErrorKind;
using common::Expected;
using common::fail;
using queue_sql::conclude_body;

namespace {

const std::string k_columns(k_pg_job_columns);

constexpr std::string_view k_report_columns =
    "r.id, r.job_id, r.kind, r.body::text, r.attempts, r.next_attempt, r.owner";

std::vector<Report> read_reports(const pg::Result& rows) {
    std::vector<Report> out;
    for (int i = 0; i < rows.rows(); ++i)
        out.push_back({rows.integer(i, 0), rows.integer(i, 1), rows.text(i, 2), rows.text(i, 3),
                       rows.integer(i, 4), rows.integer(i, 5), rows.text(i, 6)});
    std::sort(out.begin(), out.end(), [](const Report& a, const Report& b) { return a.id < b.id; });
    return out;
}

std::vector<Job> read_jobs(const pg::Result& rows) {
    std::vector<Job> jobs;
    for (int i = 0; i < rows.rows(); ++i) jobs.push_back(read_pg_job(rows, i));
    return jobs;
}

std::unexpected<common::Error> lease_lost(std::int64_t id, std::string_view owner) {
    return fail(ErrorKind::permanent, "lease lost: job " + std::to_string(id) +
                                          " is no longer running under " + std::string(owner));
}

class PostgresQueue final : public JobQueue {
public:
    PostgresQueue(const PostgresOptions& options, std::string where, pg::Connection first)
        : m_options(options),
          m_where(std::move(where)),
          m_session(connect_options(options), "queue", use_pg_schema) {
        m_session.adopt(std::move(first));  // migrated, search_path set
    }

    QueueBackend backend() const override { return QueueBackend::postgresql; }
    std::string describe() const override { return "postgresql " + m_where; }

    Expected<Submitted> submit(const JobSpec& spec) override {
        return transaction([&](pg::Connection& db) -> Expected<Submitted> {
            const auto& key = spec.key;
            auto inserted = SANDGATE_TRY(db.exec(
                "INSERT INTO jobs (repository, sha, workflow_job, attempt, ref, event, source, "
                "payload, state, created) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'queued', "
                "now_ms($9)) ON CONFLICT ON CONSTRAINT jobs_dedup DO NOTHING RETURNING id",
                {key.repository, key.sha, key.workflow_job, key.attempt, spec.ref, spec.event,
                 spec.source, spec.payload_json, now()}));
            const auto outcome =
                inserted.rows() > 0 ? SubmitOutcome::created : SubmitOutcome::duplicate;
            if (outcome == SubmitOutcome::created) (void)SANDGATE_TRY(notify(db, k_notify_queued));
            auto found =
                SANDGATE_TRY(db.exec("SELECT " + k_columns +
                                         " FROM jobs WHERE repository = $1 AND sha = $2 "
                                         "AND workflow_job = $3 AND attempt = $4",
                                     {key.repository, key.sha, key.workflow_job, key.attempt}));
            if (found.rows() == 0) return fail(ErrorKind::permanent, "submitted job vanished");
            return Submitted{read_pg_job(found, 0), outcome};
        });
    }

    Expected<std::optional<Job>> get(std::int64_t id) override {
        return statement([&](pg::Connection& db) -> Expected<std::optional<Job>> {
            auto rows =
                SANDGATE_TRY(db.exec("SELECT " + k_columns + " FROM jobs WHERE id = $1", {id}));
            if (rows.rows() == 0) return std::optional<Job>();
            return std::optional<Job>(read_pg_job(rows, 0));
        });
    }

    Expected<std::vector<Job>> list(const JobFilter& filter) override {
        return statement([&](pg::Connection& db) -> Expected<std::vector<Job>> {
            const std::optional<std::string> state =
                filter.state ? std::optional<std::string>(std::string(to_string(*filter.state)))
                             : std::nullopt;
            auto rows = SANDGATE_TRY(
                db.exec("SELECT " + k_columns +
                            " FROM jobs WHERE id > $1 AND ($2::text IS NULL "
                            "OR state = $2) AND ($3::text IS NULL OR repository = $3) AND "
                            "($4::text IS NULL OR sha = $4) ORDER BY id LIMIT $5",
                        {filter.after_id, state, filter.repository, filter.sha,
                         static_cast<std::int64_t>(filter.limit)}));
            return read_jobs(rows);
        });
    }

    Expected<std::int64_t> count(JobState state) override {
        return statement([&](pg::Connection& db) -> Expected<std::int64_t> {
            auto rows = SANDGATE_TRY(
                db.exec("SELECT count(*) FROM jobs WHERE state = $1", {to_string(state)}));
            return rows.integer(0, 0);
        });
    }

    Expected<std::optional<Job>> claim(std::string_view owner, std::chrono::milliseconds lease,
                                       std::size_t max_running) override {
        return statement([&](pg::Connection& db) -> Expected<std::optional<Job>> {
            // Only `owner` itself races its own count; SKIP LOCKED keeps other claimers apart.
            auto rows = SANDGATE_TRY(db.exec(
                "WITH next AS (SELECT id FROM jobs WHERE state = 'queued' AND (SELECT count(*) "
                "FROM jobs WHERE state = 'running' AND lease_owner = $1) < $2 ORDER BY id LIMIT 1 "
                "FOR UPDATE SKIP LOCKED) "
                "UPDATE jobs SET state = 'running', lease_owner = $1, lease_expires = now_ms($4) + "
                "$3, "
                "claims = claims + 1, started = CASE WHEN started = 0 THEN now_ms($4) ELSE started "
                "END "
                "FROM next WHERE jobs.id = next.id RETURNING " +
                    prefixed("jobs."),
                {owner, static_cast<std::int64_t>(max_running),
                 static_cast<std::int64_t>(lease.count()), now()}));
            if (rows.rows() == 0) return std::optional<Job>();
            return std::optional<Job>(read_pg_job(rows, 0));
        });
    }

    Expected<Heartbeat> heartbeat(std::int64_t id, std::string_view owner,
                                  std::chrono::milliseconds lease) override {
        return statement([&](pg::Connection& db) -> Expected<Heartbeat> {
            auto rows = SANDGATE_TRY(
                db.exec("UPDATE jobs SET lease_expires = now_ms($4) + $3 WHERE id = $1 AND "
                        "lease_owner = $2 AND state = 'running' RETURNING lease_expires, "
                        "cancel_requested",
                        {id, owner, static_cast<std::int64_t>(lease.count()), now()}));
            if (rows.rows() == 0) return lease_lost(id, owner);
            return Heartbeat{rows.integer(0, 0), rows.integer(0, 1) != 0};
        });
    }

    Expected<void> complete(std::int64_t id, std::string_view owner, JobState state,
                            std::string_view reason, std::string_view result_json) override {
        if (!is_terminal(state))
            return fail(ErrorKind::invalid_input,
                        "complete: state " + std::string(to_string(state)) + " is not terminal");
        return transaction([&](pg::Connection& db) -> Expected<void> {
            auto done = SANDGATE_TRY(db.exec(
                "UPDATE jobs SET state = $1, reason = $2, result = $3, finished = now_ms($4), "
                "lease_owner = '', lease_expires = 0 WHERE id = $5 AND lease_owner = $6 "
                "AND state = 'running'",
                {to_string(state), reason, result_json, now(), id, owner}));
            if (done.affected() == 0) return lease_lost(id, owner);
            return insert_report(db, id, "conclude", conclude_body(state, reason), owner);
        });
    }

    Expected<CancelOutcome> cancel(std::int64_t id, std::string_view reason) override {
        return transaction([&](pg::Connection& db) -> Expected<CancelOutcome> {
            auto rows =
                db.exec("SELECT " + k_columns + " FROM jobs WHERE id = $1 FOR UPDATE", {id});
            if (!rows) return std::unexpected(rows.error());
            if (rows->rows() == 0)
                return fail(ErrorKind::invalid_input, "no job " + std::to_string(id));
            return cancel_locked(db, read_pg_job(*rows, 0), reason);
        });
    }

    Expected<std::vector<std::int64_t>> cancel_matching(std::string_view repository,
                                                        std::string_view sha,
                                                        std::string_view reason) override {
        return transaction([&](pg::Connection& db) -> Expected<std::vector<std::int64_t>> {
            auto rows = SANDGATE_TRY(
                db.exec("SELECT " + k_columns +
                            " FROM jobs WHERE repository = $1 AND sha = $2 "
                            "AND state IN ('queued', 'running') ORDER BY id FOR UPDATE",
                        {repository, sha}));
            std::vector<std::int64_t> ids;
            for (const auto& job : read_jobs(rows)) {
                (void)SANDGATE_TRY(cancel_locked(db, job, reason));
                ids.push_back(job.id);
            }
            return ids;
        });
    }

    Expected<std::vector<Recovered>> recover_expired(OnLostLease policy,
                                                     std::int64_t max_claims) override {
        return recover_where("lease_expires < now_ms($1)", now(), policy, max_claims);
    }

    Expected<std::vector<Recovered>> recover_owner(std::string_view owner, OnLostLease policy,
                                                   std::int64_t max_claims) override {
        return recover_where("lease_owner = $1", owner, policy, max_claims);
    }

    Expected<void> record_policy(std::int64_t id, std::string_view policy_json) override {
        return statement([&](pg::Connection& db) -> Expected<void> {
            auto done = SANDGATE_TRY(
                db.exec("UPDATE jobs SET policy = $1 WHERE id = $2", {policy_json, id}));
            if (done.affected() == 0)
                return fail(ErrorKind::invalid_input, "no job " + std::to_string(id));
            return {};
        });
    }

    Expected<void> append_event(std::int64_t id, std::string_view kind,
                                std::string_view body_json) override {
        return statement([&](pg::Connection& db) -> Expected<void> {
            (void)SANDGATE_TRY(db.exec(
                "INSERT INTO job_events (job_id, at, kind, body) VALUES ($1, now_ms($2), $3, $4)",
                {id, now(), kind, body_json}));
            return {};
        });
    }

    Expected<std::vector<JobEvent>> events(std::int64_t id) override {
        return statement([&](pg::Connection& db) -> Expected<std::vector<JobEvent>> {
            auto rows = SANDGATE_TRY(
                db.exec("SELECT id, job_id, at, kind, body::text FROM job_events WHERE job_id = $1 "
                        "ORDER BY id",
                        {id}));
            std::vector<JobEvent> out;
            for (int i = 0; i < rows.rows(); ++i)
                out.push_back({rows.integer(i, 0), rows.integer(i, 1), rows.integer(i, 2),
                               rows.text(i, 3), rows.text(i, 4)});
            return out;
        });
    }

    Expected<std::int64_t> add_report(std::int64_t job_id, std::string_view kind,
                                      std::string_view body_json) override {
        return statement([&](pg::Connection& db) -> Expected<std::int64_t> {
            auto rows = SANDGATE_TRY(
                db.exec("INSERT INTO reports (job_id, kind, body, owner) SELECT $1, $2, $3, "
                        "COALESCE((SELECT lease_owner FROM jobs WHERE id = $1), '') RETURNING id",
                        {job_id, kind, body_json}));
            return rows.integer(0, 0);
        });
    }

    Expected<std::vector<Report>> due_reports(std::size_t limit) override {
        return statement([&](pg::Connection& db) -> Expected<std::vector<Report>> {
            auto rows =
                db.exec("SELECT " + std::string(k_report_columns) + " FROM reports r WHERE " +
                            queue_sql::due_report("now_ms($1)") + " ORDER BY r.id LIMIT $2",
                        {now(), static_cast<std::int64_t>(limit)});
            if (!rows) return std::unexpected(rows.error());
            return read_reports(*rows);
        });
    }

    Expected<std::vector<Report>> claim_reports(std::size_t limit,
                                                std::chrono::milliseconds lease) override {
        return transaction([&](pg::Connection& db) -> Expected<std::vector<Report>> {
            (void)SANDGATE_TRY(db.exec(
                "DELETE FROM reports r WHERE " + queue_sql::obsolete_start("r", "now_ms($1)"),
                {now()}));
            // A report another sender is claiming right now is locked: skipped, never waited on.
            auto rows = SANDGATE_TRY(
                db.exec("WITH due AS (SELECT r.id FROM reports r WHERE " +
                            queue_sql::due_report("now_ms($1)") +
                            " ORDER BY r.id LIMIT $2 FOR UPDATE SKIP LOCKED) "
                            "UPDATE reports r SET claimed_until = now_ms($1) + $3 FROM due "
                            "WHERE r.id = due.id RETURNING " +
                            std::string(k_report_columns),
                        {now(), static_cast<std::int64_t>(limit),
                         static_cast<std::int64_t>(lease.count())}));
            return read_reports(rows);
        });
    }

    Expected<void> report_delivered(std::int64_t report_id) override {
        return statement([&](pg::Connection& db) -> Expected<void> {
            (void)SANDGATE_TRY(db.exec("DELETE FROM reports WHERE id = $1", {report_id}));
            return {};
        });
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
        return statement([&](pg::Connection& db) -> Expected<std::int64_t> {
            const std::optional<std::string> who =
                owner ? std::optional<std::string>(std::string(*owner)) : std::nullopt;
            auto rows =
                db.exec("SELECT count(*) FROM reports WHERE $1::text IS NULL OR owner = $1", {who});
            if (!rows) return std::unexpected(rows.error());
            return rows->integer(0, 0);
        });
    }

    Expected<std::unique_ptr<QueueSubscription>> subscribe(
        std::function<void(QueueChange)> woken) override {
        return listen_pg_queue(connect_options(m_options), std::move(woken));
    }

private:
    // The test clock's now, or NULL: now_ms() then takes the database's.
    pg::Param now() const {
        if (m_options.clock) return pg::Param(m_options.clock());
        return pg::Param(std::nullopt);
    }

    // Delivered to the listeners when the transaction commits (nothing when it rolls back).
    static Expected<pg::Result> notify(pg::Connection& db, std::string_view what) {
        return db.exec("SELECT pg_notify($1, $2)", {k_jobs_channel, what});
    }

    static std::string prefixed(std::string_view table) {
        std::string out;
        std::string_view rest = k_pg_job_columns;
        while (!rest.empty()) {
            const auto comma = rest.find(", ");
            out += std::string(table) + std::string(rest.substr(0, comma));
            if (comma == std::string_view::npos) break;
            out += ", ";
            rest.remove_prefix(comma + 2);
        }
        return out;
    }

    // One statement (its own transaction) on the live connection.
    template <typename Body>
    auto statement(Body&& body) -> decltype(body(std::declval<pg::Connection&>())) {
        std::lock_guard lock(m_mutex);
        auto db = SANDGATE_TRY(m_session.connection());
        auto result = body(*db);
        if (!result) m_session.failed(result.error());
        return result;
    }

    // Several statements in one transaction: committed when `body` succeeds.
    template <typename Body>
    auto transaction(Body&& body) -> decltype(body(std::declval<pg::Connection&>())) {
        return statement([&](pg::Connection& db) -> decltype(body(db)) {
            auto tx = SANDGATE_TRY(pg::Transaction::begin(db));
            auto result = body(db);
            if (!result) return result;
            SANDGATE_CHECK(tx.commit());
            return result;
        });
    }

    Expected<void> reschedule(std::int64_t report_id, std::chrono::milliseconds delay,
                              int attempt) {
        return statement([&](pg::Connection& db) -> Expected<void> {
            (void)SANDGATE_TRY(db.exec(
                "UPDATE reports SET attempts = attempts + $1, next_attempt = now_ms($2) + $3, "
                "claimed_until = 0 WHERE id = $4",
                {attempt, now(), static_cast<std::int64_t>(delay.count()), report_id}));
            return {};
        });
    }

    Expected<void> insert_report(pg::Connection& db, std::int64_t job_id, std::string_view kind,
                                 std::string_view body, std::string_view owner) {
        (void)SANDGATE_TRY(
            db.exec("INSERT INTO reports (job_id, kind, body, owner) VALUES ($1, $2, $3, $4)",
                    {job_id, kind, body, owner}));
        return {};
    }

    Expected<CancelOutcome> cancel_locked(pg::Connection& db, const Job& job,
                                          std::string_view reason) {
        if (is_terminal(job.state)) return CancelOutcome::already_finished;
        if (job.state == JobState::running) {
            (void)SANDGATE_TRY(
                db.exec("UPDATE jobs SET cancel_requested = true, reason = $1 WHERE id = $2 AND "
                        "state = 'running'",
                        {reason, job.id}));
            (void)SANDGATE_TRY(notify(db, k_notify_cancel));
            return CancelOutcome::requested;
        }
        (void)SANDGATE_TRY(
            db.exec("UPDATE jobs SET state = 'cancelled', reason = $1, finished = now_ms($2) WHERE "
                    "id = $3 AND state = 'queued'",
                    {reason, now(), job.id}));
        // A re-queued job already has a check run in progress: conclude it too.
        if (job.claims > 0)
            SANDGATE_CHECK(insert_report(db, job.id, "conclude",
                                         conclude_body(JobState::cancelled, reason), ""));
        return CancelOutcome::cancelled;
    }

    // The running jobs matching `where` (its one parameter $1 = `parameter`).
    Expected<std::vector<Recovered>> recover_where(const std::string& where,
                                                   const pg::Param& parameter, OnLostLease policy,
                                                   std::int64_t max_claims) {
        return transaction([&](pg::Connection& db) -> Expected<std::vector<Recovered>> {
            // SKIP LOCKED: a job another agent is recovering (or heartbeating) right now is
            // left to it.
            auto rows = SANDGATE_TRY(db.exec("SELECT " + k_columns +
                                                 " FROM jobs WHERE state = 'running' AND " + where +
                                                 " ORDER BY id FOR UPDATE SKIP LOCKED",
                                             {parameter}));
            std::vector<Recovered> recovered;
            for (const auto& job : read_jobs(rows)) {
                auto state = SANDGATE_TRY(recover_one(db, job, policy, max_claims));
                recovered.push_back({job.id, state});
            }
            return recovered;
        });
    }

    Expected<JobState> recover_one(pg::Connection& db, const Job& job, OnLostLease policy,
                                   std::int64_t max_claims) {
        const bool rerun =
            policy == OnLostLease::requeue && !job.cancel_requested && job.claims < max_claims;
        if (rerun) {
            (void)SANDGATE_TRY(db.exec(
                "UPDATE jobs SET state = 'queued', lease_owner = '', lease_expires = 0, reason = "
                "$1 "
                "WHERE id = $2",
                {"re-queued: the agent " + job.lease_owner + " lost its lease", job.id}));
            (void)SANDGATE_TRY(notify(db, k_notify_queued));
            return JobState::queued;
        }
        const auto state = job.cancel_requested ? JobState::cancelled : JobState::failed;
        const std::string reason = job.cancel_requested
                                       ? job.reason
                                       : "the agent " + job.lease_owner +
                                             " died or lost its lease mid-job (after " +
                                             std::to_string(job.claims) + " attempt(s))";
        (void)SANDGATE_TRY(db.exec(
            "UPDATE jobs SET state = $1, reason = $2, finished = now_ms($3), lease_owner = '', "
            "lease_expires = 0 WHERE id = $4",
            {to_string(state), reason, now(), job.id}));
        SANDGATE_CHECK(
            insert_report(db, job.id, "conclude", conclude_body(state, reason), job.lease_owner));
        return state;
    }

    PostgresOptions m_options;
    std::string m_where;
    std::mutex m_mutex;  // one connection: calls from several threads are serialised
    pg::Session m_session;
};

}  // namespace

pg::ConnectOptions connect_options(const PostgresOptions& options) {
    pg::ConnectOptions out;
    out.url = options.url;
    out.password = options.password;
    out.connect_timeout = options.connect_timeout;
    out.application_name = options.application_name;
    return out;
}

Expected<std::string> describe_postgres_url(std::string_view url) {
    auto parts = SANDGATE_TRY(pg::parse_url(url));
    return pg::describe(parts);
}

Expected<std::unique_ptr<JobQueue>> open_postgres_queue(const PostgresOptions& options) {
    auto where = SANDGATE_TRY(describe_postgres_url(options.url));
    auto db = SANDGATE_TRY(pg::Connection::open(connect_options(options)));
    if (auto ok = migrate_pg_job_store(db); !ok) {
        auto err = ok.error();
        err.message = where + ": " + err.message;
        return std::unexpected(err);
    }
    return std::unique_ptr<JobQueue>(
        std::make_unique<PostgresQueue>(options, std::move(where), std::move(db)));
}

}  // namespace agent
