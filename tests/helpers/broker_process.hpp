#pragma once
// A `sandgate broker` started directly (no wrap) for the broker tests, killed when the test
// ends, and the small request helpers they share.

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <thread>

#include "sandbox/broker/broker.hpp"

namespace tests {

class BrokerProcess {
public:
    BrokerProcess(const std::filesystem::path& dir, std::string identity, std::int64_t expires,
                  sandbox::StepReaper reaper = sandbox::StepReaper::per_step)
        : m_socket(dir / "sock" / "broker.sock"), m_identity(std::move(identity)) {
        std::filesystem::create_directories(dir / "sock");
        ::chmod((dir / "sock").c_str(), 0700);
        std::filesystem::create_directories(dir / "root" / "sub");
        const std::string root = (dir / "root").string(), socket = m_socket.string();
        const std::string expiry = std::to_string(expires);
        m_pid = ::fork();
        if (m_pid == 0) {
            const char* reap = reaper == sandbox::StepReaper::broker ? "--reap-steps" : nullptr;
            ::execl(SANDGATE_BINARY, SANDGATE_BINARY, "broker", "--socket", socket.c_str(),
                    "--identity", m_identity.c_str(), "--expires-at", expiry.c_str(), "--root",
                    root.c_str(), reap, static_cast<char*>(nullptr));
            ::_exit(127);
        }
        sandbox::BrokerRequest ping;
        ping.op = sandbox::BrokerOp::ping;
        for (int i = 0; i < 3000; ++i) {  // until it answers (a hang, not a timing assertion)
            if (sandbox::broker_call(m_socket, ping)) return;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    }
    BrokerProcess(const BrokerProcess&) = delete;
    BrokerProcess& operator=(const BrokerProcess&) = delete;
    ~BrokerProcess() {
        if (m_pid < 0) return;
        ::kill(m_pid, SIGKILL);
        ::waitpid(m_pid, nullptr, 0);
    }
    // Waits for the broker to exit on its own; its exit status (-1: killed by a signal).
    int wait_exit() {
        int status = 0;
        ::waitpid(m_pid, &status, 0);
        m_pid = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    const std::filesystem::path& socket() const { return m_socket; }

    common::Expected<sandbox::BrokerReply> exec(sandbox::ExecRequest request) const {
        if (request.identity.empty()) request.identity = m_identity;
        return sandbox::broker_call(m_socket, {sandbox::BrokerOp::exec, std::move(request)});
    }

private:
    std::filesystem::path m_socket;
    std::string m_identity;
    pid_t m_pid = -1;
};

inline sandbox::ExecRequest shell(std::string script) {
    sandbox::ExecRequest request;
    request.shell = std::move(script);
    return request;
}

}  // namespace tests
