#pragma once
// A real PostgreSQL 15 (Debian's, /usr/lib/postgresql/15/bin) that a test binary starts for
// itself: initdb in a fresh directory under /tmp, the server listening on a unix socket in
// that directory only (no TCP), fsync off, stopped and removed when the binary exits. The
// server refuses to run as root, so as root it runs as uid/gid 65534 (nobody; the child drops
// to it before exec); as anyone else (the dogfood run inside the wrap) as that user. Each test
// takes a database of its own (fresh_database()).
//
// Roles: `sandgate` (superuser, trusted on the socket) and `pw_user` (password `k_pg_password`,
// scram-sha-256): the password paths (queue.password_file, PGPASSFILE) are tested against
// real authentication.
//
//   auto* server = tests::postgres();   // nullptr: cannot run here, the reason in
//   if (!server) SKIP ...               // tests::postgres_unavailable()
//
// Header-only (like tests/fake_github/fake_github.hpp): each test file that needs it includes
// it, and tests/CMakeLists.txt stays as it is.

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "agent/store/pg.hpp"
#include "tests/support/wrap_detect.hpp"  // REQUIRE_POSTGRES only (bench/bench_pool.cpp uses the rest)

namespace tests {

inline constexpr const char* k_pg_bin = "/usr/lib/postgresql/15/bin";
inline constexpr const char* k_pg_password = "pw-secret-in-a-file-only-7731";
inline constexpr int k_pg_port = 5432;  // only names the socket file: there is no TCP
inline constexpr uid_t k_pg_unprivileged = 65534;

namespace pg_detail {
inline void write(const std::filesystem::path& path, const std::string& text) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}
inline std::string read(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}
}  // namespace pg_detail

class PostgresServer {
public:
    // Runs initdb and starts the server; throws std::runtime_error with the reason when it
    // cannot.
    PostgresServer() {
        std::string pattern = "/tmp/sandgate-pg-XXXXXX";
        if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
        m_dir = pattern;
        m_as_root = ::geteuid() == 0;
        if (m_as_root && ::chown(m_dir.c_str(), k_pg_unprivileged, k_pg_unprivileged) != 0)
            throw std::runtime_error("chown " + m_dir.string() + " failed");
        ::chmod(m_dir.c_str(), 0755);
        const int initdb =
            run_as_postgres({std::string(k_pg_bin) + "/initdb", "-D", data().string(), "-U",
                             "sandgate", "-A", "trust", "--no-sync", "-E", "UTF8", "--locale=C"},
                            m_dir / "initdb.log", Wait::yes);
        if (initdb != 0)
            throw std::runtime_error("initdb failed: " + pg_detail::read(m_dir / "initdb.log"));
        // pw_user must give its password; everyone else on the socket is trusted.
        pg_detail::write(data() / "pg_hba.conf",
                         "local all pw_user scram-sha-256\nlocal all all trust\n");
        start();
        auto admin = connect("postgres");
        exec(admin, "CREATE ROLE pw_user LOGIN PASSWORD '" + std::string(k_pg_password) + "'");
    }
    PostgresServer(const PostgresServer&) = delete;
    PostgresServer& operator=(const PostgresServer&) = delete;
    ~PostgresServer() {
        stop();
        std::error_code ec;
        std::filesystem::remove_all(m_dir, ec);
    }

