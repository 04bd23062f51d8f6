#pragma once
// The agent's job queue: jobs, their states and leases, the journal of value-free evidence,
// and the reports still owed to GitHub. One interface (JobQueue), two backends: SQLite (one
// agent, the embedded default: open_sqlite_queue) and PostgreSQL (a pool of agents sharing one
// queue: open_postgres_queue, agent/store/job_store_pg.cpp).
//
// Contract, for every backend:
// - Each method is one transaction: it happens whole or not at all, and returns an error
//   value (ErrorKind::transient for lock contention that outlasted the busy timeout, or a
//   database that cannot be reached) rather than leaving a half-written job.
// - Jobs are deduplicated on JobKey (repository, SHA, workflow job, attempt): submitting a
//   key that exists returns the existing job with SubmitOutcome::duplicate (a unique
//   constraint: two agents submitting the same key at once queue one job).
// - claim() hands a queued job to one owner (an agent id) under a lease until an expiry; at
//   most `max_running` jobs hold a lease of the same owner at once. The owner keeps the lease
//   by heartbeat(); a lease that expired, or all of an owner's leases when that owner restarts
//   after a crash, are recovered by recover_*(): the job is re-queued (while it has attempts
//   left, when configured) or concluded `failed`, and in the same transaction a report is
//   queued so that its check run never stays in_progress.
// - Only the lease holder can complete a running job; a lost lease is reported as an error.
// - Reports go out per job in the order they were queued: only the oldest report of a job is
//   ever due, so a conclusion never overtakes its start, and a start that a conclusion of the
//   same job follows is obsolete (never sent: the conclusion alone creates the completed
//   run). claim_reports() leases the due ones to one sender, so agents of a pool never send
//   the same report twice; a sender that dies leaves them due again when the lease ends.
//   A report's owner is the agent that held the job's lease when it was queued (a draining
//   agent waits for its own, owed_reports()).
// - Nothing in the store is a secret: callers put env NAMES, never values, and never stdin
//   text in evidence, policies or payloads.
//
// Times are milliseconds since the epoch taken from the store's clock: SQLite's injected
// Clock; PostgreSQL's the database's now() (agents on machines with skewed clocks agree on
// lease expiry) unless a test injects one. On PostgreSQL, claim() is a single UPDATE of the
// oldest queued job selected FOR UPDATE SKIP LOCKED, and every other mutation a conditional
// UPDATE keyed on (id, lease_owner, state); SQLite gets the same effect from BEGIN IMMEDIATE.
// recover_expired() may run on any agent of the pool; recover_owner() on the restarted one.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"

namespace agent {

namespace sqlite {
class Database;  // agent/store/sqlite.hpp
}  // namespace sqlite

enum class JobState { queued, running, succeeded, failed, cancelled, timed_out, skipped };
inline constexpr int k_job_state_count = 7;

std::string_view to_string(JobState state);
std::optional<JobState> parse_job_state(std::string_view text);
bool is_terminal(JobState state);

struct JobKey {
    std::string repository;    // "owner/name" or a URL/path for local gates
    std::string sha;           // 40 hex digits
    std::string workflow_job;  // "workflow-file/job-id"; empty: every job of the event
    std::int64_t attempt = 1;
    bool operator==(const JobKey&) const = default;
};

struct JobSpec {
    JobKey key;
    std::string ref;     // "refs/heads/gh-readonly-queue/main/pr-1-..." etc.; may be empty
    std::string event;   // merge_group | pull_request | push | api
    std::string source;  // webhook | poll | api
    std::string payload_json = "{}";  // a JSON object of source details (urls, PR number, ...)
};

struct Job {
    std::int64_t id = 0;
    JobSpec spec;
    JobState state = JobState::queued;
    std::string lease_owner;  // empty unless running
    std::int64_t lease_expires_ms = 0;
    std::int64_t claims = 0;  // times a lease was handed out (runs started)
    bool cancel_requested = false;
    std::string reason;  // why it ended (one line), or why it was re-queued
    std::int64_t created_ms = 0;
    std::int64_t started_ms = 0;     // 0 until first claimed
    std::int64_t finished_ms = 0;    // 0 until terminal
    std::string result_json = "{}";  // the outcome's summary, a JSON object
    std::string policy_json;         // the resolved sandbox policy; empty until recorded
};

enum class SubmitOutcome { created, duplicate };
struct Submitted {
    Job job;
    SubmitOutcome outcome = SubmitOutcome::created;
};

enum class CancelOutcome { cancelled, requested, already_finished };

struct Heartbeat {
    std::int64_t lease_expires_ms = 0;
    bool cancel_requested = false;
};

// What happens to a running job whose agent died.
enum class OnLostLease { conclude, requeue };

struct Recovered {
    std::int64_t job_id = 0;
    JobState state = JobState::queued;  // queued (re-run) or failed (concluded)
};

struct JobFilter {
    std::optional<JobState> state;
    std::optional<std::string> repository;
    std::optional<std::string> sha;
    std::size_t limit = 100;
    std::int64_t after_id = 0;  // paging: ids greater than this
};

struct JobEvent {
    std::int64_t id = 0;
    std::int64_t job_id = 0;
    std::int64_t at_ms = 0;
    std::string kind;       // "policy", "exec", "state", ...
    std::string body_json;  // value-free evidence, a JSON object
};

struct Report {
    std::int64_t id = 0;
    std::int64_t job_id = 0;
    std::string kind;  // "conclude", "start", ...
    std::string body_json;
    std::int64_t attempts = 0;
    std::int64_t next_attempt_ms = 0;
    std::string owner;  // the agent whose job it is (see the contract above); may be empty
};

// Held while a backend's change notifications are watched (JobQueue::subscribe); stops
// watching when destroyed.
class QueueSubscription {
public:
    virtual ~QueueSubscription() = default;
};

enum class QueueBackend { sqlite, postgresql };

// What a notification says changed (JobQueue::subscribe): a job to claim (queued or re-queued),
// a cancel for a running job's holder to see, or anything (after a lost connection came back).
enum class QueueChange { queued, cancel_requested, unknown };

class JobQueue {
public:
    virtual ~JobQueue() = default;

