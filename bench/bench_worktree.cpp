// Worktree materialisation from a warm mirror (libgit2: standalone repository with
// alternates, checkout at the commit, index written) against `git worktree add --detach` and
// `git clone --local` + checkout of the same commit, on a generated repository of 6,000 files.
// Prints medians and ratios (sandgate / git; below 1.0 is faster). Target: <= 1.0.
#include <git2.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "jobs/git/git_handles.hpp"
#include "jobs/git/git_mirror.hpp"
#include "jobs/git/git_remove.hpp"
#include "jobs/git/git_worktree.hpp"

namespace fs = std::filesystem;

namespace {

constexpr int k_dirs = 120;
constexpr int k_files_per_dir = 50;
constexpr int k_runs = 3;

void run(const std::string& command) {
    const std::string full =
        "GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_AUTHOR_NAME=b "
        "GIT_AUTHOR_EMAIL=b@x GIT_COMMITTER_NAME=b GIT_COMMITTER_EMAIL=b@x " +
        command;
    if (std::system(full.c_str()) != 0) {
        std::fprintf(stderr, "bench: command failed: %s\n", command.c_str());
        std::exit(1);
    }
}

std::string generate(const fs::path& repo) {
    run("git init -q -b main " + repo.string());
    for (int d = 0; d < k_dirs; ++d) {
        const fs::path dir = repo / ("module" + std::to_string(d));
        fs::create_directories(dir);
        for (int f = 0; f < k_files_per_dir; ++f) {
            std::ofstream out(dir / ("file" + std::to_string(f) + ".cpp"));
            for (int line = 0; line < 20 + (f * 7 + d) % 60; ++line)
                out << "int function_" << d << "_" << f << "_" << line << "() { return " << line * d
                    << "; }\n";
        }
    }
    run("cd " + repo.string() + " && git add -A && git commit -q -m generated");
    return "";
}

double median_ms(const std::function<void(const fs::path&)>& make, const fs::path& base,
                 const std::function<void(const fs::path&)>& clean) {
    std::vector<double> times;
    for (int i = 0; i < k_runs; ++i) {
        const fs::path target = base / ("run" + std::to_string(i));
        const auto start = std::chrono::steady_clock::now();
        make(target);
        const auto end = std::chrono::steady_clock::now();
        times.push_back(std::chrono::duration<double, std::milli>(end - start).count());
        clean(target);
    }
    std::ranges::sort(times);
    return times[times.size() / 2];
}

}  // namespace

int main() {
    char pattern[] = "/tmp/sandgate-bench-worktree-XXXXXX";
    if (::mkdtemp(pattern) == nullptr) return 1;
    const fs::path dir = pattern;
    generate(dir / "origin");
    const std::string sha_text = [&] {
        FILE* pipe =
            ::popen(("git -C " + (dir / "origin").string() + " rev-parse HEAD").c_str(), "r");
        char buffer[64] = {};
        if (std::fgets(buffer, sizeof buffer, pipe) == nullptr) std::exit(1);
        ::pclose(pipe);
        return std::string(buffer, 40);
    }();

    const jobs::MirrorCache cache(dir / "state");
    jobs::MirrorRequest request;
    request.remote = (dir / "origin").string();
    request.sha = sha_text;
    auto mirror = cache.ensure_commit(request);
    if (!mirror) {
        std::fprintf(stderr, "bench: %s\n", mirror.error().message.c_str());
        return 1;
    }
    // git's baselines get their own copy so `worktree add` does not touch sandgate's mirror.
    run("git clone -q --mirror " + mirror->gitdir.string() + " " +
        (dir / "gitmirror.git").string());
    fs::create_directories(dir / "out");

    const double sandgate_ms = median_ms(
        [&](const fs::path& target) {
            jobs::WorktreeSpec spec;
            spec.mirror_gitdir = mirror->gitdir;
            spec.commit = mirror->commit;
            spec.path = target;
            if (auto made = jobs::materialise_worktree(spec); !made) {
                std::fprintf(stderr, "bench: %s\n", made.error().message.c_str());
                std::exit(1);
            }
        },
        dir / "out", [](const fs::path& target) { (void)jobs::remove_tree(target); });
    const double worktree_ms = median_ms(
        [&](const fs::path& target) {
            run("git -C " + (dir / "gitmirror.git").string() + " worktree add -q --detach " +
                target.string() + " " + sha_text);
        },
        dir / "out",
        [&](const fs::path& target) {
            run("git -C " + (dir / "gitmirror.git").string() + " worktree remove --force " +
                target.string());
        });
    const double clone_ms = median_ms(
        [&](const fs::path& target) {
            run("git clone -q --local --no-checkout " + (dir / "gitmirror.git").string() + " " +
                target.string() + " && git -C " + target.string() + " checkout -q --detach " +
                sha_text);
        },
        dir / "out", [](const fs::path& target) { (void)jobs::remove_tree(target); });

    // Removal of a full worktree, against rm -rf.
    std::vector<double> ours, rm;
    for (int i = 0; i < k_runs; ++i) {
        jobs::WorktreeSpec spec;
        spec.mirror_gitdir = mirror->gitdir;
        spec.commit = mirror->commit;
        spec.path = dir / "out/rm";
        (void)jobs::materialise_worktree(spec);
        auto start = std::chrono::steady_clock::now();
        (void)jobs::remove_tree(spec.path);
        ours.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count());
        (void)jobs::materialise_worktree(spec);
        start = std::chrono::steady_clock::now();
        run("rm -rf " + spec.path.string());
        rm.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count());
    }
    std::ranges::sort(ours);
    std::ranges::sort(rm);

    std::printf("bench_worktree: %d files, median of %d runs\n", k_dirs * k_files_per_dir, k_runs);
    std::printf("  sandgate worktree (alternates + libgit2 checkout): %8.1f ms\n", sandgate_ms);
    std::printf("  git worktree add --detach:                         %8.1f ms\n", worktree_ms);
    std::printf("  git clone --local + checkout:                      %8.1f ms\n", clone_ms);
    std::printf("  ratio vs git worktree add:  %.2fx\n", sandgate_ms / worktree_ms);
    std::printf("  ratio vs git clone --local: %.2fx\n", sandgate_ms / clone_ms);
    std::printf("  removal: remove_tree %.1f ms vs rm -rf %.1f ms (%.2fx)\n", ours[k_runs / 2],
                rm[k_runs / 2], ours[k_runs / 2] / rm[k_runs / 2]);
    (void)jobs::remove_tree(dir);
    return 0;
}
