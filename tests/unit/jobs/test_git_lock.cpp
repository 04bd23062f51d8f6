// jobs/git_lock: FileLock's discipline for lock files that may be removed. A holder unlinks
// its lock file; a locker that was waiting on the removed file must not come out holding it
// beside one that created and locked the path's next file: it re-checks after its flock and
// locks the new file. Waiters are seen blocked in /proc/locks (no timing involved).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "jobs/git/git_lock.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;

namespace {

ino_t inode_of(const fs::path& path) {
    struct stat st {};
    REQUIRE(::lstat(path.c_str(), &st) == 0);
    return st.st_ino;
}

ino_t inode_of_fd(int fd) {
    struct stat st {};
    REQUIRE(::fstat(fd, &st) == 0);
    return st.st_ino;
}

// Whether /proc/locks shows a request blocked on the file with this inode
// ("N: -> FLOCK ADVISORY WRITE PID MAJ:MIN:INODE 0 EOF").
bool waiter_on(ino_t inode) {
    std::ifstream locks("/proc/locks");
    std::string line;
    while (std::getline(locks, line)) {
        if (line.find("->") == std::string::npos) continue;
        std::istringstream fields(line);
        for (std::string field; fields >> field;) {
            const auto colon = field.rfind(':');
            if (std::count(field.begin(), field.end(), ':') == 2 &&
                field.substr(colon + 1) == std::to_string(inode))
                return true;
        }
    }
    return false;
}

// Waits for `done`; fails the test after two minutes (a hang, not a timing assertion).
void wait_for(const std::function<bool()>& done, const char* what) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
    while (!done()) {
        if (std::chrono::steady_clock::now() > deadline) FAIL("never happened: " << what);
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
}

}  // namespace

TEST_CASE("a locker woken on a lock file its holder unlinked locks the path's next file instead") {
    const fs::path path = tests::make_temp_dir("lock") / "scope.lock";
    auto first = jobs::FileLock::acquire(path, jobs::LockMode::exclusive);
    REQUIRE(first);
    std::optional<jobs::FileLock> holder(std::move(*first));
    const ino_t removed = inode_of(path);

    std::atomic<bool> granted{false};
    std::optional<common::Expected<jobs::FileLock>> waited;
    std::thread waiter([&] {
        waited.emplace(jobs::FileLock::acquire(path, jobs::LockMode::exclusive));
        granted = true;
    });
    wait_for([&] { return waiter_on(removed); }, "the waiter blocked on the first lock file");

    REQUIRE(holder->remove_lock_file());
    CHECK_FALSE(fs::exists(path));
    REQUIRE(holder->remove_lock_file());  // already gone: no error
    auto next =
        jobs::FileLock::acquire(path, jobs::LockMode::exclusive);  // a new file, granted at once
    REQUIRE(next);
    const ino_t current = inode_of(path);
    CHECK(current != removed);
    holder.reset();  // the removed file's lock is released: the waiter wakes on it

    // It must go on to wait for the path's file, never hold the removed one beside `next`.
    wait_for([&] { return granted.load() || waiter_on(current); },
             "the waiter granted, or blocked on the new file");
    CHECK_FALSE(granted.load());
    std::optional<jobs::FileLock> released(std::move(*next));
    released.reset();
    waiter.join();
    REQUIRE(waited.has_value());
    REQUIRE(waited->has_value());
    CHECK(inode_of_fd((*waited)->fd()) == inode_of(path));
}

TEST_CASE("try_once takes the path's current file; only an exclusive holder removes it") {
    const fs::path path = tests::make_temp_dir("lock") / "scope.lock";
    {
        auto shared = jobs::FileLock::acquire(path, jobs::LockMode::shared);
        REQUIRE(shared);
        auto refused = shared->remove_lock_file();
        REQUIRE_FALSE(refused);
        CHECK(refused.error().kind == common::ErrorKind::invalid_input);
        CHECK(fs::exists(path));
        auto busy =
            jobs::FileLock::acquire(path, jobs::LockMode::exclusive, jobs::LockWait::try_once);
        REQUIRE_FALSE(busy);
        CHECK(busy.error().kind == common::ErrorKind::transient);
    }
    auto exclusive =
        jobs::FileLock::acquire(path, jobs::LockMode::exclusive, jobs::LockWait::try_once);
    REQUIRE(exclusive);
    REQUIRE(exclusive->remove_lock_file());
    // The removed file is still locked, but the path names no file: the next locker makes one.
    auto again = jobs::FileLock::acquire(path, jobs::LockMode::exclusive, jobs::LockWait::try_once);
    REQUIRE(again);
    CHECK(inode_of_fd(again->fd()) == inode_of(path));
    CHECK(inode_of_fd(again->fd()) != inode_of_fd(exclusive->fd()));
}
