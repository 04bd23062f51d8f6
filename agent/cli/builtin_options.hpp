#pragma once
// The flags `sandgate run` and `sandgate gate` share for the cache and artifact builtins
// (jobs/builtins/step_builtins.cpp, jobs/builtins/step_artifacts.cpp), and the stores they open:
//   --cache-dir DIR           the actions/cache store (default STATE/caches)
//   --cache-max-entry BYTES   one entry's archive at most (default 4G)
//   --cache-max-total BYTES   all entries at most, the oldest evicted beyond (default 10G)
//   --artifacts-dir DIR       the run's artifacts (default: REPORT's name with `.artifacts` for
//                             its extension when --report is given, else a private directory
//                             removed when the run ends); the one next to a report is emptied
//                             when the run starts, a DIR given is used as it is

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "agent/cli/cli11.hpp"
#include "common/error.hpp"
#include "jobs/builtins/artifact_store.hpp"
#include "jobs/builtins/cache_store.hpp"

namespace agent {

struct BuiltinFlags {
    std::string cache_dir;
    std::string cache_max_entry = "4G";
    std::string cache_max_total = "10G";
    std::string artifacts_dir;
};

void add_builtin_options(CLI::App& app, BuiltinFlags& flags);

// The open stores; a private artifacts directory is removed with this object.
class BuiltinStores {
public:
    BuiltinStores(jobs::CacheStore caches, jobs::ArtifactStore artifacts,
                  std::filesystem::path remove_at_end)
        : m_caches(std::move(caches)),
          m_artifacts(std::move(artifacts)),
          m_remove_at_end(std::move(remove_at_end)) {}
    BuiltinStores(const BuiltinStores&) = delete;
    BuiltinStores& operator=(const BuiltinStores&) = delete;
    ~BuiltinStores();
    jobs::CacheStore& caches() { return m_caches; }
    jobs::ArtifactStore& artifacts() { return m_artifacts; }

private:
    jobs::CacheStore m_caches;
    jobs::ArtifactStore m_artifacts;
    std::filesystem::path m_remove_at_end;
};

// invalid_input naming the flag when a size is malformed; the stores' errors otherwise.
common::Expected<std::unique_ptr<BuiltinStores>> open_builtin_stores(
    const BuiltinFlags& flags, const std::filesystem::path& state_dir, const std::string& report);

}  // namespace agent
