#pragma once
// The wrapped command's private scratch (HOME, TMPDIR, XDG_* and the toolchain homes point
// into it) and the cache-only toolchain environment of ../shared/docs/offline-toolchains.md.
//
// A warm toolchain cache (--toolchain-cache DIR) is laid out by tool, as a trusted step filled
// it (only these directories are ever read; anything else in DIR, credentials included, is
// ignored):
//   DIR/cargo/registry, DIR/cargo/git    copied into the per-run CARGO_HOME
//   DIR/npm/_cacache                     copied into the per-run npm cache
//   DIR/yarn/cache                       copied into the per-run YARN_CACHE_FOLDER
//   DIR/go/mod                           copied into the per-run GOMODCACHE
//   DIR/m2/repository                    copied into the per-run ~/.m2/repository
//   DIR/gradle/caches, DIR/gradle/wrapper/dists   copied into the per-run GRADLE_USER_HOME
//   DIR/nuget/packages                   copied into the per-run NUGET_PACKAGES
//   DIR/pnpm/store                       used in place (bound read-only), pnpm copies from it
//   DIR/pip/wheelhouse                   used in place (bound read-only) as PIP_FIND_LINKS
// Copies make the cache impossible to poison from inside a run (a hard link or an in-place
// write would reach the shared files). Inside the wrap only these directories are bound
// (read-only, at their own paths), never DIR itself: whatever else DIR holds
// (`--toolchain-cache ~/.cargo` has credentials.toml) stays out of sight.

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "sandbox/access/safe_access.hpp"
#include "sandbox/base.hpp"
#include "sandbox/process/run.hpp"

namespace sandbox {

struct ScratchLayout {
    std::filesystem::path root;
    std::filesystem::path home;  // root/home
    std::filesystem::path tmp;   // root/tmp: TMPDIR
};

ScratchLayout scratch_layout(const std::filesystem::path& root);

// Creates root (if missing), home and tmp beneath it, mode 0700 where created, each given to
// `owner` when set (the sandbox's host identity). Returns the home when it was made now (a
// fresh scratch, to be seeded), nullopt when it existed: a scratch is seeded once, before its
// first run, never again through paths a step of that run could have replaced. An existing
// home or tmp that is not a real directory (a step left a link) is an error.
Expected<std::optional<SafeDir>> create_scratch(const ScratchLayout& layout,
                                                const std::optional<Owner>& owner);

// The allowlisted directories of `cache` that exist, as the wrap binds them (read-only).
std::vector<std::filesystem::path> toolchain_cache_binds(const std::filesystem::path& cache);

// Whether the policy asks for the cache-only environment (automatic: when network is none and
// no egress is allowed; under --network allowlist the tools fetch through the proxy).
bool offline_enabled(const Policy& policy);

enum class OfflineEnv { off, on };

// The wrapped command's environment: `base` (the request's), with the wrap's own variables
// winning: HOME, TMPDIR/TMP/TEMP, XDG_*, USER/LOGNAME, the toolchain homes, and when
// `offline` is on the cache-only switches. `cache` is the bound toolchain cache, if any.
Environment wrapped_environment(const Environment& base, const ScratchLayout& scratch,
                                OfflineEnv offline,
                                const std::optional<std::filesystem::path>& cache);

// Adds safe.directory=* to the command-line configuration git takes from the environment
// (GIT_CONFIG_COUNT/KEY_n/VALUE_n, after any the environment has already): inside the wrap,
// files sandgate made (a worktree's git directory in the mirror) belong to another uid.
void trust_git_directories(Environment& env);

// Seeds the fresh `home` (create_scratch's) of `scratch` from `cache` (the allowlist above)
// and writes the offline configuration files (maven settings.xml, gradle init script,
// NuGet.Config) when `offline` is on, all through the home's fd, as new files given to `owner`.
Expected<void> seed_toolchain_home(const SafeDir& home, const ScratchLayout& scratch,
                                   OfflineEnv offline,
                                   const std::optional<std::filesystem::path>& cache,
                                   const std::optional<Owner>& owner);

// The offline configuration files (maven settings.xml, gradle init script, NuGet.Config) with
// their paths below scratch.home: what seed_toolchain_home writes on the host, and what the
// wrap creates inside its own tmpfs when the scratch lives there.
struct ScratchFile {
    std::filesystem::path path;
    std::string content;
};
std::vector<ScratchFile> offline_config_files(const ScratchLayout& scratch,
                                              const std::optional<std::filesystem::path>& cache);

}  // namespace sandbox
