#pragma once
// FakeGitHub: starts tests/fake_github/server.py (the stand-in for GitHub's REST API) on
// 127.0.0.1 for one test, and kills it when the handle goes out of scope. Also a small raw
// HTTP helper for the server's /_control/ endpoints, independent of the code under test.
//
// Header-only so each tests/test_github_*.cpp can include it without a shared library edit.

#include <curl/curl.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/fd.hpp"
#include "tests/support/numbers.hpp"

extern char** environ;

namespace tests {

inline constexpr const char* k_fake_token = "ghp_fakeSECRETtoken0123456789abcdefABCDEF";

class FakeGitHub {
public:
    // `extra`: more of server.py's flags, such as {"--git-root", DIR}.
    explicit FakeGitHub(std::vector<std::string> tokens = {k_fake_token}, int port = 0,
                        std::vector<std::string> extra = {}) {
        int fds[2];
        if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
        common::Fd read_end(fds[0]);
        common::Fd write_end(fds[1]);
        std::vector<std::string> argv = {
            "/usr/bin/python3", std::string(SANDGATE_SOURCE_DIR) + "/tests/fake_github/server.py",
            "--schema",
            std::string(SANDGATE_SHARED_DIR) +
                "/corpora/github-openapi/github-openapi-subset.json"};
        if (port != 0) {
            argv.push_back("--port");
            argv.push_back(std::to_string(port));
        }
        for (auto& token : tokens) {
            argv.push_back("--token");
            argv.push_back(token);
        }
        argv.insert(argv.end(), extra.begin(), extra.end());
        for (size_t i = 0; i + 1 < extra.size(); ++i)
            if (extra[i] == "--cert") m_ca_file = extra[i + 1];  // https, for "localhost"
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
            if (::poll(&pfd, 1, 60'000) <= 0) break;
            char buffer[256];
            const ssize_t got = ::read(read_end.get(), buffer, sizeof buffer);
            if (got <= 0) break;
            line.append(buffer, static_cast<size_t>(got));
        }
        if (!line.starts_with("PORT ")) {
            stop();
            throw std::runtime_error("fake GitHub did not start: '" + line + "'");
        }
        m_port = tests::to_number<int>(std::string_view(line).substr(5)).value_or(0);
        m_stdout = std::move(read_end);
    }
    FakeGitHub(const FakeGitHub&) = delete;
    FakeGitHub& operator=(const FakeGitHub&) = delete;
    ~FakeGitHub() { stop(); }

    // Kills the server (it holds no state worth a graceful stop) and reaps it.
    void stop() {
        if (m_pid <= 0) return;
        ::kill(m_pid, SIGKILL);
        int status = 0;
        ::waitpid(m_pid, &status, 0);
        m_pid = -1;
    }

    int port() const { return m_port; }
    std::string url() const {
        return (m_ca_file.empty() ? "http://127.0.0.1:" : "https://localhost:") +
               std::to_string(m_port);
    }

    std::string get(const std::string& path) const { return call("GET", path, ""); }
    std::string post(const std::string& path, const std::string& body) const {
        return call("POST", path, body);
    }
    // Queues faults: `[{"kind":"500","count":2,"match":"check-runs"}]`.
    void inject(const std::string& faults_json) const {
        post("/_control/faults", "{\"faults\": " + faults_json + "}");
    }
    // Server settings: `{"token_ttl": 360}`, `{"advance_clock": 3600}` (see server.py).
    void configure(const std::string& config_json) const { post("/_control/config", config_json); }
    std::string state() const { return get("/_control/state"); }
    std::string requests() const { return get("/_control/requests"); }

private:
    static size_t collect(char* data, size_t size, size_t count, void* user) {
        static_cast<std::string*>(user)->append(data, size * count);
        return size * count;
    }

    std::string call(const char* method, const std::string& path, const std::string& body) const {
        struct Deleter {
            void operator()(CURL* handle) const { curl_easy_cleanup(handle); }
        };
        std::unique_ptr<CURL, Deleter> easy(curl_easy_init());
        std::string out;
        const std::string target = url() + path;
        curl_easy_setopt(easy.get(), CURLOPT_URL, target.c_str());
        curl_easy_setopt(easy.get(), CURLOPT_CUSTOMREQUEST, method);
        if (std::string(method) != "GET") {
            curl_easy_setopt(easy.get(), CURLOPT_POSTFIELDS, body.c_str());
        }
        curl_easy_setopt(easy.get(), CURLOPT_WRITEFUNCTION, &FakeGitHub::collect);
        curl_easy_setopt(easy.get(), CURLOPT_WRITEDATA, &out);
        curl_easy_setopt(easy.get(), CURLOPT_TIMEOUT, 120L);
        if (!m_ca_file.empty()) curl_easy_setopt(easy.get(), CURLOPT_CAINFO, m_ca_file.c_str());
        if (curl_easy_perform(easy.get()) != CURLE_OK) {
            throw std::runtime_error("control call failed: " + path);
        }
        return out;
    }

    pid_t m_pid = -1;
    int m_port = 0;
    std::string m_ca_file;  // set: the server speaks https with this certificate
    common::Fd m_stdout;
};

}  // namespace tests