    virtual common::Expected<Submitted> submit(const JobSpec& spec) = 0;
    virtual common::Expected<std::optional<Job>> get(std::int64_t id) = 0;
    virtual common::Expected<std::vector<Job>> list(const JobFilter& filter) = 0;
    virtual common::Expected<std::int64_t> count(JobState state) = 0;

    // The oldest queued job, now leased to `owner` until now+lease; nullopt when none is
    // queued or `owner` already holds max_running leases.
    virtual common::Expected<std::optional<Job>> claim(std::string_view owner,
                                                       std::chrono::milliseconds lease,
                                                       std::size_t max_running) = 0;
    // Extends the lease; fails (permanent, "lease lost") when `owner` no longer holds it.
    virtual common::Expected<Heartbeat> heartbeat(std::int64_t id, std::string_view owner,
                                                  std::chrono::milliseconds lease) = 0;
    // Concludes a running job held by `owner` with a terminal state; fails when the lease is
    // lost or the state is not terminal.
    virtual common::Expected<void> complete(std::int64_t id, std::string_view owner, JobState state,
                                            std::string_view reason,
                                            std::string_view result_json) = 0;
    // Queued: cancelled now. Running: cancel requested (the holder sees it on heartbeat and
    // completes it `cancelled`). Terminal: nothing changes.
    virtual common::Expected<CancelOutcome> cancel(std::int64_t id, std::string_view reason) = 0;
    // Cancels every unfinished job of (repository, sha); returns the ids touched.
    virtual common::Expected<std::vector<std::int64_t>> cancel_matching(
        std::string_view repository, std::string_view sha, std::string_view reason) = 0;

    // Leases whose expiry passed (any owner), and every lease of `owner` (its previous life).
    virtual common::Expected<std::vector<Recovered>> recover_expired(OnLostLease policy,
                                                                     std::int64_t max_claims) = 0;
    virtual common::Expected<std::vector<Recovered>> recover_owner(std::string_view owner,
                                                                   OnLostLease policy,
                                                                   std::int64_t max_claims) = 0;

    // The resolved sandbox policy of a job, written before its sandbox exists.
    virtual common::Expected<void> record_policy(std::int64_t id, std::string_view policy_json) = 0;
    virtual common::Expected<void> append_event(std::int64_t id, std::string_view kind,
                                                std::string_view body_json) = 0;
    virtual common::Expected<std::vector<JobEvent>> events(std::int64_t id) = 0;

