#pragma once
// Internal to the PostgreSQL backend (agent/job_store_pg*.cpp, agent/daemon/poll_state_pg.cpp):
// what its files share. The public interface is open_postgres_queue (agent/store/job_store.hpp) and
// open_postgres_store (agent/daemon/poll_state.hpp).

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "agent/store/job_store.hpp"
#include "agent/store/pg.hpp"

namespace agent {

// The channel every change of the queue that an idle agent should see is notified on.
inline constexpr std::string_view k_jobs_channel = "sandgate_jobs";

pg::ConnectOptions connect_options(const PostgresOptions& options);

// user@host:port/db of a connection URL (invalid_input when libpq cannot parse it).
common::Expected<std::string> describe_postgres_url(std::string_view url);

// The payloads of its notifications: pg_notify(k_jobs_channel, k_notify_queued) and so on.
inline constexpr std::string_view k_notify_queued = "queued";
inline constexpr std::string_view k_notify_cancel = "cancel";

// LISTEN sandgate_jobs on a connection of its own, watched by a thread that calls `woken` for
// each notification (with what it says) and once after every (re)connect (QueueChange::
// unknown); reconnects with pg::Session's backoff.
// Stops (and joins) when the returned subscription is destroyed.
common::Expected<std::unique_ptr<QueueSubscription>> listen_pg_queue(
    pg::ConnectOptions options, std::function<void(QueueChange)> woken);

}  // namespace agent
