#pragma once
// The store behind the actions/cache builtin (jobs/builtins/step_builtins.cpp): entries saved by
// jobs on this machine, kept on the trusted side and scoped as GitHub scopes caches.
//
//   DIR/index               one line per entry:
//   CREATED<TAB>SCOPE<TAB>VERSION<TAB>BYTES<TAB>SHA<TAB>KEY DIR/blobs/SHA.tar.gz    an entry's
//   files (jobs/builtins/tree_archive.hpp), named by its content,
//                           read-only; shared by entries of the same content
//   DIR/tmp/                archives being written (a crashed save leaves one; the next save
//                           of this process clears nothing of another's: they are named by pid)
//   DIR/lock                held exclusively while the index changes
//
// A scope is "REPOSITORY@REF": a job reads the entries of the scopes it is given, in order (its
// own ref, then a pull request's base branch, then the default branch), and writes only its own.
// An entry is immutable: a save under a key its scope holds already is refused (as GitHub does).
// VERSION is the digest of the paths the entry holds: a restore of other paths never matches.
//
// Size limits: an entry larger than max_entry_bytes is refused; after a save, the oldest
// entries are evicted until the whole is within max_total_bytes. Nothing here is reachable by a
// step: DIR is never bound into a sandbox, and restores copy out of it (never link into it).
//
// Thread- and process-safe (the lock file); the index is rewritten atomically.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/fd.hpp"
#include "sandbox/access/safe_access.hpp"

namespace jobs {

struct CacheLimits {
    std::uint64_t max_entry_bytes = 4ull << 30;   // one entry's archive
    std::uint64_t max_total_bytes = 10ull << 30;  // all entries' archives (GitHub's 10 GiB)
};

struct CacheEntry {
    std::int64_t created = 0;  // nanoseconds since the epoch
    std::string scope;
    std::string version;
    std::uint64_t bytes = 0;
    std::string sha;
    std::string key;
};

// An archive being written for a save; removed unless committed.
class PendingBlob {
public:
    PendingBlob(const sandbox::SafeDir* tmp, std::string name, common::Fd fd)
        : m_tmp(tmp), m_name(std::move(name)), m_fd(std::move(fd)) {}
    PendingBlob(PendingBlob&& other) noexcept;
    PendingBlob& operator=(PendingBlob&&) = delete;
    ~PendingBlob();
    const common::Fd& fd() const { return m_fd; }
    const std::string& name() const { return m_name; }
    void release() { m_tmp = nullptr; }

private:
    const sandbox::SafeDir* m_tmp;
    std::string m_name;
    common::Fd m_fd;
};

enum class SaveOutcome { saved, exists };

class CacheStore {
public:
    // Opens (creating) DIR; permanent when it cannot be made.
    static common::Expected<CacheStore> open(const std::filesystem::path& dir,
                                             CacheLimits limits = {});
    // STATE/caches.
    static std::filesystem::path default_dir(const std::filesystem::path& state_dir) {
        return state_dir / "caches";
    }
    CacheStore(CacheStore&&) noexcept = default;

    // The entry `keys` find: for each scope in order, for each key in order, the newest entry
    // of that version whose key equals it, else the newest whose key starts with it.
    common::Expected<std::optional<CacheEntry>> lookup(const std::vector<std::string>& scopes,
                                                       const std::string& version,
                                                       const std::vector<std::string>& keys) const;
    // The entry's archive, read-only.
    common::Expected<common::Fd> open_blob(const CacheEntry& entry) const;

    // A fresh archive file to write a save into.
    common::Expected<PendingBlob> begin_save() const;
    // Indexes the written archive (`sha` its digest, `bytes` its size) as `key` of `scope`, then
    // evicts the oldest entries beyond max_total_bytes. invalid_input when it is larger than
    // max_entry_bytes; SaveOutcome::exists when the scope holds the key already.
    common::Expected<SaveOutcome> commit(PendingBlob blob, const std::string& scope,
                                         const std::string& version, const std::string& key,
                                         const std::string& sha, std::uint64_t bytes) const;

    common::Expected<std::vector<CacheEntry>> list() const;
    const CacheLimits& limits() const { return m_limits; }
    const std::filesystem::path& dir() const { return m_root.path(); }

private:
    CacheStore(sandbox::SafeDir root, sandbox::SafeDir blobs, sandbox::SafeDir tmp,
               CacheLimits limits)
        : m_root(std::move(root)),
          m_blobs(std::move(blobs)),
          m_tmp(std::make_unique<sandbox::SafeDir>(std::move(tmp))),
          m_limits(limits) {}
    common::Expected<std::vector<CacheEntry>> read_index() const;
    common::Expected<void> write_index(const std::vector<CacheEntry>& entries) const;

    sandbox::SafeDir m_root;
    sandbox::SafeDir m_blobs;
    std::unique_ptr<sandbox::SafeDir> m_tmp;  // stable address for PendingBlob
    CacheLimits m_limits;
};

// Whether `key` can name an entry: 1-512 characters, no tab, newline or comma (GitHub's rule).
bool valid_cache_key(std::string_view key);

}  // namespace jobs
