#pragma once
// Internal to the SQLite job queue (agent/store/job_store.cpp): the database's schema, its
// migrations, and the mapping of a `jobs` row to a Job. The table layout and the column list
// read below live together so that a migration adding a column changes one file.
// Not an interface for other modules: the poll state (agent/daemon/poll_state.cpp) uses its tables
// only through the connection that sqlite_queue_on() migrated.

#include <string_view>

#include "agent/store/job_store.hpp"
#include "agent/store/sqlite.hpp"
#include "common/error.hpp"

namespace agent {

// Every column of `jobs`, in the order read_job() reads them; select them with
// "SELECT " + k_job_columns + " FROM jobs ...".
inline constexpr std::string_view k_job_columns =
    "id, repository, sha, workflow_job, attempt, ref, event, source, payload, state, "
    "lease_owner, lease_expires, claims, cancel_requested, reason, created, started, "
    "finished, result, policy";

// The current row of a statement that selected k_job_columns, as a Job. An unknown state
// text reads as JobState::failed.
Job read_job(const sqlite::Statement& row);

// Brings `db` to the newest schema in one transaction (PRAGMA user_version counts the
// migrations applied): applies the missing ones and nothing else, or rolls all back on error.
// Fails (permanent) when the file's schema is newer than this build knows.
common::Expected<void> migrate_job_store(sqlite::Database& db);

}  // namespace agent
