#include "agent/store/pg.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <charconv>
#include <mutex>

namespace agent::pg {

using common::ErrorKind;
using common::Expected;
using common::fail;

namespace {

constexpr const char* k_library = "libpq.so.5";

template <typename Function>
bool resolve(void* handle, const char* name, Function& out) {
    out = reinterpret_cast<Function>(::dlsym(handle, name));
    return out != nullptr;
}

Expected<Api> load() {
    // Never closed: libpq keeps process-wide state (OpenSSL's) for as long as we live.
    void* handle = ::dlopen(k_library, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char* why = ::dlerror();
        return fail(ErrorKind::unavailable,
                    std::string("the PostgreSQL queue needs ") + k_library +
                        " (Debian: libpq5): " + (why ? why : "dlopen failed"));
    }
    Api api{};
    const bool ok =
        resolve(handle, "PQconnectdbParams", api.connectdb_params) &&
        resolve(handle, "PQstatus", api.status) &&
        resolve(handle, "PQerrorMessage", api.error_message) &&
        resolve(handle, "PQfinish", api.finish) && resolve(handle, "PQexec", api.exec) &&
        resolve(handle, "PQexecParams", api.exec_params) &&
        resolve(handle, "PQresultStatus", api.result_status) &&
        resolve(handle, "PQresultErrorField", api.result_error_field) &&
        resolve(handle, "PQresultErrorMessage", api.result_error_message) &&
        resolve(handle, "PQclear", api.clear) && resolve(handle, "PQntuples", api.ntuples) &&
        resolve(handle, "PQgetvalue", api.getvalue) &&
        resolve(handle, "PQgetisnull", api.getisnull) &&
        resolve(handle, "PQcmdTuples", api.cmd_tuples) && resolve(handle, "PQsocket", api.socket) &&
        resolve(handle, "PQconsumeInput", api.consume_input) &&
        resolve(handle, "PQnotifies", api.notifies) && resolve(handle, "PQfreemem", api.freemem) &&
        resolve(handle, "PQsetNoticeProcessor", api.set_notice_processor) &&
        resolve(handle, "PQconninfoParse", api.conninfo_parse) &&
        resolve(handle, "PQconninfoFree", api.conninfo_free) &&
        resolve(handle, "PQtransactionStatus", api.transaction_status);
    if (!ok)
        return fail(ErrorKind::unavailable,
                    std::string(k_library) + " lacks a function sandgate needs");
    return api;
}

// Notices ("relation already exists, skipping") are not errors; nothing prints them.
void ignore_notice(void*, const char*) {}

std::string trimmed(const char* text) {
    std::string out = text ? text : "";
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    // libpq's messages may span lines ("DETAIL: ..."): one line for logs.
    for (auto& c : out)
        if (c == '\n') c = ' ';
    return out;
}

ErrorKind kind_of(std::string_view sqlstate) {
    if (sqlstate.size() != 5) return ErrorKind::transient;  // no state: the connection broke
    const auto cls = sqlstate.substr(0, 2);
    if (cls == "08" || cls == "40" || cls == "53" || cls == "57" || sqlstate == "55P03")
        return ErrorKind::transient;
    if (cls == "22") return ErrorKind::invalid_input;
    return ErrorKind::permanent;
}

// A server that answered and refused (a wrong password, no such role or database, no
// pg_hba.conf entry) will refuse again: permanent. One out of reach, starting up, shutting
// down or full may take us later: transient. libpq gives no SQLSTATE for a failed connection,
// only its message, whose severity prefix marks what the server itself said.
ErrorKind connect_failure_kind(std::string_view message) {
    if (message.find("FATAL:") == std::string_view::npos &&
        message.find("password") == std::string_view::npos)
        return ErrorKind::transient;
    for (std::string_view passing :
         {"the database system is", "too many connections", "too many clients",
          "remaining connection slots", "terminating connection"})
        if (message.find(passing) != std::string_view::npos) return ErrorKind::transient;
    return ErrorKind::permanent;
}

}  // namespace

Expected<const Api*> api() {
    static std::once_flag once;
    static Expected<Api> loaded = fail(ErrorKind::unavailable, "not loaded");
    std::call_once(once, [] { loaded = load(); });
    if (!loaded) return std::unexpected(loaded.error());
    return &*loaded;
}

Expected<UrlParts> parse_url(std::string_view url) {
    auto lib = SANDGATE_TRY(api());
    char* message = nullptr;
    const std::string text(url);
    PQconninfoOption* options = (lib)->conninfo_parse(text.c_str(), &message);
    if (!options) {
        std::string why = trimmed(message ? message : "not a connection URL");
        if (message) (lib)->freemem(message);
        return fail(ErrorKind::invalid_input, why);
    }
    UrlParts parts;
    for (auto* option = options; option->keyword; ++option) {
        if (!option->val) continue;
        const std::string_view key = option->keyword;
        if (key == "host")
            parts.host = option->val;
        else if (key == "port")
            parts.port = option->val;
        else if (key == "dbname")
            parts.dbname = option->val;
        else if (key == "user")
            parts.user = option->val;
        else if (key == "password" && *option->val)
            parts.password = true;
    }
    (lib)->conninfo_free(options);
    return parts;
}

std::string describe(const UrlParts& parts) {
    std::string out;
    if (!parts.user.empty()) out += parts.user + "@";
    out += parts.host.empty() ? "localhost" : parts.host;
    if (!parts.port.empty()) out += ":" + parts.port;
    out += "/" + (parts.dbname.empty() ? std::string("(default database)") : parts.dbname);
    return out;
}

std::string Result::text(int row, int column) const {
    return m_api->getvalue(m_result.get(), row, column);
}

std::int64_t Result::integer(int row, int column) const {
    const char* value = m_api->getvalue(m_result.get(), row, column);
    const std::string_view text = value ? value : "";
    if (text == "t") return 1;
    if (text == "f") return 0;
    std::int64_t out = 0;
    std::from_chars(text.data(), text.data() + text.size(), out);
    return out;
}

std::int64_t Result::affected() const {
    const std::string_view text = m_api->cmd_tuples(m_result.get());
    std::int64_t out = 0;
    std::from_chars(text.data(), text.data() + text.size(), out);
    return out;
}

Expected<Connection> Connection::open(const ConnectOptions& options) {
    auto lib = SANDGATE_TRY(api());
    const std::string timeout = std::to_string(options.connect_timeout.count());
    // expand_dbname: `dbname` holds the whole URL; the keywords after it override it.
    std::vector<const char*> keys = {"dbname", "connect_timeout", "application_name"};
    std::vector<const char*> values = {options.url.c_str(), timeout.c_str(),
                                       options.application_name.c_str()};
    if (options.password) {
        keys.push_back("password");
        values.push_back(options.password->c_str());
    }
    keys.push_back(nullptr);
    values.push_back(nullptr);
    PGconn* raw = (lib)->connectdb_params(keys.data(), values.data(), 1);
    if (!raw) return fail(ErrorKind::transient, "postgresql: out of memory connecting");
    Connection conn(lib, raw);
    if ((lib)->status(raw) != CONNECTION_OK) {
        const std::string why = trimmed((lib)->error_message(raw));
        return fail(connect_failure_kind(why), "postgresql: cannot connect: " + why);
    }
    (lib)->set_notice_processor(raw, &ignore_notice, nullptr);
    return conn;
}

common::Error Connection::error(const PGresult* result, std::string_view what) const {
    const char* state = result ? m_api->result_error_field(result, PG_DIAG_SQLSTATE) : nullptr;
    auto kind = kind_of(state ? state : "");
    if (broken()) kind = ErrorKind::transient;
    const char* message = result ? m_api->result_error_message(result) : nullptr;
    if (!message || !*message) message = m_api->error_message(m_conn.get());
    return {kind, "postgresql: " + std::string(what) + ": " + trimmed(message)};
}

Expected<Result> Connection::exec(std::string_view sql, std::initializer_list<Param> params) {
    std::vector<const char*> values;
    values.reserve(params.size());
    for (const auto& param : params) values.push_back(param.c_str());
    const std::string text(sql);
    Result result(m_api,
                  m_api->exec_params(m_conn.get(), text.c_str(), static_cast<int>(values.size()),
                                     nullptr, values.data(), nullptr, nullptr, 0));
    const auto status = m_api->result_status(result.m_result.get());
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return result;
    // The statement's first words name it in the message (never its parameters).
    const auto cut = std::min<std::size_t>(text.find_first_of("(\n,"), 40);
    return std::unexpected(error(result.m_result.get(), text.substr(0, cut)));
}

Expected<void> Connection::exec_script(std::string_view sql) {
    const std::string text(sql);
    Result result(m_api, m_api->exec(m_conn.get(), text.c_str()));
    const auto status = m_api->result_status(result.m_result.get());
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return {};
    return std::unexpected(error(result.m_result.get(), "script"));
}

bool Connection::broken() const {
    return m_api->status(m_conn.get()) != CONNECTION_OK;
}

int Connection::socket() const {
    return m_api->socket(m_conn.get());
}

Expected<std::vector<std::string>> Connection::notifications() {
    if (m_api->consume_input(m_conn.get()) == 0 || broken())
        return fail(ErrorKind::transient,
                    "postgresql: " + trimmed(m_api->error_message(m_conn.get())));
    std::vector<std::string> payloads;
    while (PGnotify* notify = m_api->notifies(m_conn.get())) {
        payloads.emplace_back(notify->extra ? notify->extra : "");
        m_api->freemem(notify);
    }
    return payloads;
}

Expected<Transaction> Transaction::begin(Connection& db) {
    (void)SANDGATE_TRY(db.exec("BEGIN"));
    return Transaction(db);
}

Transaction::~Transaction() {
    if (m_db && !m_db->broken()) (void)m_db->exec("ROLLBACK");
}

Expected<void> Transaction::commit() {
    auto* db = std::exchange(m_db, nullptr);
    (void)SANDGATE_TRY(db->exec("COMMIT"));
    return {};
}

}  // namespace agent::pg
