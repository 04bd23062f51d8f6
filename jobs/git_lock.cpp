#include "jobs/git_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>

#include <cerrno>

namespace jobs {

sandbox::Expected<FileLock> FileLock::acquire(const std::filesystem::path& path, LockMode mode,
                                              LockWait wait) {
    sandbox::Fd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd) return sandbox::fail(sandbox::ErrorKind::permanent, sandbox::errno_message("open " + path.string()));
    int operation = mode == LockMode::exclusive ? LOCK_EX : LOCK_SH;
    if (wait == LockWait::try_once) operation |= LOCK_NB;
    int rc;
    do rc = ::flock(fd.get(), operation);
    while (rc != 0 && errno == EINTR);  // a signal interrupted the wait: wait again
    if (rc != 0) {
        const bool busy = errno == EWOULDBLOCK;
        return sandbox::fail(busy ? sandbox::ErrorKind::transient : sandbox::ErrorKind::permanent,
                             sandbox::errno_message("flock " + path.string()));
    }
    return FileLock(std::move(fd));
}

}  // namespace jobs
