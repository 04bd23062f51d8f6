#pragma once
// FileLock: an flock(2) on a lock file, held for the object's lifetime (RAII). flock locks
// belong to the open file description, so two FileLocks on one path conflict even within one
// process (threads), and the kernel drops the lock when its holder dies: a crashed job never
// leaves a mirror locked. Lock files are opened O_CLOEXEC so child steps never inherit them.

#include <filesystem>

#include "sandbox/error.hpp"
#include "sandbox/fd.hpp"

namespace jobs {

enum class LockMode { exclusive, shared };
enum class LockWait { block, try_once };

class FileLock {
public:
    // Creates the lock file when missing (mode 0600) and takes the lock. With try_once, a
    // lock held elsewhere is ErrorKind::transient; other failures are permanent.
    static sandbox::Expected<FileLock> acquire(const std::filesystem::path& path, LockMode mode,
                                               LockWait wait = LockWait::block);

    FileLock(FileLock&&) noexcept = default;
    FileLock& operator=(FileLock&&) noexcept = default;

    int fd() const { return m_fd.get(); }

private:
    explicit FileLock(sandbox::Fd fd) : m_fd(std::move(fd)) {}
    sandbox::Fd m_fd;  // closing it releases the lock
};

}  // namespace jobs
