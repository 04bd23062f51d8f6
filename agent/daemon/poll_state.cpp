// The poller's memory: in a map, or in two tables of the queue's SQLite file (created by the
// queue's second migration, agent/store/job_store.cpp).
#include "agent/daemon/poll_state.hpp"

#include "agent/store/sqlite.hpp"

namespace agent {

using common::Expected;

Expected<std::optional<PolledPage>> MemoryPollState::page(std::string_view path) {
    const auto it = m_pages.find(path);
    if (it == m_pages.end()) return std::optional<PolledPage>();
    return std::optional<PolledPage>(it->second);
}

Expected<void> MemoryPollState::set_page(std::string_view path, const PolledPage& page) {
    m_pages.insert_or_assign(std::string(path), page);
    return {};
}

Expected<std::set<std::string>> MemoryPollState::branches(std::string_view repository) {
    const auto it = m_branches.find(repository);
    return it == m_branches.end() ? std::set<std::string>() : it->second;
}

Expected<void> MemoryPollState::set_branches(std::string_view repository,
                                             const std::set<std::string>& heads) {
    m_branches.insert_or_assign(std::string(repository), heads);
    return {};
}

namespace {

class SqlitePollState final : public PollState {
public:
    explicit SqlitePollState(std::shared_ptr<sqlite::Database> db)
        : m_connection(std::move(db)), m_db(*m_connection) {}

    Expected<std::optional<PolledPage>> page(std::string_view path) override {
        auto select =
            SANDGATE_TRY(m_db.prepare("SELECT etag, next FROM poll_pages WHERE path = ?"));
        select.bind(1, path);
        auto row = SANDGATE_TRY(select.step());
        if (!row) return std::optional<PolledPage>();
        PolledPage page{select.column_text(0), std::nullopt};
        if (!select.column_is_null(1)) page.next = select.column_text(1);
        return std::optional<PolledPage>(std::move(page));
    }

    Expected<void> set_page(std::string_view path, const PolledPage& page) override {
        auto upsert = SANDGATE_TRY(
            m_db.prepare("INSERT INTO poll_pages (path, etag, next) VALUES (?1, ?2, ?3) "
                         "ON CONFLICT (path) DO UPDATE SET etag = ?2, next = ?3"));
        upsert.bind(1, path).bind(2, page.etag).bind_optional(3, page.next);
        return upsert.run();
    }

    Expected<std::set<std::string>> branches(std::string_view repository) override {
        auto select =
            SANDGATE_TRY(m_db.prepare("SELECT sha FROM poll_branches WHERE repository = ?"));
        select.bind(1, repository);
        std::set<std::string> heads;
        while (true) {
            auto row = SANDGATE_TRY(select.step());
            if (!row) return heads;
            heads.insert(select.column_text(0));
        }
    }

    Expected<void> set_branches(std::string_view repository,
                                const std::set<std::string>& heads) override {
        auto tx = SANDGATE_TRY(sqlite::Transaction::begin(m_db));
        auto clear = SANDGATE_TRY(m_db.prepare("DELETE FROM poll_branches WHERE repository = ?"));
        clear.bind(1, repository);
        if (auto ok = clear.run(); !ok) return ok;
        auto insert =
            SANDGATE_TRY(m_db.prepare("INSERT INTO poll_branches (repository, sha) VALUES (?, ?)"));
        for (const auto& sha : heads) {
            insert.reset();
            insert.bind(1, repository).bind(2, sha);
            if (auto ok = insert.run(); !ok) return ok;
        }
        return tx.commit();
    }

private:
    std::shared_ptr<sqlite::Database> m_connection;  // shared with the queue (open_sqlite_store)
    sqlite::Database& m_db;
};

}  // namespace

Expected<SqliteStore> open_sqlite_store(const std::filesystem::path& path, SqliteOptions options) {
    auto db = SANDGATE_TRY(open_sqlite_database(path, options.busy_timeout));
    // The queue owns the schema: it creates or migrates the file on the shared connection.
    auto queue = SANDGATE_TRY(sqlite_queue_on(db, path, std::move(options.clock)));
    return SqliteStore{std::move(queue), std::make_unique<SqlitePollState>(std::move(db))};
}

Expected<std::unique_ptr<PollState>> open_sqlite_poll_state(const std::filesystem::path& path,
                                                            SqliteOptions options) {
    auto store = SANDGATE_TRY(open_sqlite_store(path, std::move(options)));
    return std::move(store.poll_state);
}

}  // namespace agent
