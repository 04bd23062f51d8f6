#include "jobs/builtins/cache_store.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <set>

#include "jobs/git/git_lock.hpp"
#include "sandbox/access/safe_write.hpp"

namespace jobs {
namespace {

using common::ErrorKind;

constexpr std::uint64_t k_index_bytes = 64ull << 20;
const sandbox::CreateOptions k_private{0700, std::nullopt};

std::vector<std::string_view> split_tabs(std::string_view line) {
    std::vector<std::string_view> out;
    for (;;) {
        const auto tab = line.find('\t');
        out.push_back(line.substr(0, tab));
        if (tab == std::string_view::npos) return out;
        line.remove_prefix(tab + 1);
    }
}

template <typename Number>
bool parse_number(std::string_view text, Number& out) {
    const auto* end = text.data() + text.size();
    return !text.empty() && std::from_chars(text.data(), end, out).ptr == end;
}

std::optional<CacheEntry> parse_line(std::string_view line) {
    const auto fields = split_tabs(line);
    if (fields.size() != 6) return std::nullopt;
    CacheEntry entry;
    if (!parse_number(fields[0], entry.created) || !parse_number(fields[3], entry.bytes))
        return std::nullopt;
    entry.scope = fields[1];
    entry.version = fields[2];
    entry.sha = fields[4];
    entry.key = fields[5];
    if (entry.sha.size() != 64 || !valid_cache_key(entry.key)) return std::nullopt;
    return entry;
}

std::string blob_name(const std::string& sha) {
    return sha + ".tar.gz";
}

std::int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

}  // namespace

bool valid_cache_key(std::string_view key) {
    return !key.empty() && key.size() <= 512 && key.find_first_of("\t\n\r,") == std::string::npos;
}

PendingBlob::PendingBlob(PendingBlob&& other) noexcept
    : m_tmp(std::exchange(other.m_tmp, nullptr)),
      m_name(std::move(other.m_name)),
      m_fd(std::move(other.m_fd)) {}

PendingBlob::~PendingBlob() {
    if (m_tmp != nullptr) (void)m_tmp->remove(m_name, m_name);
}

common::Expected<CacheStore> CacheStore::open(const std::filesystem::path& dir,
                                              CacheLimits limits) {
    std::error_code ec;
    std::filesystem::create_directories(dir.parent_path(), ec);  // trusted path: the state dir
    auto root = SANDGATE_TRY(sandbox::SafeDir::make_trusted(dir, k_private, "the cache store"));
    auto blobs = root.make_dirs("blobs", k_private, "the cache store's blobs");
    if (!blobs) return std::unexpected(blobs.error());
    auto tmp = root.make_dirs("tmp", k_private, "the cache store's tmp");
    if (!tmp) return std::unexpected(tmp.error());
    return CacheStore(std::move(root), std::move(*blobs), std::move(*tmp), limits);
}

common::Expected<std::vector<CacheEntry>> CacheStore::read_index() const {
    auto text =
        m_root.read_file_if_present("index", {k_index_bytes, std::nullopt, -1}, "the cache index");
    if (!text) return std::unexpected(text.error());
    std::vector<CacheEntry> entries;
    if (!*text) return entries;
    std::string_view rest = **text;
    while (!rest.empty()) {
        const auto newline = rest.find('\n');
        if (auto entry = parse_line(rest.substr(0, newline))) entries.push_back(std::move(*entry));
        if (newline == std::string_view::npos) break;
        rest.remove_prefix(newline + 1);
    }
    return entries;
}

common::Expected<void> CacheStore::write_index(const std::vector<CacheEntry>& entries) const {
    std::string text;
    for (const auto& e : entries) {
        text += std::to_string(e.created) + "\t" + e.scope + "\t" + e.version + "\t" +
                std::to_string(e.bytes) + "\t" + e.sha + "\t" + e.key + "\n";
    }
    return m_root.replace_file("index", text, {0600, std::nullopt}, "the cache index");
}

common::Expected<std::vector<CacheEntry>> CacheStore::list() const {
    return read_index();
}

common::Expected<std::optional<CacheEntry>> CacheStore::lookup(
    const std::vector<std::string>& scopes, const std::string& version,
    const std::vector<std::string>& keys) const {
    auto entries = SANDGATE_TRY(read_index());
    const auto newest = [&](const std::string& scope, auto&& matches) {
        const CacheEntry* best = nullptr;
        for (const auto& entry : entries) {
            if (entry.scope != scope || entry.version != version || !matches(entry.key)) continue;
            if (best == nullptr || entry.created >= best->created) best = &entry;
        }
        return best;
    };
    for (const auto& scope : scopes) {
        for (const auto& key : keys) {
            if (const auto* exact = newest(scope, [&](const std::string& k) { return k == key; }))
                return std::optional<CacheEntry>(*exact);
            if (const auto* prefix =
                    newest(scope, [&](const std::string& k) { return k.starts_with(key); }))
                return std::optional<CacheEntry>(*prefix);
        }
    }
    return std::optional<CacheEntry>();
}

common::Expected<common::Fd> CacheStore::open_blob(const CacheEntry& entry) const {
    return m_blobs.open_file(blob_name(entry.sha), "the cache entry '" + entry.key + "'");
}

common::Expected<PendingBlob> CacheStore::begin_save() const {
    static std::atomic<unsigned> counter{0};
    const std::string name =
        std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1)) + ".tar.gz";
    auto fd = SANDGATE_TRY(
        sandbox::create_new_file(*m_tmp, name, {0400, std::nullopt}, "a cache archive"));
    return PendingBlob(m_tmp.get(), name, std::move(fd));
}