    // Reports owed to GitHub, sent by the reporter and removed once delivered.
    virtual common::Expected<std::int64_t> add_report(std::int64_t job_id, std::string_view kind,
                                                      std::string_view body_json) = 0;
    // The reports due now, oldest first, by the order rule above (obsolete starts and
    // reports another sender holds are left out); changes nothing.
    virtual common::Expected<std::vector<Report>> due_reports(std::size_t limit) = 0;
    // The same reports, leased to the caller for `lease` (obsolete starts are removed): no
    // other claim_reports() hands them out until report_delivered/failed/deferred or the end
    // of the lease.
    virtual common::Expected<std::vector<Report>> claim_reports(
        std::size_t limit, std::chrono::milliseconds lease) = 0;
    virtual common::Expected<void> report_delivered(std::int64_t report_id) = 0;
    // Not sent: one attempt more, due again after `retry_after`.
    virtual common::Expected<void> report_failed(std::int64_t report_id,
                                                 std::chrono::milliseconds retry_after) = 0;
    // Not tried (GitHub asked us to wait, e.g. a rate limit): due again after `delay`, no
    // attempt counted.
    virtual common::Expected<void> report_deferred(std::int64_t report_id,
                                                   std::chrono::milliseconds delay) = 0;
    // Reports still queued (due or not, in flight or not) whose owner is `owner`; every
    // report when nullopt.
    virtual common::Expected<std::int64_t> owed_reports(std::optional<std::string_view> owner) = 0;

    // Calls `woken` (from another thread) whenever a connection queued, re-queued or asked to
    // cancel a job, and with QueueChange::unknown after a lost connection to the notifications
    // came back (one may have been missed). nullptr when the backend has no notifications
    // (SQLite: one agent, which polls its own file); the caller then polls.
    virtual common::Expected<std::unique_ptr<QueueSubscription>> subscribe(
        std::function<void(QueueChange)> woken) {
        (void)woken;
        return nullptr;
    }

    virtual QueueBackend backend() const = 0;
    // Where the queue lives, for log lines: the SQLite file, or user@host:port/db (never a
    // password).
    virtual std::string describe() const = 0;
};

// Milliseconds since the epoch; injectable so tests can move time without sleeping.
using Clock = std::function<std::int64_t()>;
std::int64_t system_now_ms();

struct SqliteOptions {
    std::chrono::milliseconds busy_timeout{10000};
    Clock clock = system_now_ms;
};

// The default path of the database under a state directory.
std::filesystem::path default_queue_path(const std::filesystem::path& state_dir);

// Opens (creating or migrating) the SQLite queue at `path`. One connection per object, safe
// to share between threads (calls are serialised); several objects and processes may open
// the same file at once. Fails when the schema is newer than this build knows.
common::Expected<std::unique_ptr<JobQueue>> open_sqlite_queue(const std::filesystem::path& path,
                                                              SqliteOptions options = {});

// For stores that share one connection to the queue's file (open_sqlite_store in
// agent/daemon/poll_state.hpp). open_sqlite_database opens it (creating the file and its directory)
// without migrating; sqlite_queue_on migrates the schema on it and keeps a share of it
// (`path` names the file in messages). The connection closes with its last sharer. Its sharers
// must not be used from two threads at once (the queue's own lock covers the queue only).
common::Expected<std::shared_ptr<sqlite::Database>> open_sqlite_database(
    const std::filesystem::path& path, std::chrono::milliseconds busy_timeout);
common::Expected<std::unique_ptr<JobQueue>> sqlite_queue_on(std::shared_ptr<sqlite::Database> db,
                                                            const std::filesystem::path& path,
                                                            Clock clock = system_now_ms);

// The PostgreSQL queue (a pool's).
struct PostgresOptions {
    std::string url;                      // postgresql://[user@]host[:port]/db[?...], no password
    std::optional<std::string> password;  // read from queue.password_file; else PGPASSFILE
    std::chrono::seconds connect_timeout{10};
    std::string application_name = "sandgate";  // seen in pg_stat_activity
    Clock clock;                                // unset: the database's clock
};

// Connects, applies the schema migrations (agent/store/job_store_pg_schema.hpp) and returns the
// queue. One connection, calls from several threads serialised. A connection lost later is
// re-established by the next call after a backoff (0.5 s doubling to 30 s; calls in between
// fail transient at once, without blocking), so a database that goes away makes calls fail
// (transient) until it is back, and nothing is half-written. Fails transient when the
// database cannot be reached now, permanent when its schema is newer than this build knows,
// unavailable without libpq.
common::Expected<std::unique_ptr<JobQueue>> open_postgres_queue(const PostgresOptions& options);

}  // namespace agent
