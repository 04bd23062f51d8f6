#pragma once
// One PostgreSQL connection that comes back after the database went away: the queue's, the
// poll state's and the notification listener's (agent/store/job_store_pg.cpp, poll_state_pg.cpp).
//
// connection() hands out the live connection, connecting first when there is none. A call
// that failed on a broken connection passes its error to failed(): the connection is dropped
// and the next connect waits a backoff (k_reconnect_first, doubling to k_reconnect_cap);
// until then connection() fails transient at once, so a caller such as the daemon's loop is
// never blocked longer than one connect attempt (connect_timeout). After each connect the
// `prepare` callback runs (the schema's search_path, LISTEN); its failure counts as a failed
// connect. Loss and recovery are logged once each (warn, info).
//
// Not thread-safe: its owner serialises calls.

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "agent/store/pg.hpp"

namespace agent::pg {

inline constexpr std::chrono::milliseconds k_reconnect_first{500};
inline constexpr std::chrono::milliseconds k_reconnect_cap{30'000};

class Session {
public:
    using Prepare = std::function<common::Expected<void>(Connection&)>;
    // `what` names the connection in log lines ("queue", "queue notifications").
    Session(ConnectOptions options, std::string what, Prepare prepare);

    common::Expected<Connection*> connection();
    // After a call on connection() failed: drops a broken connection (see above).
    void failed(const common::Error& error);
    // Takes a connection made (and prepared) elsewhere, e.g. the one that migrated.
    void adopt(Connection connection) { m_connection.emplace(std::move(connection)); }
    // Drops the connection now (it is in an unknown state).
    void reset(const std::string& why);
    bool connected() const { return m_connection.has_value(); }

private:
    using Clock = std::chrono::steady_clock;
    ConnectOptions m_options;
    std::string m_what;
    Prepare m_prepare;
    std::optional<Connection> m_connection;
    Clock::time_point m_next_attempt{};
    std::chrono::milliseconds m_backoff{0};
    std::string m_last_error;
    bool m_lost = false;  // logged as lost, not yet back
};

}  // namespace agent::pg
