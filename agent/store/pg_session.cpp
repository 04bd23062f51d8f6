#include "agent/store/pg_session.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace agent::pg {

using common::ErrorKind;
using common::Expected;

Session::Session(ConnectOptions options, std::string what, Prepare prepare)
    : m_options(std::move(options)), m_what(std::move(what)), m_prepare(std::move(prepare)) {}

Expected<Connection*> Session::connection() {
    if (m_connection && !m_connection->broken()) return &*m_connection;
    if (m_connection) reset("the connection broke");
    const auto now = Clock::now();
    if (now < m_next_attempt) {
        const auto wait =
            std::chrono::duration_cast<std::chrono::milliseconds>(m_next_attempt - now);
        return common::fail(ErrorKind::transient,
                            "postgresql " + m_what + ": unreachable (next attempt in " +
                                std::to_string(wait.count()) + " ms): " + m_last_error);
    }
    auto opened = Connection::open(m_options);
    if (opened && m_prepare)
        if (auto ok = m_prepare(*opened); !ok) opened = std::unexpected(ok.error());
    if (!opened) {
        m_last_error = opened.error().message;
        m_backoff =
            m_backoff.count() == 0 ? k_reconnect_first : std::min(m_backoff * 2, k_reconnect_cap);
        m_next_attempt = Clock::now() + m_backoff;
        if (!m_lost)
            spdlog::warn("postgresql {}: {}; reconnecting with backoff", m_what, m_last_error);
        m_lost = true;
        return std::unexpected(opened.error());
    }
    if (m_lost) spdlog::info("postgresql {}: connected again", m_what);
    m_lost = false;
    m_backoff = std::chrono::milliseconds(0);
    m_connection.emplace(std::move(*opened));
    return &*m_connection;
}

void Session::failed(const common::Error& error) {
    if (!m_connection) return;
    if (m_connection->broken()) reset(error.message);
}

void Session::reset(const std::string& why) {
    m_connection.reset();
    m_last_error = why;
    if (!m_lost)
        spdlog::warn("postgresql {}: connection lost: {}; reconnecting with backoff", m_what, why);
    m_lost = true;
    // The first reconnect is at once (a restarted server is often back), later ones back off.
    m_next_attempt = Clock::now();
}

}  // namespace agent::pg
