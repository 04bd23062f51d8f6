// bench_run: a workflow of 100 trivial steps (`run: true`) through `sandgate run`, under the
// wrap (--sandbox bwrap) and with --sandbox off, against 100 plain `sh -c true` spawned in
// the same run. Prints the per-step overhead and the ratios.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

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
        std::fprintf(stderr, "bench_run: sandgate run --sandbox %s failed (status %d)\n", sandbox.c_str(), status);
        return -1;
    }
    return elapsed;
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
    const auto start = Clock::now();
    for (int i = 0; i < k_steps; ++i) spawn_wait({"sh", "-c", "true"});
    const double plain = seconds_since(start);
    const double off = time_run(dir, "off");
    const double wrapped = time_run(dir, "bwrap");
    std::filesystem::remove_all(dir);
    std::printf("bench_run: %d trivial steps\n", k_steps);
    std::printf("  100 x sh -c true:          %8.3f s  (%.2f ms each)\n", plain, plain * 1000 / k_steps);
    if (off > 0)
        std::printf("  sandgate run --sandbox off: %8.3f s  (%.2f ms/step, %.1fx plain)\n", off, off * 1000 / k_steps,
                    off / plain);
    if (wrapped > 0)
        std::printf("  sandgate run (bwrap):       %8.3f s  (%.2f ms/step, %.1fx plain, %.1fx off)\n", wrapped,
                    wrapped * 1000 / k_steps, wrapped / plain, off > 0 ? wrapped / off : 0.0);
    if (off > 0 && wrapped > 0)
        std::printf("  per-step overhead of the wrap: %.2f ms\n", (wrapped - off) * 1000 / k_steps);
    return off > 0 ? 0 : 1;
}
