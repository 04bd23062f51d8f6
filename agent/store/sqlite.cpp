#include "agent/store/sqlite.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include "common/fd.hpp"

namespace agent::sqlite {

using common::ErrorKind;
using common::Expected;

common::Error Database::error(std::string_view what, int code) const {
    const bool busy = code == SQLITE_BUSY || code == SQLITE_LOCKED ||
                      (code & 0xff) == SQLITE_BUSY || (code & 0xff) == SQLITE_LOCKED;
    std::string message(what);
    message += ": ";
    message += m_db ? sqlite3_errmsg(m_db.get()) : sqlite3_errstr(code);
    return {busy ? ErrorKind::transient : ErrorKind::permanent, std::move(message)};
}

Expected<Database> Database::open(const std::filesystem::path& path,
                                  std::chrono::milliseconds busy_timeout) {
    // Create the file 0600 ourselves: sqlite3_open_v2 would honour the umask (often 0644),
    // and the journal of jobs is nobody else's business.
    {
        common::Fd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
        if (!fd) return common::fail(ErrorKind::permanent, common::errno_message(path.string()));
    }
    Database db;
    sqlite3* raw = nullptr;
    const int code =
        sqlite3_open_v2(path.c_str(), &raw,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
    db.m_db.reset(raw);  // sqlite hands back a handle even on failure; it must be closed
    if (code != SQLITE_OK) return std::unexpected(db.error("open " + path.string(), code));
    sqlite3_busy_timeout(raw, static_cast<int>(busy_timeout.count()));
    sqlite3_extended_result_codes(raw, 1);
    SANDGATE_CHECK(
        db.exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                " PRAGMA foreign_keys=ON;"));
    return db;
}

Expected<void> Database::exec(std::string_view sql) {
    std::string text(sql);
    char* message = nullptr;
    const int code = sqlite3_exec(m_db.get(), text.c_str(), nullptr, nullptr, &message);
    if (code != SQLITE_OK) {
        std::string detail = message ? message : sqlite3_errstr(code);
        sqlite3_free(message);
        auto err = error("sql", code);
        err.message = "sql: " + detail;
        return std::unexpected(err);
    }
    return {};
}

Expected<Statement> Database::prepare(std::string_view sql) {
    sqlite3_stmt* raw = nullptr;
    const int code =
        sqlite3_prepare_v2(m_db.get(), sql.data(), static_cast<int>(sql.size()), &raw, nullptr);
    if (code != SQLITE_OK) {
        sqlite3_finalize(raw);
        return std::unexpected(error("prepare", code));
    }
    return Statement(*this, raw);
}

Statement& Statement::bind(int index, std::int64_t value) {
    const int code = sqlite3_bind_int64(m_stmt.get(), index, value);
    if (code != SQLITE_OK) m_bind_error = code;
    return *this;
}

Statement& Statement::bind(int index, std::string_view value) {
    const int code = sqlite3_bind_text64(m_stmt.get(), index, value.data(), value.size(),
                                         SQLITE_TRANSIENT, SQLITE_UTF8);
    if (code != SQLITE_OK) m_bind_error = code;
    return *this;
}

Statement& Statement::bind_optional(int index, const std::optional<std::string>& value) {
    return value ? bind(index, std::string_view(*value)) : bind_null(index);
}

Statement& Statement::bind_null(int index) {
    const int code = sqlite3_bind_null(m_stmt.get(), index);
    if (code != SQLITE_OK) m_bind_error = code;
    return *this;
}

Expected<bool> Statement::step() {
    if (m_bind_error != SQLITE_OK) return std::unexpected(m_db->error("bind", m_bind_error));
    const int code = sqlite3_step(m_stmt.get());
    if (code == SQLITE_ROW) return true;
    if (code == SQLITE_DONE) return false;
    return std::unexpected(m_db->error("step", code));
}

Expected<void> Statement::run() {
    while (true) {
        auto row = SANDGATE_TRY(step());
        if (!row) return {};
    }
}

void Statement::reset() {
    // sqlite3_reset repeats the last step's error, which run()/step() already reported.
    (void)sqlite3_reset(m_stmt.get());
    sqlite3_clear_bindings(m_stmt.get());
    m_bind_error = SQLITE_OK;
}

std::int64_t Statement::column_int(int index) const {
    return sqlite3_column_int64(m_stmt.get(), index);
}

std::string Statement::column_text(int index) const {
    const auto* text = sqlite3_column_text(m_stmt.get(), index);
    const int size = sqlite3_column_bytes(m_stmt.get(), index);
    return text ? std::string(reinterpret_cast<const char*>(text), static_cast<std::size_t>(size))
                : std::string();
}

bool Statement::column_is_null(int index) const {
    return sqlite3_column_type(m_stmt.get(), index) == SQLITE_NULL;
}

Expected<Transaction> Transaction::begin(Database& db) {
    SANDGATE_CHECK(db.exec("BEGIN IMMEDIATE"));
    return Transaction(db);
}

Transaction::~Transaction() {
    if (m_db) (void)m_db->exec("ROLLBACK");
}

Expected<void> Transaction::commit() {
    auto ok = m_db->exec("COMMIT");
    if (ok) m_db = nullptr;
    return ok;
}

}  // namespace agent::sqlite
