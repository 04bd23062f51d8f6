// Action resolution of a fully cached workflow (issue 23's target: well under 50 ms): the five
// real actions of ../shared/corpora/actions in the runner's archive layout (copied, with their
// tags pinned), a workflow using each by tag, resolved by a fresh resolver per run as
// `sandgate run` does before its jobs start. The first run unpacks the trees (cold); the
// median of the rest is the cached figure.
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "jobs/actions/action_resolve.hpp"
#include "jobs/git/git_remove.hpp"
#include "jobs/workflow/workflow_model.hpp"

namespace fs = std::filesystem;

int main() {
    const fs::path corpus = fs::path(SANDGATE_SHARED_DIR) / "corpora/actions/archive-cache";
    std::string pattern = (fs::temp_directory_path() / "sandgate-bench-actions-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) return 1;
    const fs::path dir(pattern);
    fs::copy(corpus, dir / "archives", fs::copy_options::recursive);
    struct Pin {
        const char* owner;
        const char* repo;
        const char* tag;
        const char* sha;
    };
    const std::vector<Pin> pins{
        {"actions", "setup-python", "v7", "5fda3b95a4ea91299a34e894583c3862153e4b97"},
        {"actions", "setup-node", "v7", "820762786026740c76f36085b0efc47a31fe5020"},
        {"actions", "setup-go", "v7", "b7ad1dad31e06c5925ef5d2fc7ad053ef454303e"},
        {"actions", "cache", "v5", "27d5ce7f107fe9357f9df03efb73ab90386fccae"},
        {"dtolnay", "rust-toolchain", "v1", "e97e2d8cc328f1b50210efc529dca0028893a2d9"},
    };
    const jobs::ActionStore store({dir / "archives", dir / "work"});
    std::string text =
        "on: push\njobs:\n  build:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: "
        "actions/checkout@v4\n";
    for (const auto& pin : pins) {
        fs::permissions(dir / "archives" / (std::string(pin.owner) + "_" + pin.repo),
                        fs::perms::owner_all, fs::perm_options::add);
        if (!store.pin(jobs::ActionRef{pin.owner, pin.repo, "", pin.tag}, pin.sha)) return 1;
        text += std::string("      - uses: ") + pin.owner + "/" + pin.repo + "@" + pin.tag + "\n";
    }
    auto workflow = jobs::parse_workflow(text, "w.yml");
    if (!workflow) return 1;
    const std::vector<jobs::Workflow> workflows{*workflow};
    std::vector<double> times;
    for (int run = 0; run < 41; ++run) {
        auto source = jobs::ActionSource::parse("none");
        jobs::ActionResolver resolver(store, *source, jobs::ResolveOptions{});
        const auto started = std::chrono::steady_clock::now();
        resolver.resolve_workflows(workflows, dir);
        times.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
                .count());
        for (const auto& entry : resolver.lock())
            if (!entry.error.empty()) {
                std::fprintf(stderr, "bench_actions: %s\n", entry.error.c_str());
                return 1;
            }
    }
    const double cold = times.front();
    std::vector<double> warm(times.begin() + 1, times.end());
    std::ranges::sort(warm);
    std::printf(
        "resolve a cached workflow (5 actions by tag): cold (unpacking) %.1f ms, cached median "
        "%.2f ms, "
        "max %.2f ms (target < 50 ms)\n",
        cold, warm[warm.size() / 2], warm.back());
    (void)jobs::remove_tree(dir);
    return warm[warm.size() / 2] < 50.0 ? 0 : 1;
}