    // Starts the server (again) and waits until it accepts connections.
    void start() {
        if (m_pid > 0) return;
        m_pid = run_as_postgres({std::string(k_pg_bin) + "/postgres",
                                 "-D",
                                 data().string(),
                                 "-k",
                                 m_dir.string(),
                                 "-p",
                                 std::to_string(k_pg_port),
                                 "-c",
                                 "listen_addresses=",
                                 "-c",
                                 "fsync=off",
                                 "-c",
                                 "synchronous_commit=off",
                                 "-c",
                                 "full_page_writes=off",
                                 "-c",
                                 "max_connections=200",
                                 "-c",
                                 "dynamic_shared_memory_type=mmap",
                                 "-c",
                                 "log_min_messages=warning"},
                                m_dir / "server.log", Wait::no);
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (true) {
            if (auto db = agent::pg::Connection::open(options("postgres"))) return;
            int status = 0;
            if (::waitpid(m_pid, &status, WNOHANG) == m_pid) {
                m_pid = -1;
                throw std::runtime_error("postgres exited: " +
                                         pg_detail::read(m_dir / "server.log"));
            }
            if (std::chrono::steady_clock::now() > deadline)
                throw std::runtime_error("postgres did not start: " +
                                         pg_detail::read(m_dir / "server.log"));
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    }

    // Fast shutdown (clients are disconnected), waited for.
    void stop() {
        if (m_pid <= 0) return;
        ::kill(m_pid, SIGINT);
        ::waitpid(m_pid, nullptr, 0);
        m_pid = -1;
    }

    // A database nobody used yet, owned by `sandgate`.
    std::string fresh_database() {
        std::lock_guard lock(m_mutex);
        const std::string name = "t" + std::to_string(++m_databases);
        auto admin = connect("postgres");
        exec(admin, "CREATE DATABASE " + name + " STRATEGY FILE_COPY");
        exec(admin, "GRANT ALL ON DATABASE " + name + " TO pw_user");
        return name;
    }

    // The queue.url of `database` as `user` (never with a password).
    std::string url(const std::string& database, const std::string& user = "sandgate") const {
        return "postgresql://" + user + "@/" + database + "?host=" + m_dir.string() +
               "&port=" + std::to_string(k_pg_port);
    }

    agent::pg::ConnectOptions options(const std::string& database) const {
        agent::pg::ConnectOptions out;
        out.url = url(database);
        out.connect_timeout = std::chrono::seconds(5);
        out.application_name = "sandgate-tests";
        return out;
    }

    agent::pg::Connection connect(const std::string& database) const {
        auto db = agent::pg::Connection::open(options(database));
        if (!db) throw std::runtime_error(db.error().message);
        return std::move(*db);
    }

    static void exec(agent::pg::Connection& db, const std::string& sql) {
        if (auto ok = db.exec_script(sql); !ok) throw std::runtime_error(ok.error().message);
    }

    const std::filesystem::path& dir() const { return m_dir; }
    bool running() const { return m_pid > 0; }

private:
    enum class Wait { no, yes };

    std::filesystem::path data() const { return m_dir / "data"; }

    // Forks argv (as uid/gid 65534 when we are root), its output to `log`; with Wait::yes
    // returns its exit status, else its pid. It dies with us (PR_SET_PDEATHSIG, set after the
    // uid change, which would clear it).
    int run_as_postgres(std::vector<std::string> argv, const std::filesystem::path& log,
                        Wait wait) {
        const pid_t pid = ::fork();
        if (pid < 0) throw std::runtime_error("fork failed");
        if (pid == 0) {
            if (m_as_root && (::setgroups(0, nullptr) != 0 || ::setgid(k_pg_unprivileged) != 0 ||
                              ::setuid(k_pg_unprivileged) != 0))
                ::_exit(126);
            ::prctl(PR_SET_PDEATHSIG, SIGQUIT);
            const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
            if (fd < 0 || ::dup2(fd, STDOUT_FILENO) < 0 || ::dup2(fd, STDERR_FILENO) < 0)
                ::_exit(127);
            const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
            if (null >= 0) ::dup2(null, STDIN_FILENO);
            std::vector<char*> args;
            for (auto& arg : argv) args.push_back(arg.data());
            args.push_back(nullptr);
            ::setenv("LC_ALL", "C", 1);
            ::execv(args[0], args.data());
            ::_exit(127);
        }
        if (wait == Wait::no) return pid;
        int status = 0;
        ::waitpid(pid, &status, 0);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 126)
            throw std::runtime_error(
                "cannot drop to uid 65534 to run PostgreSQL (it refuses root)");
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }

    std::filesystem::path m_dir;
    bool m_as_root = false;
    pid_t m_pid = -1;
    int m_databases = 0;
    std::mutex m_mutex;
};

namespace detail {
struct PostgresSlot {
    std::unique_ptr<PostgresServer> server;
    std::string why;
    bool tried = false;
};
inline PostgresSlot& postgres_slot() {
    static PostgresSlot slot;  // destroyed at exit: the server stopped, its directory removed
    return slot;
}
}  // namespace detail

// The binary's server, started on first use; nullptr when it cannot run (the reason in
// postgres_unavailable()).
inline PostgresServer* postgres() {
    auto& slot = detail::postgres_slot();
    if (!slot.tried) {
        slot.tried = true;
        try {
            slot.server = std::make_unique<PostgresServer>();
        } catch (const std::exception& error) {
            slot.why = error.what();
        }
    }
    return slot.server.get();
}

inline const std::string& postgres_unavailable() {
    return detail::postgres_slot().why;
}

}  // namespace tests

// A test that needs the server: outside the wrap it must start (else the test fails); inside
// the wrap it may be impossible (root without the uid change PostgreSQL insists on), and the
// test then skips there with the marker the dogfood run counts.
#define REQUIRE_POSTGRES(server)                                                      \
    auto* server = ::tests::postgres();                                               \
    do {                                                                              \
        if (!server && ::tests::under_wrap()) {                                       \
            std::printf("SKIP-UNDER-WRAP(PostgreSQL cannot start in the wrap: %s)\n", \
                        ::tests::postgres_unavailable().c_str());                     \
            std::fflush(stdout);                                                      \
            SUCCEED("skipped under the wrap");                                        \
            return;                                                                   \
        }                                                                             \
        if (!server) FAIL("PostgreSQL: " << ::tests::postgres_unavailable());         \
    } while (false)
