#pragma once
// A thin RAII layer over libpq for the agent's PostgreSQL queue (agent/store/job_store_pg.cpp),
// in the spirit of agent/store/sqlite.hpp. A Connection owns one PGconn (PQfinish), a Result one
// PGresult (PQclear); a Transaction rolls back unless committed. Every failure is a
// common::Error: transient when the server is gone or said "try again" (SQLSTATE classes 08,
// 40, 53, 57, 55P03: connection loss, serialization failure, deadlock, shutdown, lock not
// available), invalid_input for data the server refused (class 22), permanent otherwise.
//
// libpq is loaded with dlopen("libpq.so.5") the first time it is needed, not linked: it brings
// libssl, libcrypto, Kerberos and LDAP (about 5.5 MB resident and 12 ms of start-up, measured
// on Debian 12), which the daemon of an agent on the embedded SQLite queue never needs
// (tests/unit/agent/test_agent.cpp checks sandgate-agent's DT_NEEDED). Only the header is a build
// dependency (libpq-dev); the library comes with libpq5.
//
// Not thread-safe: one thread uses a Connection at a time.

#include <libpq-fe.h>

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error.hpp"

namespace agent::pg {

// The libpq entry points the agent uses, resolved by name from libpq.so.5.
struct Api {
    decltype(&::PQconnectdbParams) connectdb_params;
    decltype(&::PQstatus) status;
    decltype(&::PQerrorMessage) error_message;
    decltype(&::PQfinish) finish;
    decltype(&::PQexec) exec;
    decltype(&::PQexecParams) exec_params;
    decltype(&::PQresultStatus) result_status;
    decltype(&::PQresultErrorField) result_error_field;
    decltype(&::PQresultErrorMessage) result_error_message;
    decltype(&::PQclear) clear;
    decltype(&::PQntuples) ntuples;
    decltype(&::PQgetvalue) getvalue;
    decltype(&::PQgetisnull) getisnull;
    decltype(&::PQcmdTuples) cmd_tuples;
    decltype(&::PQsocket) socket;
    decltype(&::PQconsumeInput) consume_input;
    decltype(&::PQnotifies) notifies;
    decltype(&::PQfreemem) freemem;
    decltype(&::PQsetNoticeProcessor) set_notice_processor;
    decltype(&::PQconninfoParse) conninfo_parse;
    decltype(&::PQconninfoFree) conninfo_free;
    decltype(&::PQtransactionStatus) transaction_status;
};

// libpq, loaded once (thread-safe); `unavailable` naming the library when it cannot be.
common::Expected<const Api*> api();

// What a connection URL names, parsed by libpq itself (PQconninfoParse) without contacting a
// server. `password` is whether the text carries one (in the userinfo or a parameter).
struct UrlParts {
    std::string host, port, dbname, user;
    bool password = false;
};
common::Expected<UrlParts> parse_url(std::string_view url);

// "user@host:port/dbname" (libpq's defaults for what the URL leaves out shown as given):
// for log lines; never a password.
std::string describe(const UrlParts& parts);

// One text parameter of a statement ($1, $2, ...), or NULL.
class Param {
public:
    Param(std::nullopt_t) {}
    Param(const char* text) : m_value(std::string(text)) {}
    Param(std::string_view text) : m_value(std::string(text)) {}
    Param(const std::string& text) : m_value(text) {}
    Param(const std::optional<std::string>& text) : m_value(text) {}
    Param(std::int64_t number) : m_value(std::to_string(number)) {}
    Param(int number) : m_value(std::to_string(number)) {}
    Param(bool flag) : m_value(flag ? "true" : "false") {}
    const char* c_str() const { return m_value ? m_value->c_str() : nullptr; }

private:
    std::optional<std::string> m_value;
};

class Result {
public:
    Result(const Api* api, PGresult* result) : m_api(api), m_result(result, Clear{api}) {}
    int rows() const { return m_api->ntuples(m_result.get()); }
    bool is_null(int row, int column) const {
        return m_api->getisnull(m_result.get(), row, column) != 0;
    }
    std::string text(int row, int column) const;
    // A bigint column; 0 when NULL. A boolean reads as 0/1 ('t'/'f').
    std::int64_t integer(int row, int column) const;
    // Rows an INSERT/UPDATE/DELETE touched.
    std::int64_t affected() const;

private:
    friend class Connection;
    struct Clear {
        const Api* api;
        void operator()(PGresult* result) const { api->clear(result); }
    };
    const Api* m_api;
    std::unique_ptr<PGresult, Clear> m_result;
};

struct ConnectOptions {
    std::string url;                      // postgresql://... (no password: see agent_config)
    std::optional<std::string> password;  // from queue.password_file; else libpq's PGPASSFILE
    std::chrono::seconds connect_timeout{10};
    std::string application_name = "sandgate";
};

class Connection {
public:
    // Connects (blocking up to connect_timeout); transient when the server cannot be reached.
    static common::Expected<Connection> open(const ConnectOptions& options);

    // One statement with text parameters; a command's or a query's result. `what` names it in
    // errors.
    common::Expected<Result> exec(std::string_view sql, std::initializer_list<Param> params = {});
    // Several statements in one string, no parameters (migrations).
    common::Expected<void> exec_script(std::string_view sql);

    // Whether the connection is gone (the server went away, the socket broke).
    bool broken() const;
    int socket() const;
    // Reads what the server sent and returns the payloads of the notifications that arrived
    // (LISTEN/NOTIFY), in order; transient when the connection broke.
    common::Expected<std::vector<std::string>> notifications();

private:
    struct Finish {
        const Api* api;
        void operator()(PGconn* conn) const { api->finish(conn); }
    };
    Connection(const Api* api, PGconn* conn) : m_api(api), m_conn(conn, Finish{api}) {}
    common::Error error(const PGresult* result, std::string_view what) const;

    const Api* m_api;
    std::unique_ptr<PGconn, Finish> m_conn;
};

// BEGIN ... COMMIT; rolled back on destruction unless committed (when the connection still
// stands: a broken one was rolled back by the server).
class Transaction {
public:
    static common::Expected<Transaction> begin(Connection& db);
    Transaction(Transaction&& other) noexcept : m_db(std::exchange(other.m_db, nullptr)) {}
    Transaction& operator=(Transaction&&) = delete;
    ~Transaction();
    common::Expected<void> commit();

private:
    explicit Transaction(Connection& db) : m_db(&db) {}
    Connection* m_db;
};

}  // namespace agent::pg
