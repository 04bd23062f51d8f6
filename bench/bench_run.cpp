// bench_run: a workflow of 100 trivial steps (`run: true`) through `sandgate run`, under the
// wrap (--sandbox bwrap: one sandbox for the job leg, its steps exec requests there), with a
// fresh wrap per step (--wrap-each-step) and with --sandbox off, against 100 plain
// `sh -c true` spawned in the same run. Each figure is the median of k_rounds rounds (the
// machine is shared). Prints the per-step overheads against --sandbox off and the ratios
// (issue 23's target: the job leg's sandbox within 1.5x of --sandbox off).
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

extern char** environ;

namespace {

constexpr int k_steps = 100;
constexpr int k_rounds = 3;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

int spawn_wait(const std::vector<std::string>& args) {
    std::vector<char*> argv;
    for (const auto& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    pid_t pid = 0;
    if (::posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return -1;
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) return -1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

double time_run(const std::filesystem::path& dir, const std::string& sandbox) {
    const std::string command = "cd '" + dir.string() + "' && '" + SANDGATE_BINARY +
                                "' run -W w --sandbox " + sandbox + " >/dev/null 2>&1";
    const auto start = Clock::now();
    const int status = std::system(command.c_str());
    const double elapsed = seconds_since(start);
    if (status != 0) {
        std::fprintf(stderr, "bench_run: sandgate run --sandbox %s failed (status %d)\n",
                     sandbox.c_str(), status);
        return -1;
    }
    return elapsed;
}

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
}

double time_plain() {
    const auto start = Clock::now();
    for (int i = 0; i < k_steps; ++i) {
        if (spawn_wait({"sh", "-c", "true"}) != 0) return -1;
    }
    return seconds_since(start);
}

}  // namespace

int main() {
    char pattern[] = "/tmp/sandgate-bench-run-XXXXXX";
    if (::mkdtemp(pattern) == nullptr) return 1;
    const std::filesystem::path dir(pattern);
    std::filesystem::create_directories(dir / "w");
    {
        std::ofstream out(dir / "w/bench.yml");
        out << "on: push\njobs:\n  bench:\n    runs-on: ubuntu-latest\n    steps:\n";
        for (int i = 0; i < k_steps; ++i) out << "      - run: 'true'\n        shell: sh\n";
    }
    std::vector<double> plains, offs, wraps, eaches;
    for (int round = 0; round < k_rounds; ++round) {  // interleaved: load drifts hit all four
        plains.push_back(time_plain());
        offs.push_back(time_run(dir, "off"));
        wraps.push_back(time_run(dir, "bwrap"));
        eaches.push_back(time_run(dir, "bwrap --wrap-each-step"));
        if (plains.back() < 0 || offs.back() < 0 || wraps.back() < 0 || eaches.back() < 0) {
            std::filesystem::remove_all(dir);
            return 1;
        }
    }
    const double plain = median(plains), off = median(offs), wrapped = median(wraps),
                 each = median(eaches);
    std::filesystem::remove_all(dir);
    std::printf("bench_run: one job of %d trivial steps, median of %d rounds\n", k_steps, k_rounds);
    std::printf("  100 x sh -c true:          %8.3f s  (%.2f ms each)\n", plain,
                plain * 1000 / k_steps);
    std::printf("  sandgate run --sandbox off: %8.3f s  (%.2f ms/step, %.1fx plain)\n", off,
                off * 1000 / k_steps, off / plain);
    std::printf("  sandgate run (bwrap):       %8.3f s  (%.2f ms/step, %.1fx plain, %.2fx off)\n",
                wrapped, wrapped * 1000 / k_steps, wrapped / plain, wrapped / off);
    std::printf("  ... --wrap-each-step:       %8.3f s  (%.2f ms/step, %.1fx plain, %.2fx off)\n",
                each, each * 1000 / k_steps, each / plain, each / off);
    std::printf(
        "  per-step overhead over --sandbox off: %.2f ms (the leg's sandbox), %.2f ms "
        "(a wrap per step)\n",
        (wrapped - off) * 1000 / k_steps, (each - off) * 1000 / k_steps);
    std::printf("  the leg's sandbox against --sandbox off: %.2fx (target: at most 1.5x)\n",
                wrapped / off);
    std::printf("  per-step overhead of sandgate run (bwrap) over sh -c true: %.2f ms\n",
                (wrapped - plain) * 1000 / k_steps);
    return 0;
}
