#include "sandbox/wrap/wrap_files.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <mutex>
#include <set>

namespace sandbox {
namespace {

// Bounds on what one process keeps: beyond them the cache starts over (runs with ever new
// contents, say a different HOME in each passwd, must not grow it without end). A plan needs
// about 25 distinct files; each entry holds one fd of this process.
constexpr std::size_t k_max_entries = 48;
constexpr std::size_t k_max_bytes = 8u << 20;

// A new open file description of the memfd (its own offset), read-only. Through /proc: where
// that is not mounted the caller falls back to a fresh memfd.
Fd reopen(const Fd& memfd) {
    const std::string path = "/proc/self/fd/" + std::to_string(memfd.get());
    return Fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
}

struct ContentCache {
    std::mutex mutex;
    std::map<std::string, Fd, std::less<>> fds;
    std::set<std::size_t> seen;  // hashes of contents handed out once, uncached
    std::size_t bytes = 0;
};

ContentCache& content_cache() {
    static ContentCache cache;
    return cache;
}

// A content_memfd sealed so that it can never change, for the cache to share among runs.
Expected<Fd> sealed_memfd(std::string_view name, std::string_view content) {
    auto fd = content_memfd(name, content);
    if (!fd) return fd;
    if (::fcntl(fd->get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) !=
        0)
        return fail(ErrorKind::unavailable, errno_message("sealing a memfd"));
    return fd;
}

}  // namespace

Expected<void> write_contents(const Fd& file, std::string_view content) {
    for (std::size_t done = 0; done < content.size();) {
        const ssize_t n = ::pwrite(file.get(), content.data() + done, content.size() - done,
                                   static_cast<off_t>(done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return fail(ErrorKind::unavailable, errno_message("writing a memfd"));
        done += static_cast<std::size_t>(n);
    }
    return {};
}

Expected<Fd> content_memfd(std::string_view name, std::string_view content) {
    Fd fd(::memfd_create(std::string(name).c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (!fd) return fail(ErrorKind::unavailable, errno_message("memfd_create"));
    // The file offset stays at 0, where bwrap starts reading.
    SANDGATE_CHECK(write_contents(fd, content));
    return fd;
}

Expected<Fd> content_fd(std::string_view name, std::string_view content) {
    ContentCache& cache = content_cache();
    std::lock_guard lock(cache.mutex);
    if (auto found = cache.fds.find(content); found != cache.fds.end()) {
        if (Fd fd = reopen(found->second)) return fd;
        return content_memfd(name, content);
    }
    // Kept only from its second sight on: a one-shot process such as `sandgate exec` asks for
    // each content once and pays no seal, duplicate or close. A hash is enough to decide: a
    // collision only costs a cache entry.
    const std::size_t hash = std::hash<std::string_view>{}(content);
    if (cache.seen.size() >= 4 * k_max_entries) cache.seen.clear();
    if (cache.seen.insert(hash).second) return content_memfd(name, content);
    auto fd = sealed_memfd(name, content);
    if (!fd) return fd;
    // The user takes a duplicate (one offset shared with the cache's fd, which is never read:
    // later users reopen it, at offsets of their own). Sealed, so no writer either.
    Fd first(::fcntl(fd->get(), F_DUPFD_CLOEXEC, 0));
    if (!first) return fd;  // no second fd to spare: this one, uncached
    if (cache.fds.size() >= k_max_entries || cache.bytes + content.size() > k_max_bytes) {
        cache.fds.clear();
        cache.bytes = 0;
    }
    cache.fds.emplace(std::string(content), std::move(*fd));
    cache.bytes += content.size();
    return first;
}

Expected<Fd> open_host_file(const std::filesystem::path& path, std::uintmax_t max_size) {
    // O_NONBLOCK: opening a fifo planted at the path must not hang the plan (it is refused
    // just below); regular files ignore the flag.
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
    if (!fd) return fail(ErrorKind::unavailable, errno_message("open " + path.string()));
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0)
        return fail(ErrorKind::unavailable, errno_message("fstat " + path.string()));
    if (!S_ISREG(st.st_mode))
        return fail(ErrorKind::invalid_input, path.string() + " is not a regular file");
    if (static_cast<std::uintmax_t>(st.st_size) > max_size)
        return fail(ErrorKind::invalid_input,
                    path.string() + " is larger than " + std::to_string(max_size) + " bytes");
    return fd;
}

}  // namespace sandbox
