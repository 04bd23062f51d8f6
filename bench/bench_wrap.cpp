// Per-spawn cost of the wrap: `sandgate exec --sandbox bwrap -- true` against `--sandbox off`,
// against a raw bwrap started with exactly the options sandgate's plan gives it (the same
// mounts, generated /etc files, namespaces, uid map and seccomp BPF, through the same --args
// fd), against a minimal raw bwrap with the same namespaces, and against
// `firejail --noprofile --net=none` when firejail is installed. Rounds interleave the variants
// so that machine noise hits them alike; the figures are medians, printed as ratios from this
// one run. Target: sandgate's wrap within 1.2x of raw bwrap with the same options.
// The raw arm makes its network namespace itself (--unshare-net), as a plain bwrap user would;
// `sandgate exec` run as root makes it on a second thread while it parses and plans
// (sandbox/wrap/netns.hpp) and starts bwrap in it with --share-net, its only other option change.
// `sandgate exec` returns only once nothing of the sandbox runs any more (it adopts bwrap's
// pid 1 and reaps it, which the kernel allows only after every other process of the namespace
// is gone; with cgroup2 limits, their leaf is empty and removed too), while raw
// bwrap returns as soon as the payload's status is out and leaves its pid 1 tearing the
// namespaces down. The bench is a subreaper, so that pid 1 comes back to it: one more variant
// times raw bwrap until that teardown is over too, the like-for-like figure. The in-process
// "no cgroup" variant differs from the default only where the run's limits need a leaf
// (a delegated pids or memory controller): under the wrap no leaf is made otherwise.
// Besides wall-clock time, each variant's CPU time (user + system, the whole process tree, from
// wait4's rusage) is printed: on a shared, loaded machine it is the steadier figure, since wall
// time there mostly measures how long each wake-up waits for a core. Only the variants that
// wait for bwrap's pid 1 (sandgate exec and the torn-down raw one) count its CPU, which is
// most of the sandbox's setup; the CPU ratio compares those two.
// Two more: `true` with a 2000-file tree as its writable working directory (as root, the walk
// that gives the writable trees to the sandbox's host identity, sandbox/wrap/identity.hpp), and,
// given another sandgate binary (`bench_wrap ROUNDS /work/main/build/sandgate`, or
// $SANDGATE_BENCH_BASELINE), both runs by that binary too: this version against an older one.
#include <fcntl.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sandbox/wrap/probe.hpp"
#include "sandbox/wrap/wrap.hpp"
#include "tests/support/numbers.hpp"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

struct Variant {
    std::string name;
    std::vector<std::string> argv;
    std::vector<double> samples_ms;
    std::vector<int> fds;  // become fds 3, 4, ... of the child (rewound before each spawn)
    std::optional<sandbox::RunRequest> in_process;  // timed through sandbox::run instead
    std::vector<double> cpu_ms;                     // user + system of the whole tree
    bool until_tree_gone = false;  // also time the reaping of the orphans it left (its pid 1)
};

// One sandbox::run of the request, in this process (the agent's own path: no CLI start-up,
// the per-process caches warm); milliseconds, or -1 on failure.
double cpu_of(const rusage& usage) {
    const auto ms = [](const timeval& tv) { return tv.tv_sec * 1e3 + tv.tv_usec / 1e3; };
    return ms(usage.ru_utime) + ms(usage.ru_stime);
}

// This process's CPU plus that of its reaped descendants, in ms.
double own_and_children_cpu() {
    rusage self{}, children{};
    ::getrusage(RUSAGE_SELF, &self);
    ::getrusage(RUSAGE_CHILDREN, &children);
    return cpu_of(self) + cpu_of(children);
}

struct Timing {
    double wall_ms = -1;
    double cpu_ms = 0;
};

double reap_orphans();

Timing time_run(const sandbox::RunRequest& request) {
    reap_orphans();
    const double cpu_start = own_and_children_cpu();
    const auto start = Clock::now();
    const auto result = sandbox::run(request);
    const auto elapsed = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    if (result.exit_status() != 0) return {};
    return {elapsed, own_and_children_cpu() - cpu_start};
}

Timing time_variant(const Variant& variant);

// The read end of the plan's bwrap status pipe, drained after each raw run (bwrap writes a
// few hundred bytes there per run).
int g_status_fd = -1;