common::Expected<SaveOutcome> CacheStore::commit(PendingBlob blob, const std::string& scope,
                                                 const std::string& version, const std::string& key,
                                                 const std::string& sha,
                                                 std::uint64_t bytes) const {
    if (bytes > m_limits.max_entry_bytes || bytes > m_limits.max_total_bytes)
        return common::fail(
            ErrorKind::invalid_input,
            "the cache entry is " + std::to_string(bytes) +
                " bytes, more than the store's limit of " +
                std::to_string(std::min(m_limits.max_entry_bytes, m_limits.max_total_bytes)));
    auto lock = FileLock::acquire(m_root.path() / "lock", LockMode::exclusive);
    if (!lock) return std::unexpected(lock.error());
    auto entries = SANDGATE_TRY(read_index());
    if (std::ranges::any_of(entries, [&](const CacheEntry& e) {
            return e.scope == scope && e.version == version && e.key == key;
        }))
        return SaveOutcome::exists;
    // Named by its content: a blob there already is the same bytes, and stays.
    if (::renameat(m_tmp->fd(), blob.name().c_str(), m_blobs.fd(), blob_name(sha).c_str()) != 0)
        return common::fail(ErrorKind::permanent,
                            common::errno_message("storing the cache entry '" + key + "'"));
    blob.release();
    entries.push_back({now_ns(), scope, version, bytes, sha, key});
    std::ranges::sort(entries, {}, &CacheEntry::created);
    std::uint64_t total = 0;
    std::set<std::string> counted;
    for (const auto& e : entries)
        if (counted.insert(e.sha).second) total += e.bytes;
    std::set<std::string> dropped;
    while (total > m_limits.max_total_bytes && entries.size() > 1) {
        const CacheEntry oldest = entries.front();
        entries.erase(entries.begin());
        if (std::ranges::none_of(entries,
                                 [&](const CacheEntry& e) { return e.sha == oldest.sha; })) {
            total -= oldest.bytes;
            dropped.insert(oldest.sha);
        }
    }
    SANDGATE_CHECK(write_index(entries));
    for (const auto& sha_dropped : dropped) (void)m_blobs.remove(blob_name(sha_dropped), "a blob");
    return SaveOutcome::saved;
}

}  // namespace jobs
