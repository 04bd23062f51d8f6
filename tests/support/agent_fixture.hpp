#pragma once
// The agent driven as a real process by the agent tests (tests/test_agent*.cpp): a temp dir
// with its config and state, the agent started and stopped, its CLI client, and its queue
// read directly. The job command is a script that waits for a release file (JobCommand::script)
// or the agent's default, the real `sandgate gate` (JobCommand::gate).

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "agent/store/job_store.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"

namespace tests::agent_fixture {

using namespace std::chrono_literals;

// The job command: marks its start, waits for a release file, prints, exits with the code
// the release file holds.
constexpr const char* k_job_script = R"SH(#!/bin/sh
touch "$MARKS/started-$SANDGATE_JOB_ID"
while [ ! -e "$MARKS/release" ]; do sleep 0.05; done
echo "job $SANDGATE_JOB_ID of $SANDGATE_JOB_REPOSITORY at $SANDGATE_JOB_SHA"
touch "$MARKS/finished-$SANDGATE_JOB_ID"
exit "$(cat "$MARKS/release")"
)SH";

struct Process {
    pid_t pid = -1;
    Process() = default;
    Process(Process&& other) noexcept : pid(std::exchange(other.pid, -1)) {}
    Process& operator=(Process&& other) noexcept {
        std::swap(pid, other.pid);  // ours (if any) is killed by `other`'s destructor
        return *this;
    }
    ~Process() {
        if (pid > 0) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, 0);
        }
    }
    int wait() {
        int status = 0;
        ::waitpid(pid, &status, 0);
        pid = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
};

// argv[0] started with MARKS=marks; its stdout and stderr go to `out` and `err` (created or
// truncated) when given, else they are the test's.
inline Process spawn(std::vector<std::string> argv, const std::filesystem::path& marks,
                     const std::filesystem::path& out = {}, const std::filesystem::path& err = {}) {
    Process process;
    process.pid = ::fork();
    if (process.pid == 0) {
        ::setenv("MARKS", marks.c_str(), 1);
        for (auto [path, target] :
             {std::pair{&out, STDOUT_FILENO}, std::pair{&err, STDERR_FILENO}}) {
            if (path->empty()) continue;
            const int fd = ::open(path->c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
            if (fd < 0 || ::dup2(fd, target) < 0) ::_exit(127);  // dup2's copy drops O_CLOEXEC
        }
        std::vector<char*> args;
        for (auto& arg : argv) args.push_back(arg.data());
        args.push_back(nullptr);
        ::execv(args[0], args.data());
        ::_exit(127);
    }
    return process;
}

// Waits until `path` exists; a bug hangs here until ctest's bound rather than passing.
inline void wait_path(const std::filesystem::path& path) {
    while (!std::filesystem::exists(path)) std::this_thread::sleep_for(20ms);
}

// The jobs' posture (and their persistent sandbox's). Inside the dogfood wrap a nested bwrap
// cannot run (the wrap passes --disable-userns and its pid namespace cannot mount a new /proc),
// so there the broker runs unwrapped inside the outer wrap.
inline std::string job_sandbox() {
    return tests::under_wrap() ? "off" : "bwrap";
}

struct Agent {
    std::filesystem::path dir = tests::make_temp_dir("agent");
    std::filesystem::path marks = dir / "marks";
    std::filesystem::path config = dir / "agent.yaml";

    enum class JobCommand { script, gate };

    explicit Agent(std::string extra = "", JobCommand command = JobCommand::script) {
        std::filesystem::create_directories(marks);
        // The agent hands jobs a clean environment: the marks directory is written in.
        std::string script = k_job_script;
        for (auto at = script.find("$MARKS"); at != std::string::npos; at = script.find("$MARKS"))
            script.replace(at, 6, marks.string());
        tests::write_file(dir / "job.sh", script);
        std::filesystem::permissions(dir / "job.sh", std::filesystem::perms::owner_all);
        tests::write_file(
            config,
            "agent:\n  id: test-agent\n  state_dir: " + (dir / "state").string() +
                "\n  max_jobs: 2\n  lease_seconds: 30\n" + extra + "job:\n" +
                (command == JobCommand::script ? "  command: [" + (dir / "job.sh").string() + "]\n"
                                               : std::string()) +
                "  sandbox: " + job_sandbox() + "\n");
    }
    // The daemon; its log (stdout: spdlog's default sink) goes to `log` when given.
    Process start(const std::filesystem::path& log = {}) {
        return spawn({SANDGATE_BINARY, "agent", "--config", config.string()}, marks, log);
    }
    std::filesystem::path socket() const { return dir / "state" / "agent" / "run" / "api.sock"; }
    int jobs(std::vector<std::string> args) {
        args.insert(args.begin(), {SANDGATE_BINARY, "jobs", "--socket", socket().string()});
        auto process = spawn(std::move(args), marks);
        return process.wait();
    }
    void wait_ready() {
        while (!std::filesystem::exists(socket()) || jobs({"list"}) != 0)
            std::this_thread::sleep_for(20ms);
    }
    std::unique_ptr<agent::JobQueue> queue() {
        return std::move(*agent::open_sqlite_queue(agent::default_queue_path(dir / "state")));
    }
    std::int64_t submit(const std::string& sha) {
        REQUIRE(jobs({"submit", "--repo", "octo/repo", "--sha", sha}) == 0);
        agent::JobFilter filter;
        filter.sha = sha;
        return (*queue()->list(filter)).at(0).id;
    }
    void wait_file(const std::string& name) { wait_path(marks / name); }
    agent::JobState wait_terminal(std::int64_t id) {
        auto q = queue();
        while (true) {
            auto job = q->get(id);
            REQUIRE((job && *job));
            const auto state = (*job)->state;
            if (agent::is_terminal(state)) return state;
            std::this_thread::sleep_for(20ms);
        }
    }
};

inline std::string sha(int n) {
    auto text = std::to_string(n);
    return std::string(40 - text.size(), 'a') + text;
}

}  // namespace tests::agent_fixture
