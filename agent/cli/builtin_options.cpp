#include "agent/cli/builtin_options.hpp"

#include <stdlib.h>

#include "agent/cli/units.hpp"
#include "common/temp_dir.hpp"
#include "jobs/git/git_remove.hpp"

namespace agent {

namespace fs = std::filesystem;

void add_builtin_options(CLI::App& app, BuiltinFlags& flags) {
    app.add_option("--cache-dir", flags.cache_dir,
                   "the store of the actions/cache builtin (STATE/caches)");
    app.add_option("--cache-max-entry", flags.cache_max_entry,
                   "a cache entry's archive at most, in bytes (4G)");
    app.add_option("--cache-max-total", flags.cache_max_total,
                   "the cache store at most, the oldest entries evicted beyond (10G)");
    app.add_option("--artifacts-dir", flags.artifacts_dir,
                   "the run's artifacts (REPORT.artifacts with --report, else removed at the end)");
}

BuiltinStores::~BuiltinStores() {
    if (!m_remove_at_end.empty()) (void)jobs::remove_tree(m_remove_at_end);
}

common::Expected<std::unique_ptr<BuiltinStores>> open_builtin_stores(const BuiltinFlags& flags,
                                                                     const fs::path& state_dir,
                                                                     const std::string& report) {
    jobs::CacheLimits limits;
    for (auto [flag, text, out] :
         {std::tuple{"--cache-max-entry", &flags.cache_max_entry, &limits.max_entry_bytes},
          std::tuple{"--cache-max-total", &flags.cache_max_total, &limits.max_total_bytes}}) {
        auto bytes = parse_bytes(*text);
        if (!bytes)
            return common::fail(common::ErrorKind::invalid_input,
                                std::string(flag) + ": " + bytes.error().message);
        *out = *bytes;
    }
    const fs::path cache_dir = flags.cache_dir.empty() ? jobs::CacheStore::default_dir(state_dir)
                                                       : fs::absolute(flags.cache_dir);
    auto caches = SANDGATE_TRY(jobs::CacheStore::open(cache_dir, limits));
    fs::path artifacts_dir;
    fs::path remove_at_end;
    if (!flags.artifacts_dir.empty()) {
        artifacts_dir = fs::absolute(flags.artifacts_dir);
    } else if (!report.empty()) {
        artifacts_dir = fs::absolute(report).replace_extension(".artifacts");
    } else {
        auto made = SANDGATE_TRY(common::make_host_temp_dir("sandgate-artifacts-"));
        artifacts_dir = remove_at_end = made;
    }
    // A run's artifacts are its own: what an earlier run left next to the same report goes.
    if (flags.artifacts_dir.empty() && remove_at_end.empty()) {
        SANDGATE_CHECK(jobs::remove_tree(artifacts_dir));
        std::error_code ec;
        fs::create_directories(artifacts_dir.parent_path(), ec);  // trusted path: the report's
    }
    auto artifacts = SANDGATE_TRY(jobs::ArtifactStore::open(artifacts_dir));
    return std::make_unique<BuiltinStores>(std::move(caches), std::move(artifacts),
                                           std::move(remove_at_end));
}

}  // namespace agent
