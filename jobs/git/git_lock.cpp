#include "jobs/git/git_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace jobs {
namespace {

enum class Still { locked, replaced };

// Whether `path` still names the file `fd` is open on. A holder may unlink the lock file
// (remove_lock_file) after we opened it and before our flock was granted: that flock guards
// nothing any more, because the next opener creates and locks a new file at the path.
common::Expected<Still> still_named(int fd, const std::filesystem::path& path) {
    struct stat held {};
    struct stat named {};
    if (::fstat(fd, &held) != 0)
        return common::fail(common::ErrorKind::permanent,
                            common::errno_message("fstat " + path.string()));
    if (::lstat(path.c_str(), &named) != 0) {
        if (errno == ENOENT) return Still::replaced;
        return common::fail(common::ErrorKind::permanent,
                            common::errno_message("stat " + path.string()));
    }
    return held.st_dev == named.st_dev && held.st_ino == named.st_ino ? Still::locked
                                                                      : Still::replaced;
}

common::Expected<common::Fd> lock_once(const std::filesystem::path& path, int operation) {
    common::Fd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd)
        return common::fail(common::ErrorKind::permanent,
                            common::errno_message("open " + path.string()));
    int rc;
    do rc = ::flock(fd.get(), operation);
    while (rc != 0 && errno == EINTR);  // a signal interrupted the wait: wait again
    if (rc != 0) {
        const bool busy = errno == EWOULDBLOCK;
        return common::fail(busy ? common::ErrorKind::transient : common::ErrorKind::permanent,
                            common::errno_message("flock " + path.string()));
    }
    return fd;
}

}  // namespace

common::Expected<FileLock> FileLock::acquire(const std::filesystem::path& path, LockMode mode,
                                             LockWait wait) {
    int operation = mode == LockMode::exclusive ? LOCK_EX : LOCK_SH;
    if (wait == LockWait::try_once) operation |= LOCK_NB;
    // Each round opens the file the path names now; a file unlinked under us is let go (our
    // fd closes, dropping its lock) and the path's current file is locked instead.
    while (true) {
        auto fd = SANDGATE_TRY(lock_once(path, operation));
        auto still = SANDGATE_TRY(still_named(fd.get(), path));
        if (still == Still::locked) return FileLock(std::move(fd), path, mode);
    }
}

common::Expected<void> FileLock::remove_lock_file() {
    if (m_mode != LockMode::exclusive)
        return common::fail(common::ErrorKind::invalid_input,
                            "remove " + m_path.string() + ": the lock is shared");
    if (::unlink(m_path.c_str()) != 0 && errno != ENOENT)
        return common::fail(common::ErrorKind::permanent,
                            common::errno_message("unlink " + m_path.string()));
    return {};
}

}  // namespace jobs
