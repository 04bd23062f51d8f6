// The poller's memory in a pool's PostgreSQL database, shared by every agent of the pool, and
// whose turn it is to poll a repository (PollState::take_turn).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "agent/daemon/poll_state.hpp"
#include "agent/store/job_store_pg.hpp"
#include "agent/store/job_store_pg_schema.hpp"
#include "agent/store/pg_session.hpp"

namespace agent {

using common::Expected;

namespace {

// A poll round that starts a little early (timers, process start-up) still finds the
// repository due: an interval counts as passed this much before its end.
std::chrono::milliseconds slack(std::chrono::milliseconds interval) {
    return std::min<std::chrono::milliseconds>(interval / 10, std::chrono::seconds(2));
}

class PostgresPollState final : public PollState {
public:
    explicit PostgresPollState(const PostgresOptions& options)
        : m_clock(options.clock),
          m_session(connect_options(options), "poll state", use_pg_schema) {}

    Expected<std::unique_ptr<PollTurn>> take_turn(std::string_view repository,
                                                  std::chrono::milliseconds interval) override {
        // The session's lock: held until the turn ends (or the connection does).
        auto locked = SANDGATE_TRY(run([&](pg::Connection& db) {
            return db.exec("SELECT pg_try_advisory_lock($1, hashtext($2))",
                           {k_poll_lock_class, repository});
        }));
        if (locked.integer(0, 0) == 0)
            return std::unique_ptr<PollTurn>();  // another agent polls it
        auto turn = std::make_unique<Turn>(*this, std::string(repository));
        auto due = SANDGATE_TRY(run([&](pg::Connection& db) {
            return db.exec(
                "INSERT INTO poll_schedule (repository, polled_at) VALUES ($1, now_ms($2)) "
                "ON CONFLICT (repository) DO UPDATE SET polled_at = EXCLUDED.polled_at "
                "WHERE poll_schedule.polled_at <= EXCLUDED.polled_at - $3 RETURNING polled_at",
                {repository, now(),
                 static_cast<std::int64_t>((interval - slack(interval)).count())});
        }));
        if (due.rows() == 0) return std::unique_ptr<PollTurn>();  // polled within the interval
        return std::unique_ptr<PollTurn>(std::move(turn));
    }

    Expected<std::optional<PolledPage>> page(std::string_view path) override {
        auto rows = SANDGATE_TRY(run([&](pg::Connection& db) {
            return db.exec("SELECT etag, next FROM poll_pages WHERE path = $1", {path});
        }));
        if (rows.rows() == 0) return std::optional<PolledPage>();
        PolledPage page{rows.text(0, 0), std::nullopt};
        if (!rows.is_null(0, 1)) page.next = rows.text(0, 1);
        return std::optional<PolledPage>(std::move(page));
    }

    Expected<void> set_page(std::string_view path, const PolledPage& page) override {
        (void)SANDGATE_TRY(run([&](pg::Connection& db) {
            return db.exec(
                "INSERT INTO poll_pages (path, etag, next) VALUES ($1, $2, $3) "
                "ON CONFLICT (path) DO UPDATE SET etag = $2, next = $3",
                {path, page.etag, page.next});
        }));
        return {};
    }

    Expected<std::set<std::string>> branches(std::string_view repository) override {
        auto rows = SANDGATE_TRY(run([&](pg::Connection& db) {
            return db.exec("SELECT sha FROM poll_branches WHERE repository = $1", {repository});
        }));
        std::set<std::string> heads;
        for (int i = 0; i < rows.rows(); ++i) heads.insert(rows.text(i, 0));
        return heads;
    }

    Expected<void> set_branches(std::string_view repository,
                                const std::set<std::string>& heads) override {
        (void)SANDGATE_TRY(run([&](pg::Connection& db) -> Expected<pg::Result> {
            auto tx = SANDGATE_TRY(pg::Transaction::begin(db));
            auto cleared = db.exec("DELETE FROM poll_branches WHERE repository = $1", {repository});
            if (!cleared) return cleared;
            for (const auto& sha : heads)
                if (auto ok = db.exec("INSERT INTO poll_branches (repository, sha) VALUES ($1, $2)",
                                      {repository, sha});
                    !ok)
                    return ok;
            SANDGATE_CHECK(tx.commit());
            return cleared;
        }));
        return {};
    }

private:
    class Turn final : public PollTurn {
    public:
        Turn(PostgresPollState& state, std::string repository)
            : m_state(state), m_repository(std::move(repository)) {}
        ~Turn() override {
            // A connection lost meanwhile took the lock with it.
            auto done = m_state.run([&](pg::Connection& db) {
                return db.exec("SELECT pg_advisory_unlock($1, hashtext($2))",
                               {k_poll_lock_class, m_repository});
            });
            if (!done) spdlog::debug("poll {}: unlock: {}", m_repository, done.error().message);
        }

    private:
        PostgresPollState& m_state;
        std::string m_repository;
    };

    pg::Param now() const {
        if (m_clock) return pg::Param(m_clock());
        return pg::Param(std::nullopt);
    }

    template <typename Body>
    Expected<pg::Result> run(Body&& body) {
        auto db = SANDGATE_TRY(m_session.connection());
        auto result = body(*db);
        if (!result) m_session.failed(result.error());
        return result;
    }

    Clock m_clock;
    pg::Session m_session;
};

}  // namespace

Expected<QueueStore> open_postgres_store(const PostgresOptions& options) {
    auto queue = open_postgres_queue(options);  // migrates
    if (!queue) return std::unexpected(queue.error());
    return QueueStore{std::move(*queue), std::make_unique<PostgresPollState>(options)};
}

}  // namespace agent
