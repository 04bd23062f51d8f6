#include "sandbox/wrap_files.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

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
    std::size_t bytes = 0;
};

ContentCache& content_cache() {
    static ContentCache cache;
    return cache;
}

struct FileIdentity {
    dev_t device = 0;
    ino_t inode = 0;
    off_t size = 0;
    timespec mtime{};
    bool operator==(const FileIdentity& other) const {
        return device == other.device && inode == other.inode && size == other.size &&
               mtime.tv_sec == other.mtime.tv_sec && mtime.tv_nsec == other.mtime.tv_nsec;
    }
};

struct CachedFile {
    FileIdentity identity;
    std::string content;
};

}  // namespace

Expected<Fd> sealed_memfd(std::string_view name, std::string_view content) {
    Fd fd(::memfd_create(std::string(name).c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (!fd) return fail(ErrorKind::unavailable, errno_message("memfd_create"));
    std::size_t done = 0;
    while (done < content.size()) {
        const ssize_t n = ::write(fd.get(), content.data() + done, content.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return fail(ErrorKind::unavailable, errno_message("writing a memfd"));
        done += static_cast<std::size_t>(n);
    }
    if (::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0)
        return fail(ErrorKind::unavailable, errno_message("sealing a memfd"));
    ::lseek(fd.get(), 0, SEEK_SET);
    return fd;
}

Expected<Fd> sealed_content_fd(std::string_view name, std::string_view content) {
    ContentCache& cache = content_cache();
    std::lock_guard lock(cache.mutex);
    auto found = cache.fds.find(content);
    if (found == cache.fds.end()) {
        auto fd = sealed_memfd(name, content);
        if (!fd) return fd;
        if (cache.fds.size() >= k_max_entries || cache.bytes + content.size() > k_max_bytes) {
            cache.fds.clear();
            cache.bytes = 0;
        }
        found = cache.fds.emplace(std::string(content), std::move(*fd)).first;
        cache.bytes += content.size();
    }
    if (Fd fd = reopen(found->second)) return fd;
    return sealed_memfd(name, content);
}

std::optional<std::string> cached_file_content(const std::filesystem::path& path,
                                               std::uintmax_t max_size) {
    static std::mutex mutex;
    static std::map<std::filesystem::path, CachedFile> files;
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
        static_cast<std::uintmax_t>(st.st_size) > max_size)
        return std::nullopt;
    const FileIdentity identity{st.st_dev, st.st_ino, st.st_size, st.st_mtim};
    std::lock_guard lock(mutex);
    if (auto found = files.find(path); found != files.end() && found->second.identity == identity)
        return found->second.content;
    std::ifstream in(path, std::ios::binary);
    std::ostringstream content;
    content << in.rdbuf();
    if (!in.is_open() || in.bad()) return std::nullopt;
    // A file rewritten while being read shows another identity next time and is read again.
    files[path] = CachedFile{identity, content.str()};
    return files[path].content;
}

}  // namespace sandbox
