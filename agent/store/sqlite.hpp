#pragma once
// A thin RAII layer over the SQLite C API for the agent's stores. A Database owns one
// connection (closed with sqlite3_close_v2); a Statement owns one prepared statement
// (finalized on destruction); a Transaction rolls back unless committed. Every failure comes
// back as a common::Error whose message carries sqlite3_errmsg; SQLITE_BUSY/LOCKED (after the
// busy timeout) are ErrorKind::transient, everything else permanent.

#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "common/error.hpp"

namespace agent::sqlite {

struct DatabaseCloser {
    void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
struct StatementFinalizer {
    void operator()(sqlite3_stmt* statement) const { sqlite3_finalize(statement); }
};

class Statement;

class Database {
public:
    // Opens (creating when missing) the file with WAL journaling, foreign keys and the busy
    // timeout set. The file is created 0600.
    static common::Expected<Database> open(const std::filesystem::path& path,
                                           std::chrono::milliseconds busy_timeout);

    sqlite3* get() const { return m_db.get(); }
    common::Expected<void> exec(std::string_view sql);
    common::Expected<Statement> prepare(std::string_view sql);
    std::int64_t last_insert_id() const { return sqlite3_last_insert_rowid(m_db.get()); }
    int changes() const { return sqlite3_changes(m_db.get()); }
    common::Error error(std::string_view what, int code) const;

private:
    std::unique_ptr<sqlite3, DatabaseCloser> m_db;
};

// Binding is 1-based like SQLite's. step() returns true while a row is available.
class Statement {
public:
    Statement(const Database& db, sqlite3_stmt* statement) : m_db(&db), m_stmt(statement) {}

    Statement& bind(int index, std::int64_t value);
    Statement& bind(int index, std::string_view value);
    Statement& bind_optional(int index, const std::optional<std::string>& value);
    Statement& bind_null(int index);
    common::Expected<bool> step();
    // Runs to completion, ignoring rows.
    common::Expected<void> run();
    // Ready to run again: rewound, its bindings cleared (a statement prepared once for many rows).
    void reset();

    std::int64_t column_int(int index) const;
    std::string column_text(int index) const;
    bool column_is_null(int index) const;
    int parameter_count() const { return sqlite3_bind_parameter_count(m_stmt.get()); }

private:
    const Database* m_db;
    std::unique_ptr<sqlite3_stmt, StatementFinalizer> m_stmt;
    int m_bind_error = SQLITE_OK;
};

// BEGIN IMMEDIATE (takes the write lock up front, so two claimers never both read "free" and
// then fail to upgrade); rolls back on destruction unless commit() succeeded.
class Transaction {
public:
    static common::Expected<Transaction> begin(Database& db);
    Transaction(Transaction&& other) noexcept : m_db(std::exchange(other.m_db, nullptr)) {}
    Transaction& operator=(Transaction&&) = delete;
    ~Transaction();
    common::Expected<void> commit();

private:
    explicit Transaction(Database& db) : m_db(&db) {}
    Database* m_db;
};

}  // namespace agent::sqlite
