#pragma once
// Internal to the PostgreSQL job queue (agent/store/job_store_pg.cpp,
// agent/daemon/poll_state_pg.cpp): the schema `sandgate` and its versioned migrations, and the
// mapping of a `jobs` row to a Job.
//
// Migrations are numbered; table sandgate.migrations holds the versions applied. They are
// applied in one transaction that first takes a transaction-scoped advisory lock
// (k_migration_lock), so agents of a pool starting at once apply each migration exactly once
// and none reads a half-migrated schema. A database whose schema is newer than this build is
// refused (permanent), as the SQLite queue refuses a newer file.

#include <cstdint>
#include <string_view>

#include "agent/store/job_store.hpp"
#include "agent/store/pg.hpp"
#include "common/error.hpp"

namespace agent {

// Advisory lock keys (the two-int form, pg_advisory_lock(class, key)) of the sandgate schema.
inline constexpr int k_migration_lock_class = 0x5347;  // with key 1
inline constexpr int k_poll_lock_class = 0x5348;       // with hashtext(repository)

// Every column of sandgate.jobs in the order read_job() reads them.
inline constexpr std::string_view k_pg_job_columns =
    "id, repository, sha, workflow_job, attempt, ref, event, source, payload::text, state, "
    "lease_owner, lease_expires, claims, cancel_requested, reason, created, started, "
    "finished, result::text, policy";

// Row `row` of a result that selected k_pg_job_columns, as a Job.
Job read_pg_job(const pg::Result& result, int row);

// Brings the database to the newest schema (see above); sets the connection's search_path
// to the schema.
common::Expected<void> migrate_pg_job_store(pg::Connection& db);

// Selects the schema on a connection that did not migrate (search_path).
common::Expected<void> use_pg_schema(pg::Connection& db);

// The newest schema version this build knows.
std::int64_t pg_schema_version();

// The store's clock in SQL: now_ms($n) (a function of the schema) is $n when a test clock
// gave it, else the database's now() in milliseconds, so agents on machines with skewed
// clocks agree on lease expiry.

}  // namespace agent
