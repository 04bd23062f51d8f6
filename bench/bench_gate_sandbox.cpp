// bench_gate_sandbox: one `sandgate gate` job of 30 small steps, as the agent runs it with
// job.persistent_sandbox true (a job sandbox made once by agent::SandboxManager, every step an
// exec request to its broker) against false (a fresh bwrap per step), both measured in this
// run, interleaved, medians of 3; and, as the floor, the gate with no wrap at all
// (--sandbox off); and the gate run by hand, whose job legs get a sandbox each
// (agent/sandboxes/leg_sandboxes.hpp; issue 23's target: within 1.5x of --sandbox off). The
// job-sandbox figure includes creating and destroying the sandbox, as the daemon does per job.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "agent/sandboxes/sandbox_manager.hpp"
#include "jobs/git/git_mirror.hpp"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int k_steps = 30;
constexpr int k_rounds = 3;

int shell(const std::string& command) {
    const int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A repository whose gate workflow checks out and runs k_steps trivial steps; returns its SHA.
std::string make_repo(const std::filesystem::path& repo) {
    std::filesystem::create_directories(repo / ".github/workflows");
    std::ofstream workflow(repo / ".github/workflows/gate.yml");
    workflow << "on: merge_group\njobs:\n  gate:\n    runs-on: ubuntu-latest\n    steps:\n"
                "      - uses: actions/checkout@v4\n";
    for (int i = 0; i < k_steps; ++i) workflow << "      - run: test -f app.txt\n";
    workflow.close();
    std::ofstream(repo / "app.txt") << "app\n";
    const std::string git =
        "git -C " + repo.string() + " -c user.name=b -c user.email=b@example.com ";
    if (shell("git init -q -b main " + repo.string() + " && " + git + "add -A && " + git +
              "commit -q -m app") != 0)
        return "";
    const auto head = repo / ".head";
    shell("git -C " + repo.string() + " rev-parse HEAD > " + head.string());
    std::string sha;
    std::ifstream(head) >> sha;
    return sha;
}

double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string gate_command(const std::filesystem::path& repo, const std::string& sha,
                         const std::filesystem::path& state, const char* mode = "bwrap",
                         const char* extra = "") {
    return std::string(SANDGATE_BINARY) + " gate --sandbox " + mode + " " + extra + " --repo " +
           repo.string() + " --sha " + sha + " --state-dir " + state.string() + " >/dev/null 2>&1";
}

// Today's per-step wrap: the gate run as the daemon runs it with persistent_sandbox false.
double per_step(const std::filesystem::path& repo, const std::string& sha,
                const std::filesystem::path& state) {
    const auto start = Clock::now();
    if (shell(gate_command(repo, sha, state, "bwrap", "--wrap-each-step")) != 0) return -1;
    return seconds_since(start);
}

// By hand: each job leg in a sandbox of its own.
double per_leg(const std::filesystem::path& repo, const std::string& sha,
               const std::filesystem::path& state) {
    const auto start = Clock::now();
    if (shell(gate_command(repo, sha, state)) != 0) return -1;
    return seconds_since(start);
}

double unwrapped(const std::filesystem::path& repo, const std::string& sha,
                 const std::filesystem::path& state) {
    const auto start = Clock::now();
    if (shell(gate_command(repo, sha, state, "off")) != 0) return -1;
    return seconds_since(start);
}

// The job sandbox: created, the gate run in it, destroyed (the workspace removed).
double job_sandbox(const std::filesystem::path& repo, const std::string& sha,
                   const std::filesystem::path& state, int round) {
    const auto start = Clock::now();
    const auto workspace = state / "agent" / "work" / std::to_string(round);
    std::filesystem::create_directories(workspace / "tmp");
    agent::SandboxManager manager({state, SANDGATE_BINARY, nullptr, std::chrono::seconds(30)});
    agent::SandboxIdentity identity{"bench/gate", sha, round, 1, "gate"};
    agent::SandboxOptions options;
    auto scope = jobs::MirrorCache(state).scope_dir(repo.string());  // as the daemon binds it
    if (!scope) {
        std::fprintf(stderr, "mirror scope: %s\n", scope.error().message.c_str());
        return -1;
    }
    options.policy.read_only.push_back(*scope);
    options.worktree = workspace;
    auto box = manager.create(identity, options);
    if (!box) {
        std::fprintf(stderr, "sandbox: %s\n", box.error().message.c_str());
        return -1;
    }
    const std::string env = "SANDGATE_BROKER_SOCKET=" + box->socket.string() +
                            " SANDGATE_BROKER_IDENTITY='" + identity.canonical() +
                            "' SANDGATE_JOB_WORKSPACE=" + workspace.string() + " ";
    const int status = shell(env + gate_command(repo, sha, state));
    (void)manager.destroy(box->id);
    std::filesystem::remove_all(workspace);
    return status == 0 ? seconds_since(start) : -1;
}

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
}

}  // namespace

int main() {
    char pattern[] = "/tmp/sandgate-bench-gate-sandbox-XXXXXX";
    const std::filesystem::path dir = ::mkdtemp(pattern);
    const auto repo = dir / "repo";
    const std::string sha = make_repo(repo);
    std::filesystem::create_directories(dir / "state" / "mirrors");
    const auto state = std::filesystem::canonical(dir / "state");
    // Warm the mirror (both paths fetch nothing afterwards).
    if (sha.empty() || per_step(repo, sha, state) < 0) {
        std::fprintf(stderr, "bench_gate_sandbox: the warm-up gate failed\n");
        return 1;
    }
    std::vector<double> fresh, persistent, off, legs;
    for (int round = 1; round <= k_rounds; ++round) {
        fresh.push_back(per_step(repo, sha, state));
        persistent.push_back(job_sandbox(repo, sha, state, round));
        off.push_back(unwrapped(repo, sha, state));
        legs.push_back(per_leg(repo, sha, state));
        if (fresh.back() < 0 || persistent.back() < 0 || off.back() < 0 || legs.back() < 0) {
            std::fprintf(stderr, "bench_gate_sandbox: a gate failed\n");
            return 1;
        }
    }
    const double a = median(fresh), b = median(persistent), c = median(off), d = median(legs);
    std::printf(
        "gate job of %d steps (median of %d): fresh bwrap per step %.3f s (%.1f ms/step), "
        "one job sandbox %.3f s (%.1f ms/step, its creation and teardown included)\n",
        k_steps, k_rounds, a, a * 1000 / k_steps, b, b * 1000 / k_steps);
    std::printf("no wrap (--sandbox off): %.3f s (%.1f ms/step)\n", c, c * 1000 / k_steps);
    std::printf("per-step wrap / job sandbox = %.2fx; job sandbox / no wrap = %.2fx\n", a / b,
                b / c);
    std::printf(
        "by hand, a sandbox per leg: %.3f s (%.1f ms/step), %.2fx no wrap (target: at "
        "most 1.5x)\n",
        d, d * 1000 / k_steps, d / c);
    std::filesystem::remove_all(dir);
    return 0;
}
