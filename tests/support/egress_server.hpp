#pragma once
// tests/helpers/egress_server.py on the host's 127.0.0.1 (outside any sandbox): the destination
// of the egress proxy's tests. `tls`: HTTPS with DIR/cert.pem and DIR/key.pem.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/fd.hpp"
#include "tests/support/numbers.hpp"
#include "tests/support/temp_dir.hpp"

extern char** environ;

namespace tests {

// Started on a free port (port()), killed when the handle goes; requests() is its log.
class EgressServer {
public:
    // `root`: served below /files/ (empty: nothing is).
    EgressServer(const std::filesystem::path& dir, const std::string& name, bool tls,
                 const std::filesystem::path& root = {})
        : m_log(dir / (name + ".log")) {
        tests::write_file(m_log, "");
        std::vector<std::string> argv = {
            "/usr/bin/python3",
            std::string(SANDGATE_SOURCE_DIR) + "/tests/helpers/egress_server.py", m_log.string()};
        if (tls)
            argv.insert(argv.end(), {"--cert", (dir / "cert.pem").string(), "--key",
                                     (dir / "key.pem").string()});
        if (!root.empty()) argv.insert(argv.end(), {"--root", root.string()});
        int fds[2];
        if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2");
        common::Fd read_end(fds[0]), write_end(fds[1]);
        std::vector<char*> raw;
        for (auto& arg : argv) raw.push_back(arg.data());
        raw.push_back(nullptr);
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_adddup2(&actions, write_end.get(), STDOUT_FILENO);
        const int rc = ::posix_spawn(&m_pid, raw[0], &actions, nullptr, raw.data(), environ);
        posix_spawn_file_actions_destroy(&actions);
        if (rc != 0) throw std::runtime_error("cannot start /usr/bin/python3");
        write_end.reset();
        std::string line;
        while (line.find('\n') == std::string::npos) {
            pollfd pfd{read_end.get(), POLLIN, 0};
            if (::poll(&pfd, 1, 30'000) <= 0) break;
            char buffer[64];
            const ssize_t got = ::read(read_end.get(), buffer, sizeof buffer);
            if (got <= 0) break;
            line.append(buffer, static_cast<std::size_t>(got));
        }
        if (!line.starts_with("PORT "))
            throw std::runtime_error("egress_server.py did not start: " + line);
        m_port = tests::to_number<int>(line.substr(5)).value_or(0);
    }
    EgressServer(const EgressServer&) = delete;
    EgressServer& operator=(const EgressServer&) = delete;
    ~EgressServer() {
        ::kill(m_pid, SIGKILL);
        int status = 0;
        ::waitpid(m_pid, &status, 0);
    }
    int port() const { return m_port; }
    std::string port_text() const { return std::to_string(m_port); }
    std::string requests() const { return tests::read_file(m_log); }

private:
    std::filesystem::path m_log;
    pid_t m_pid = -1;
    int m_port = 0;
};

}  // namespace tests
