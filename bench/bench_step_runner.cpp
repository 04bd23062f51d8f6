// bench_step_runner: what run_step adds around sandbox::run. Runs N trivial steps
// (`true` as a run: step with shell sh) three ways and prints the mean per step:
//   (a) sandbox::run of `sh -e script` directly (the baseline: a process and its capture),
//   (b) run_step with --sandbox off (script file, five file-command files, env, commands,
//       masking, log sink, file-command parsing),
//   (c) run_step under the bwrap wrap (when bwrap works here).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "jobs/step_runner.hpp"

namespace {

constexpr int k_steps = 100;

class NullObserver final : public sandbox::OutputObserver {
public:
    void on_output(sandbox::Stream, std::string_view) override {}
};

double per_step_ms(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() /
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
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    return off_ok ? 0 : 1;
}
