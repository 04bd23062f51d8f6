#pragma once
// Test helpers for the git tests: real repositories made with the git CLI in temp dirs, and
// git's http-backend behind tests/helpers/git_http_server.py on 127.0.0.1.

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/fd.hpp"
#include "tests/support/numbers.hpp"
#include "tests/support/temp_dir.hpp"

extern char** environ;

namespace tests {

struct ShellResult {
    int code = -1;
    std::string out;  // stdout and stderr together
};

// Runs `command` with /bin/sh; git gets a fixed identity and no user or system config.
inline ShellResult shell(const std::string& command) {
    const std::string full =
        "export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_AUTHOR_NAME=t "
        "GIT_AUTHOR_EMAIL=t@example.com GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@example.com "
        "GIT_AUTHOR_DATE='2026-01-01T00:00:00Z' GIT_COMMITTER_DATE='2026-01-01T00:00:00Z'; (" +
        command + ") 2>&1";
    ShellResult result;
    FILE* pipe = ::popen(full.c_str(), "r");
    if (pipe == nullptr) throw std::runtime_error("popen failed");
    std::array<char, 4096> buffer;
    std::size_t n;
    while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
        result.out.append(buffer.data(), n);
    const int status = ::pclose(pipe);
    result.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return result;
}

// Like shell(), but throws (failing the test) on a non-zero exit; returns stdout trimmed.
inline std::string sh(const std::string& command) {
    auto result = shell(command);
    if (result.code != 0)
        throw std::runtime_error("command failed (" + std::to_string(result.code) +
                                 "): " + command + "\n" + result.out);
    while (!result.out.empty() && (result.out.back() == '\n' || result.out.back() == '\r'))
        result.out.pop_back();
    return result.out;
}

// A repository at `dir` (created) with one commit holding `files`; returns the commit SHA.
inline std::string make_repo(const std::filesystem::path& dir,
                             const std::map<std::string, std::string>& files) {
    sh("git init -q -b main " + dir.string());
    for (const auto& [name, content] : files) write_file(dir / name, content);
    sh("cd " + dir.string() + " && git add -A && git commit -q -m initial");
    return sh("git -C " + dir.string() + " rev-parse HEAD");
}

// Adds a commit to `dir` writing `name`; returns its SHA.
inline std::string commit_file(const std::filesystem::path& dir, const std::string& name,
                               const std::string& content, const std::string& message = "change") {
    write_file(dir / name, content);
    sh("cd " + dir.string() + " && git add -A && git commit -q -m '" + message + "'");
    return sh("git -C " + dir.string() + " rev-parse HEAD");
}

// git http-backend serving every repository under `root`, on 127.0.0.1 (TLS when cert/key
// are given; basic auth with `token` as password when non-empty; `extra` are further options
// of git_http_server.py, such as --auth-log FILE). Killed on destruction.
class GitHttpServer {
public:
    GitHttpServer(const std::filesystem::path& root, const std::string& token,
                  const std::filesystem::path& cert = {}, const std::filesystem::path& key = {},
                  const std::vector<std::string>& extra = {}) {
        int fds[2];
        if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
        common::Fd read_end(fds[0]), write_end(fds[1]);
        std::vector<std::string> args = {
            "/usr/bin/python3",
            std::string(SANDGATE_SOURCE_DIR) + "/tests/helpers/git_http_server.py", root.string()};
        if (!cert.empty())
            args.insert(args.end(), {"--cert", cert.string(), "--key", key.string()});
        args.insert(args.end(), extra.begin(), extra.end());
        std::vector<char*> argv;
        for (auto& arg : args) argv.push_back(arg.data());
        argv.push_back(nullptr);
        std::vector<std::string> env_text;
        for (char** e = environ; *e; ++e)
            if (!std::string(*e).starts_with("SANDGATE_TEST_TOKEN=")) env_text.emplace_back(*e);
        if (!token.empty()) env_text.push_back("SANDGATE_TEST_TOKEN=" + token);
        std::vector<char*> envp;
        for (auto& e : env_text) envp.push_back(e.data());
        envp.push_back(nullptr);
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_adddup2(&actions, write_end.get(), 1);
        const int rc = ::posix_spawn(&m_pid, argv[0], &actions, nullptr, argv.data(), envp.data());
        posix_spawn_file_actions_destroy(&actions);
        if (rc != 0) throw std::runtime_error("cannot start the git http server");
        write_end.reset();
        std::string line;
        char c;
        while (::read(read_end.get(), &c, 1) == 1 && c != '\n') line += c;
        if (!line.starts_with("PORT "))
            throw std::runtime_error("git http server did not start: " + line);
        m_port = tests::to_number<int>(std::string_view(line).substr(5)).value_or(0);
    }
    GitHttpServer(const GitHttpServer&) = delete;
    GitHttpServer& operator=(const GitHttpServer&) = delete;
    ~GitHttpServer() {
        ::kill(m_pid, SIGKILL);
        int status;
        ::waitpid(m_pid, &status, 0);
    }
    int port() const { return m_port; }

private:
    pid_t m_pid = -1;
    int m_port = 0;
};

// Every file under `dir` whose content contains `needle` (for "the token is nowhere" checks).
inline std::vector<std::filesystem::path> files_containing(const std::filesystem::path& dir,
                                                           const std::string& needle) {
    std::vector<std::filesystem::path> found;
    std::error_code ec;
    for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
        if (it->is_symlink(ec) || !it->is_regular_file(ec)) continue;
        if (read_file(it->path()).find(needle) != std::string::npos) found.push_back(it->path());
        if (it->path().string().find(needle) != std::string::npos) found.push_back(it->path());
    }
    return found;
}

}  // namespace tests