void drain_status() {
    char buffer[4096];
    while (g_status_fd >= 0 && ::read(g_status_fd, buffer, sizeof buffer) > 0) {
    }
}

// Waits for every orphan re-parented to this process (the bench is a subreaper); returns their
// CPU (bwrap's pid 1 does the sandbox's setup and teardown).
double reap_orphans() {
    double cpu_ms = 0;
    for (;;) {
        rusage usage{};
        const pid_t pid = ::wait4(-1, nullptr, __WALL, &usage);
        if (pid > 0)
            cpu_ms += cpu_of(usage);
        else if (errno != EINTR)
            return cpu_ms;
    }
}

// One spawn-and-wait of argv, its output to /dev/null; wall_ms -1 on failure.
Timing time_once(const std::vector<std::string>& argv, const std::vector<int>& fds = {},
                 bool until_tree_gone = false) {
    std::vector<char*> args;
    for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    for (std::size_t i = 0; i < fds.size(); ++i) {
        ::lseek(fds[i], 0, SEEK_SET);  // dup'ed fds share the offset bwrap read to the end
        posix_spawn_file_actions_adddup2(&actions, fds[i], 3 + static_cast<int>(i));
    }
    reap_orphans();  // what earlier runs left (the in-process ones' pid 1) is not this run's
    const auto start = Clock::now();
    pid_t pid = 0;
    const int rc = ::posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) return {};
    int status = 0;
    rusage usage{};
    ::wait4(pid, &status, 0, &usage);  // the child's and its reaped descendants' CPU
    const double orphans_cpu = until_tree_gone ? reap_orphans() : 0;
    const auto elapsed = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    reap_orphans();  // untimed for the others: no zombie is left for the next round
    drain_status();
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return {};
    return {elapsed, cpu_of(usage) + orphans_cpu};
}

Timing time_variant(const Variant& variant) {
    if (variant.in_process) return time_run(*variant.in_process);
    if (variant.argv.empty()) return {};
    return time_once(variant.argv, variant.fds, variant.until_tree_gone);
}

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values.empty() ? 0 : values[values.size() / 2];
}

// The plan sandgate makes for `true` here, to start bwrap with exactly its options. The plan
// (and its scratch) lives for the whole bench.
sandbox::RunRequest true_request(const std::string& cwd) {
    sandbox::RunRequest request;
    request.argv = {"true"};
    request.cwd = cwd;
    request.env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"}};
    return request;
}

std::optional<sandbox::WrapPlan> same_plan(const std::string& cwd) {
    auto plan = sandbox::plan_wrap(true_request(cwd));
    if (!plan) {
        std::fprintf(stderr, "bench_wrap: no plan: %s\n", plan.error().message.c_str());
        return std::nullopt;
    }
    return std::move(*plan);
}

std::vector<std::string> raw_bwrap(const std::string& bwrap, const std::string& cwd) {
    std::vector<std::string> argv = {bwrap, "--ro-bind", "/usr", "/usr"};
    for (const char* name : {"bin", "sbin", "lib", "lib32", "lib64"}) {
        const auto top = std::filesystem::path("/") / name;
        std::error_code ec;
        if (std::filesystem::is_symlink(top, ec))
            argv.insert(argv.end(), {"--symlink", std::filesystem::read_symlink(top, ec).string(),
                                     top.string()});
    }
    argv.insert(argv.end(), {"--proc",
                             "/proc",
                             "--dev",
                             "/dev",
                             "--tmpfs",
                             "/tmp",
                             "--bind",
                             cwd,
                             cwd,
                             "--remount-ro",
                             "/",
                             "--unshare-all",
                             "--unshare-user",
                             "--uid",
                             "1000",
                             "--gid",
                             "1000",
                             "--disable-userns",
                             "--die-with-parent",
                             "--new-session",
                             "--cap-drop",
                             "ALL",
                             "--clearenv",
                             "--setenv",
                             "PATH",
                             "/usr/bin:/bin",
                             "--chdir",
                             cwd,
                             "--",
                             "true"});
    return argv;
}

constexpr int k_tree_files = 2000;

