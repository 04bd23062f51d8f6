#pragma once
// FileLock: an flock(2) on a lock file, held for the object's lifetime (RAII). flock locks
// belong to the open file description, so two FileLocks on one path conflict even within one
// process (threads), and the kernel drops the lock when its holder dies: a crashed job never
// leaves a mirror locked. Lock files are opened O_CLOEXEC so child steps never inherit them.
//
// Removing a lock file: only its holder may unlink it (remove_lock_file), and every locker
// checks, once its flock is granted, that the path still names the file it locked; when it
// does not (the file was unlinked while it waited), it lets that file go and locks the one
// the path names now. Without the check, a waiter woken on the unlinked file and a newcomer
// that created a fresh one would both hold "the" lock. Every taker of a lock file that may
// be removed must lock it through FileLock (a bare flock(2) does not re-check).

#include <filesystem>

#include "common/error.hpp"
#include "common/fd.hpp"

namespace jobs {

enum class LockMode { exclusive, shared };
enum class LockWait { block, try_once };

class FileLock {
public:
    // Creates the lock file when missing (mode 0600) and takes the lock. With try_once, a
    // lock held elsewhere is ErrorKind::transient; other failures are permanent.
    static common::Expected<FileLock> acquire(const std::filesystem::path& path, LockMode mode,
                                              LockWait wait = LockWait::block);

    FileLock(FileLock&&) noexcept = default;
    FileLock& operator=(FileLock&&) noexcept = default;

    int fd() const { return m_fd.get(); }

    // Unlinks the lock file while the lock is held; the lock stays held until this object
    // goes. Lockers waiting on the removed file move to the path's next file (above). A file
    // already gone is no error; invalid_input under a shared lock (the other holders still
    // count on the file); permanent otherwise.
    common::Expected<void> remove_lock_file();

private:
    FileLock(common::Fd fd, std::filesystem::path path, LockMode mode)
        : m_fd(std::move(fd)), m_path(std::move(path)), m_mode(mode) {}
    common::Fd m_fd;  // closing it releases the lock
    std::filesystem::path m_path;
    LockMode m_mode;
};

}  // namespace jobs
