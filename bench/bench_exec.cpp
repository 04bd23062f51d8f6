// bench_exec: what `sandgate exec` costs over running the command directly.
//   spawn:   `sandgate exec --sandbox off -- true` against a plain fork/exec of `true`, and
//            sandbox::run({"true"}) in-process (what the agent pays per step);
//   capture: a 1 GiB stream through `sandgate exec --sandbox off` into /dev/null against
//            `cat` of the same stream, with sandgate's peak RSS (wait4's rusage).
// Baselines are measured in the same run; the machine is shared, so each figure is the best
// of a few rounds.
// g++ 12 reports false null dereferences inside inlined std::string code here.
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "sandbox/process/run.hpp"

namespace {

using Clock = std::chrono::steady_clock;
constexpr long long k_stream_bytes = 1LL << 30;
constexpr int k_spawns = 200;
constexpr int k_rounds = 3;
// The capture runs take the best of more rounds: one 1 GiB stream lasts a quarter of a second,
// short enough for a neighbour's burst to spoil a round.
constexpr int k_capture_rounds = 7;

struct Outcome {
    double seconds = 0;
    long max_rss_kib = 0;
};

// Runs argv with stdin from `in_fd` (or /dev/null) and stdout to `out_fd` (or /dev/null);
// returns its wall time and peak RSS.
pid_t start(const std::vector<std::string>& argv, int in_fd, int out_fd) {
    std::vector<char*> args;
    for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
        const int null = ::open("/dev/null", O_RDWR);
        ::dup2(in_fd >= 0 ? in_fd : null, 0);
        ::dup2(out_fd >= 0 ? out_fd : null, 1);
        ::execv(args[0], args.data());
        ::_exit(127);
    }
    return pid;
}

Outcome finish(pid_t pid, Clock::time_point began) {
    int status = 0;
    rusage usage{};
    ::wait4(pid, &status, 0, &usage);
    Outcome outcome;
    outcome.seconds = std::chrono::duration<double>(Clock::now() - began).count();
    outcome.max_rss_kib = usage.ru_maxrss;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        std::fprintf(stderr, "bench_exec: %s exited with status %d\n", "a command", status);
    return outcome;
}

Outcome run_once(const std::vector<std::string>& argv) {
    const auto began = Clock::now();
    return finish(start(argv, -1, -1), began);
}

double per_spawn_ms(const std::vector<std::string>& argv) {
    double best = 1e9;
    for (int round = 0; round < k_rounds; ++round) {
        const auto began = Clock::now();
        for (int i = 0; i < k_spawns; ++i) run_once(argv);
        best =
            std::min(best, std::chrono::duration<double, std::milli>(Clock::now() - began).count() /
                               k_spawns);
    }
    return best;
}

double library_spawn_ms() {
    sandbox::RunRequest request;
    request.argv = {"/bin/true"};
    request.policy.mode = sandbox::SandboxMode::off;
    double best = 1e9;
    for (int round = 0; round < k_rounds; ++round) {
        const auto began = Clock::now();
        for (int i = 0; i < k_spawns; ++i) (void)sandbox::run(request);
        best =
            std::min(best, std::chrono::duration<double, std::milli>(Clock::now() - began).count() /
                               k_spawns);
    }
    return best;
}

// `producer | consumer`, consumer's stdout to /dev/null; the consumer's outcome.
Outcome pipeline(const std::vector<std::string>& producer,
                 const std::vector<std::string>& consumer) {
    int fds[2];
    if (::pipe(fds) != 0) return {};
    const auto began = Clock::now();
    const pid_t writer = start(producer, -1, fds[1]);
    ::close(fds[1]);
    const pid_t reader = start(consumer, fds[0], -1);
    ::close(fds[0]);
    ::waitpid(writer, nullptr, 0);
    return finish(reader, began);
}

}  // namespace

int main() {
    const std::string sandgate = SANDGATE_BINARY;
    const std::vector<std::string> plain = {"/bin/true"};
    const std::vector<std::string> wrapped = {sandgate, "exec", "--sandbox",
                                              "off",    "--",   "/bin/true"};
    const double plain_ms = per_spawn_ms(plain);
    const double exec_ms = per_spawn_ms(wrapped);
    const double library_ms = library_spawn_ms();
    std::printf("spawn   fork/exec true:                      %7.3f ms\n", plain_ms);
    std::printf("spawn   sandgate exec --sandbox off -- true: %7.3f ms  (+%.3f ms, %.2fx)\n",
                exec_ms, exec_ms - plain_ms, exec_ms / plain_ms);
    std::printf("spawn   sandbox::run(true) in-process:       %7.3f ms  (+%.3f ms)\n", library_ms,
                library_ms - plain_ms);
    std::printf("spawn   sandgate --version (process start):  %7.3f ms\n",
                per_spawn_ms({sandgate, "--version"}));

    const std::string size = std::to_string(k_stream_bytes);
    const std::vector<std::string> source = {"/usr/bin/head", "-c", size, "/dev/zero"};
    Outcome cat{1e9, 0};
    Outcome live{1e9, 0};
    Outcome json{1e9, 0};
    for (int round = 0; round < k_capture_rounds; ++round) {
        const Outcome c = pipeline(source, {"/bin/cat"});
        if (c.seconds < cat.seconds) cat = c;
        std::vector<std::string> through = {sandgate, "exec", "--sandbox", "off", "--"};
        through.insert(through.end(), source.begin(), source.end());
        const Outcome l = run_once(through);
        if (l.seconds < live.seconds) live = l;
        through.insert(through.begin() + 4, "--json");
        const Outcome j = run_once(through);
        if (j.seconds < json.seconds) json = j;
    }
    const double gib = static_cast<double>(k_stream_bytes) / (1 << 30);
    std::printf("capture head -c 1GiB /dev/zero | cat:        %7.2f GiB/s\n", gib / cat.seconds);
    std::printf(
        "capture sandgate exec (live to /dev/null):   %7.2f GiB/s  (%.2fx cat), peak RSS %.1f "
        "MiB\n",
        gib / live.seconds, cat.seconds / live.seconds, live.max_rss_kib / 1024.0);
    std::printf(
        "capture sandgate exec --json:                %7.2f GiB/s  (%.2fx cat), peak RSS %.1f "
        "MiB\n",
        gib / json.seconds, cat.seconds / json.seconds, json.max_rss_kib / 1024.0);
    return 0;
}