// A fresh tree of k_tree_files small files in 20 directories (a small worktree), for runs
// whose working directory it is.
std::string make_tree() {
    char pattern[] = "/tmp/sandgate-bench-wrap-XXXXXX";
    const char* made = ::mkdtemp(pattern);
    if (made == nullptr) return "/tmp";
    const std::filesystem::path root = made;
    for (int d = 0; d < 20; ++d) {
        const auto dir = root / ("d" + std::to_string(d));
        std::filesystem::create_directory(dir);
        for (int f = 0; f < k_tree_files / 20; ++f) {
            const int fd = ::open((dir / ("f" + std::to_string(f))).c_str(),
                                  O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
            if (fd >= 0) ::close(fd);
        }
    }
    ::chmod(made, 0755);
    return root.string();
}

std::vector<std::string> exec_in_tree(const std::string& sandgate, const std::string& tree) {
    return {sandgate, "exec", "--sandbox", "bwrap", "--cwd", tree, "--", "true"};
}

}  // namespace

int main(int argc, char** argv) {
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);  // raw bwrap's pid 1 outlives bwrap: it comes back here
    // 150 rounds: at 60 the ratio moved by +-3% from run to run, more than the effects it
    // is meant to show.
    const int rounds = argc > 1 ? tests::to_number<int>(argv[1]).value_or(150) : 150;
    const std::string sandgate = SANDGATE_BINARY;
    char cwd_buffer[4096];
    const std::string cwd = ::getcwd(cwd_buffer, sizeof cwd_buffer) ? cwd_buffer : "/";
    auto bwrap = sandbox::find_bwrap();
    if (!bwrap) {
        std::fprintf(stderr, "bench_wrap: %s\n", bwrap.error().message.c_str());
        return 1;
    }
    std::vector<Variant> variants = {
        {"sandgate exec --sandbox off -- true",
         {sandgate, "exec", "--sandbox", "off", "--", "true"},
         {},
         {},
         {},
         {}},
        {"sandgate exec --sandbox bwrap -- true",
         {sandgate, "exec", "--sandbox", "bwrap", "--", "true"},
         {},
         {},
         {},
         {}},
        {"raw bwrap, sandgate's options, true", {}, {}, {}, {}, {}},
        {"raw bwrap, minimal, same namespaces", raw_bwrap(bwrap->string(), cwd), {}, {}, {}, {}},
        {"sandbox::run in-process, bwrap, true", {}, {}, {}, true_request(cwd), {}},
        {"sandbox::run in-process, bwrap, no cgroup", {}, {}, {}, true_request(cwd), {}},
    };
    variants.back().in_process->cgroup = sandbox::CgroupUse::never;
    auto plan = same_plan(cwd);
    if (plan) {
        variants[2].argv = plan->argv;
        for (const auto& fd : plan->inherited_fds) variants[2].fds.push_back(fd.get());
        g_status_fd = plan->status.get();
        Variant gone = variants[2];
        gone.name = "raw bwrap, same options, until torn down";
        gone.until_tree_gone = true;
        variants.push_back(std::move(gone));
    }
    // The cost of the host identity (as root: the drop, the walk that gives the writable trees
    // to it, the portal): `true` in a writable tree of k_tree_files files, and, given another
    // sandgate binary (argv[2] or $SANDGATE_BENCH_BASELINE, e.g. main's), the same two runs by
    // it in this very run, so that the ratios compare like with like.
    const auto tree = make_tree();
    variants.push_back(
        {"sandgate exec bwrap, --cwd tree", exec_in_tree(sandgate, tree), {}, {}, {}, {}});
    const char* baseline_env = std::getenv("SANDGATE_BENCH_BASELINE");
    const std::string baseline = argc > 2 ? argv[2] : baseline_env != nullptr ? baseline_env : "";
    if (!baseline.empty()) {
        variants.push_back({"baseline exec --sandbox bwrap -- true",
                            {baseline, "exec", "--sandbox", "bwrap", "--", "true"},
                            {},
                            {},
                            {},
                            {}});
        variants.push_back(
            {"baseline exec bwrap, --cwd tree", exec_in_tree(baseline, tree), {}, {}, {}, {}});
    }
    const auto firejail = sandbox::find_on_path("firejail", sandbox::host_path_list());
    if (firejail)
        variants.push_back({"firejail --noprofile --net=none true",
                            {firejail->string(), "--quiet", "--noprofile", "--net=none", "true"},
                            {},
                            {},
                            {},
                            {}});
    for (auto& variant : variants) {  // warm-up, and a check that each variant works here
        if (time_variant(variant).wall_ms < 0) {
            std::fprintf(stderr, "bench_wrap: `%s` fails here; leaving it out\n",
                         variant.name.c_str());
            variant.argv.clear();
            variant.in_process.reset();
        }
    }
    for (int round = 0; round < rounds; ++round) {
        for (auto& variant : variants) {
            if (variant.argv.empty() && !variant.in_process) continue;
            const Timing timing = time_variant(variant);
            if (timing.wall_ms < 0) continue;
            variant.samples_ms.push_back(timing.wall_ms);
            variant.cpu_ms.push_back(timing.cpu_ms);
        }
    }
    // The median of the variant whose name starts with `prefix` (0 when it did not run).
    const auto med = [&](std::string_view prefix, bool cpu = false) {
        for (const auto& variant : variants)
            if (variant.name.starts_with(prefix) && !variant.samples_ms.empty())
                return median(cpu ? variant.cpu_ms : variant.samples_ms);
        return 0.0;
    };
    const double wrap = med("sandgate exec --sandbox bwrap");
    const double same = med("raw bwrap, sandgate's options");
    const double gone = med("raw bwrap, same options, until");
    std::printf("bench_wrap: %d rounds, median per spawn: wall, CPU of the whole tree (ms)\n",
                rounds);
    for (const auto& variant : variants) {
        if (variant.samples_ms.empty()) continue;
        std::printf("  %-42s %8.2f ms %8.2f ms CPU\n", variant.name.c_str(),
                    median(variant.samples_ms), median(variant.cpu_ms));
    }
    std::printf("ratios:\n");
    std::printf("  sandgate bwrap / sandgate off           %6.2fx\n",
                wrap / med("sandgate exec --sandbox off"));
    if (same > 0) {
        std::printf("  sandgate bwrap / raw bwrap, same options %6.2fx  (target <= 1.20x)\n",
                    wrap / same);
        // The ratio moves with the machine's speed (the difference is a fixed cost): both.
        std::printf("    sandgate's own cost per run            %6.2f ms\n", wrap - same);
    }
    if (gone > 0) {
        std::printf(
            "  sandgate bwrap / raw bwrap torn down     %6.2fx  (both until the sandbox is gone)\n",
            wrap / gone);
        // Both count bwrap's pid 1 (which sandgate adopts and reaps), the raw one does not.
        std::printf("    the same in CPU time                   %6.2fx\n",
                    med("sandgate exec --sandbox bwrap", true) /
                        med("raw bwrap, same options, until", true));
    }
    std::printf("  sandgate bwrap / raw bwrap, minimal      %6.2fx\n",
                wrap / med("raw bwrap, minimal"));
    const double in_process = med("sandbox::run in-process, bwrap, true");
    if (same > 0 && in_process > 0)
        std::printf(
            "  sandbox::run bwrap / raw bwrap, same     %6.2fx  (the agent's path; CPU %.2fx)\n",
            in_process / same,
            med("sandbox::run in-process, bwrap, true", true) /
                med("raw bwrap, sandgate's options", true));
    const double in_tree = med("sandgate exec bwrap, --cwd tree");
    if (in_tree > 0)
        std::printf(
            "  sandgate bwrap in a %d-file tree / in cwd  %6.2fx  (%+.2f ms: the walk giving it "
            "away)\n",
            k_tree_files, in_tree / wrap, in_tree - wrap);
    if (const double old_wrap = med("baseline exec --sandbox bwrap"); old_wrap > 0) {
        std::printf("  sandgate bwrap / baseline binary's       %6.2fx  (%+.2f ms; CPU %.2fx)\n",
                    wrap / old_wrap, wrap - old_wrap,
                    med("sandgate exec --sandbox bwrap", true) /
                        med("baseline exec --sandbox bwrap", true));
        if (const double old_tree = med("baseline exec bwrap, --cwd tree");
            old_tree > 0 && in_tree > 0)
            std::printf("  the same in a %d-file tree               %6.2fx  (%+.2f ms)\n",
                        k_tree_files, in_tree / old_tree, in_tree - old_tree);
    } else {
        std::printf("  baseline binary: none (bench_wrap ROUNDS /path/to/other/sandgate)\n");
    }
    if (const double firejail_ms = med("firejail"); firejail_ms > 0)
        std::printf("  sandgate bwrap / firejail                %6.2fx\n", wrap / firejail_ms);
    else
        std::printf("  firejail: not installed (or fails here)\n");
    std::error_code ec;
    if (tree != "/tmp") std::filesystem::remove_all(tree, ec);
    return 0;
}
