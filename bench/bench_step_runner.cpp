// bench_step_runner: what run_step adds around sandbox::run. Runs N trivial steps
// (`true` as a run: step with shell sh) three ways and prints the mean per step:
//   (a) sandbox::run of `sh -e script` directly (the baseline: a process and its capture),
//   (b) run_step with --sandbox off (script file, five file-command files, env, commands,
//       masking, log sink, file-command parsing),
//   (c) run_step under the bwrap wrap (when bwrap works here);
// and the file-command round trip alone (create the five files through the directory fd, a
// step's writes, read and parse them through it, remove them), against the same by path with
// plain open(2) (what sandgate did before sandbox/safe_access): the safe reads' cost per step.
#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "jobs/run/file_commands.hpp"
#include "jobs/run/step_runner.hpp"

namespace {

constexpr int k_steps = 100;
constexpr int k_round_trips = 3000;

void write_text(const std::filesystem::path& path, std::string_view text) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) return;
    (void)!::write(fd, text.data(), text.size());
    ::close(fd);
}

// The round trip through sandbox/safe_access (FileCommandFiles), in microseconds per step.
double safe_round_trip_us(const std::filesystem::path& dir, bool& ok) {
    auto root = sandbox::SafeDir::open_trusted(dir, "bench");
    if (!root) return 0;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < k_round_trips; ++i) {
        auto files = jobs::FileCommandFiles::create(*root, "fc", {});
        if (!files) {
            ok = false;
            return 0;
        }
        write_text(files->paths().env, "A=1\n");
        write_text(files->paths().output, "answer=42\n");
        const auto results = files->read();
        ok = ok && results.failures.empty() && results.outputs.size() == 1;
        files->remove();
    }
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
               .count() /
           k_round_trips;
}

// The same by path with open(2), following whatever is there: the old way, for comparison.
double plain_round_trip_us(const std::filesystem::path& dir) {
    std::filesystem::create_directories(dir / "plain");
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < k_round_trips; ++i) {
        std::array<std::filesystem::path, 5> paths;
        for (std::size_t n = 0; n < paths.size(); ++n) {
            paths[n] = dir / "plain" / ("f" + std::to_string(n) + "_" + std::to_string(i));
            const int fd = ::open(paths[n].c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0666);
            if (fd >= 0) ::close(fd);
        }
        write_text(paths[0], "A=1\n");
        write_text(paths[1], "answer=42\n");
        for (const auto& path : paths) {
            std::string text;
            char buffer[65536];
            const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
            for (ssize_t n = 0; fd >= 0 && (n = ::read(fd, buffer, sizeof buffer)) > 0;)
                text.append(buffer, static_cast<std::size_t>(n));
            if (fd >= 0) ::close(fd);
            (void)jobs::parse_key_value_text(text, "GITHUB_ENV");
        }
        for (const auto& path : paths) ::unlink(path.c_str());
    }
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
               .count() /
           k_round_trips;
}

class NullObserver final : public sandbox::OutputObserver {
public:
    void on_output(sandbox::Stream, std::string_view) override {}
};

double per_step_ms(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
               .count() /
           k_steps;
}

}  // namespace

int main() {
    char pattern[] = "/tmp/sandgate-bench-step-XXXXXX";
    if (::mkdtemp(pattern) == nullptr) return 1;
    const std::filesystem::path dir = pattern;
    const auto script = dir / "true.sh";
    {
        std::FILE* file = std::fopen(script.c_str(), "w");
        std::fputs("true\n", file);
        std::fclose(file);
    }
    const auto host = sandbox::current_environment();

    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < k_steps; ++i) {
        sandbox::RunRequest request;
        request.argv = {"/bin/sh", "-e", script.string()};
        request.env = sandbox::child_environment(host, {}, {});
        request.policy.mode = sandbox::SandboxMode::off;
        sandbox::run(request);
    }
    const double raw = per_step_ms(start);

    NullObserver observer;
    start = std::chrono::steady_clock::now();
    for (int i = 0; i < k_steps; ++i) {
        sandbox::RunRequest request;
        request.argv = {"/bin/sh", "-e", script.string()};
        request.env = sandbox::child_environment(host, {}, {});
        request.policy.mode = sandbox::SandboxMode::off;
        request.observer = &observer;
        sandbox::run(request);
    }
    const double observed = per_step_ms(start);

    jobs::Masker masker;
    masker.add_secret("a-secret-value");
    jobs::MemoryLog log;
    auto run_steps = [&](sandbox::Policy policy, bool& ok) {
        jobs::StepContext context;
        context.label = {"bench", "step"};
        context.policy = std::move(policy);
        context.temp_dir = dir / "runner_temp";
        context.masker = &masker;
        context.log = &log;
        context.host = host;
        jobs::JobState job;
        jobs::StepSpec spec;
        spec.script = "true\n";
        spec.shell = "sh";
        spec.working_directory = dir;
        ok = true;
        const auto begin = std::chrono::steady_clock::now();
        for (int i = 0; i < k_steps; ++i) {
            if (jobs::run_step(spec, context, job).outcome != jobs::Outcome::success) ok = false;
        }
        return per_step_ms(begin);
    };
    bool off_ok = false;
    sandbox::Policy off;
    off.mode = sandbox::SandboxMode::off;
    const double stepped = run_steps(off, off_ok);
    bool wrap_ok = false;
    sandbox::Policy wrapped;
    wrapped.writable = {dir};
    const double under_wrap = run_steps(wrapped, wrap_ok);

    std::printf("%d trivial steps, mean per step\n", k_steps);
    std::printf("sandbox::run sh -e (baseline): %7.2f ms\n", raw);
    std::printf("  same with an output observer: %7.2f ms\n", observed);
    std::printf("run_step, sandbox off:         %7.2f ms  (%.2fx baseline)%s\n", stepped,
                stepped / raw, off_ok ? "" : "  [steps FAILED]");
    if (wrap_ok) {
        std::printf("run_step, bwrap:               %7.2f ms  (%.2fx baseline, %.2fx off)\n",
                    under_wrap, under_wrap / raw, under_wrap / stepped);
    } else {
        std::printf("run_step, bwrap:               unavailable here (steps failed)\n");
    }
    bool trips_ok = true;
    const double plain = plain_round_trip_us(dir);
    const double safe = safe_round_trip_us(dir, trips_ok);
    std::printf(
        "file-command round trip per step (create 5, write 2, read+parse 5, remove 5), %d steps:\n",
        k_round_trips);
    std::printf("  through the directory fd (openat2, fstat, caps): %7.1f us%s\n", safe,
                trips_ok ? "" : "  [FAILED]");
    std::printf("  by path with open(2) (the old way):              %7.1f us\n", plain);
    std::printf("  the safe reads cost a step %+.1f us (budget: 200 us)\n", safe - plain);
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    return off_ok && trips_ok ? 0 : 1;
}
