// The job queue's schema and its row mapping (see agent/store/job_store_schema.hpp).
#include "agent/store/job_store_schema.hpp"

#include <array>
#include <cstdint>
#include <string>

namespace agent {

using common::ErrorKind;
using common::Expected;
using common::fail;

namespace {

// Schema migrations, applied in order; PRAGMA user_version holds how many were applied.
constexpr std::array k_migrations = {
    R"sql(
CREATE TABLE jobs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  repository TEXT NOT NULL, sha TEXT NOT NULL, workflow_job TEXT NOT NULL,
  attempt INTEGER NOT NULL, ref TEXT NOT NULL, event TEXT NOT NULL, source TEXT NOT NULL,
  payload TEXT NOT NULL, state TEXT NOT NULL,
  lease_owner TEXT NOT NULL DEFAULT '', lease_expires INTEGER NOT NULL DEFAULT 0,
  claims INTEGER NOT NULL DEFAULT 0, cancel_requested INTEGER NOT NULL DEFAULT 0,
  reason TEXT NOT NULL DEFAULT '', created INTEGER NOT NULL,
  started INTEGER NOT NULL DEFAULT 0, finished INTEGER NOT NULL DEFAULT 0,
  result TEXT NOT NULL DEFAULT '{}', policy TEXT NOT NULL DEFAULT '',
  UNIQUE (repository, sha, workflow_job, attempt));
CREATE INDEX jobs_by_state ON jobs (state, id);
CREATE INDEX jobs_by_owner ON jobs (lease_owner, state);
CREATE TABLE job_events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  at INTEGER NOT NULL, kind TEXT NOT NULL, body TEXT NOT NULL);
CREATE INDEX job_events_by_job ON job_events (job_id, id);
CREATE TABLE reports (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  kind TEXT NOT NULL, body TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0, next_attempt INTEGER NOT NULL DEFAULT 0);
)sql",
    // The poller's memory between rounds (agent/daemon/poll_state.hpp).
    R"sql(
CREATE TABLE poll_pages (path TEXT PRIMARY KEY, etag TEXT NOT NULL, next TEXT);
CREATE TABLE poll_branches (repository TEXT NOT NULL, sha TEXT NOT NULL,
  PRIMARY KEY (repository, sha));
)sql",
    // Reports in flight (claim_reports) and whose they are (owed_reports).
    R"sql(
ALTER TABLE reports ADD COLUMN claimed_until INTEGER NOT NULL DEFAULT 0;
ALTER TABLE reports ADD COLUMN owner TEXT NOT NULL DEFAULT '';
CREATE INDEX reports_by_job ON reports (job_id, id);
)sql",
};

Expected<std::int64_t> scalar(sqlite::Database& db, std::string_view sql) {
    auto statement = SANDGATE_TRY(db.prepare(sql));
    (void)SANDGATE_TRY(statement.step());
    return statement.column_int(0);
}

}  // namespace

Job read_job(const sqlite::Statement& row) {
    Job job;
    job.id = row.column_int(0);
    job.spec.key = {row.column_text(1), row.column_text(2), row.column_text(3), row.column_int(4)};
    job.spec.ref = row.column_text(5);
    job.spec.event = row.column_text(6);
    job.spec.source = row.column_text(7);
    job.spec.payload_json = row.column_text(8);
    job.state = parse_job_state(row.column_text(9)).value_or(JobState::failed);
    job.lease_owner = row.column_text(10);
    job.lease_expires_ms = row.column_int(11);
    job.claims = row.column_int(12);
    job.cancel_requested = row.column_int(13) != 0;
    job.reason = row.column_text(14);
    job.created_ms = row.column_int(15);
    job.started_ms = row.column_int(16);
    job.finished_ms = row.column_int(17);
    job.result_json = row.column_text(18);
    job.policy_json = row.column_text(19);
    return job;
}

Expected<void> migrate_job_store(sqlite::Database& db) {
    auto tx = SANDGATE_TRY(sqlite::Transaction::begin(db));
    auto version = SANDGATE_TRY(scalar(db, "PRAGMA user_version"));
    if (version > static_cast<std::int64_t>(k_migrations.size()))
        return fail(ErrorKind::permanent, "job queue schema version " + std::to_string(version) +
                                              " is newer than this sandgate knows (" +
                                              std::to_string(k_migrations.size()) +
                                              "); upgrade sandgate");
    for (auto i = static_cast<std::size_t>(version); i < k_migrations.size(); ++i)
        if (auto ok = db.exec(k_migrations[i]); !ok) return ok;
    if (auto ok = db.exec("PRAGMA user_version = " + std::to_string(k_migrations.size())); !ok)
        return ok;
    return tx.commit();
}

}  // namespace agent
