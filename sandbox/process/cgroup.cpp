#include "sandbox/process/cgroup.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/warnings.hpp"

namespace sandbox {
namespace {

std::atomic<unsigned> g_counter{0};

// /proc/self/mountinfo: "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS ... - FSTYPE SOURCE SUPER".
struct Cgroup2Mount {
    std::string root;
    std::string mount_point;
};

std::optional<Cgroup2Mount> find_cgroup2_mount() {
    std::ifstream in("/proc/self/mountinfo");
    std::string line;
    while (std::getline(in, line)) {
        const std::size_t dash = line.find(" - ");
        if (dash == std::string::npos) continue;
        std::istringstream tail(line.substr(dash + 3));
        std::string fstype;
        tail >> fstype;
        if (fstype != "cgroup2") continue;
        std::istringstream head(line.substr(0, dash));
        std::string id, parent, devno, root, mount_point;
        head >> id >> parent >> devno >> root >> mount_point;
        return Cgroup2Mount{root, mount_point};
    }
    return std::nullopt;
}

// A small procfs or cgroupfs file, read whole; empty when it cannot be opened.
std::string read_small_file(int dir_fd, const char* name) {
    Fd fd(::openat(dir_fd, name, O_RDONLY | O_CLOEXEC));
    std::string text;
    if (!fd) return text;
    char buf[4096];
    for (;;) {
        const ssize_t n = ::read(fd.get(), buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        text.append(buf, static_cast<std::size_t>(n));
    }
    return text;
}

// Our cgroup2 path from /proc/self/cgroup's "0::/path" line, the file read whole with plain
// read(2): an ifstream (its buffer, its locale) costs twice as much in the
// once-per-`sandgate exec` path.
std::optional<std::string> own_cgroup2_path() {
    const std::string text = read_small_file(AT_FDCWD, "/proc/self/cgroup");
    std::string_view rest = text;
    while (!rest.empty()) {
        const std::size_t end = std::min(rest.find('\n'), rest.size());
        if (rest.starts_with("0::")) return std::string(rest.substr(3, end - 3));
        rest.remove_prefix(std::min(end + 1, rest.size()));
    }
    return std::nullopt;
}

std::filesystem::path below(const std::string& mount_point, const std::string& own) {
    return std::filesystem::path(mount_point) / own.substr(own.starts_with('/') ? 1 : 0);
}

// Our cgroup in the usual places of the cgroup2 hierarchy (unified hosts; hybrid ones), found
// with statfs before reading /proc/self/mountinfo, which costs ~0.1 ms per `sandgate exec`
// (the kernel resolves the path of every mount). Taken only when our cgroup's directory is
// there; a mount of a subtree (a mountinfo root other than "/") does not show that path, so
// it falls through to the full search.
std::optional<std::filesystem::path> usual_base(const std::string& own) {
    for (const char* dir : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
        struct statfs fs {};
        if (::statfs(dir, &fs) != 0 || fs.f_type != CGROUP2_SUPER_MAGIC) continue;
        std::filesystem::path base = below(dir, own);
        struct stat st {};
        if (::stat(base.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return base;
    }
    return std::nullopt;
}

// Where our cgroup2 directory is, writable or not.
Expected<std::filesystem::path> locate_base() {
    std::string own = own_cgroup2_path().value_or("/");
    std::filesystem::path base;
    if (auto usual = own.ends_with(" (deleted)") ? std::nullopt : usual_base(own)) {
        base = std::move(*usual);
    } else {
        const auto mount = find_cgroup2_mount();
        if (!mount) return fail(ErrorKind::unavailable, "no cgroup2 hierarchy is mounted");
        // A cgroup namespace or bind mount shows the hierarchy from `root`, not from its top.
        if (mount->root != "/" && own.starts_with(mount->root)) own.erase(0, mount->root.size());
        if (own.ends_with(" (deleted)"))
            return fail(ErrorKind::unavailable, "our cgroup was removed");
        base = below(mount->mount_point, own);
    }
    return base;
}

Expected<std::filesystem::path> find_base() {
    auto base = Cgroup::located_base();
    if (!base) return base;
    if (::access(base->c_str(), W_OK) != 0 || ::access((*base / "cgroup.procs").c_str(), W_OK) != 0)
        return fail(ErrorKind::unavailable, base->string() + " is not writable");
    return base;
}

// The pid in a leaf name "sandgate-<pid>-<n>", or 0 when the name is not one of ours.
pid_t leaf_owner(std::string_view name) {
    constexpr std::string_view prefix = "sandgate-";
    if (!name.starts_with(prefix)) return 0;
    name.remove_prefix(prefix.size());
    const std::size_t dash = name.find('-');
    if (dash == std::string_view::npos) return 0;
    const std::string_view pid_text = name.substr(0, dash);
    const std::string_view counter = name.substr(dash + 1);
    const auto digits = [](std::string_view text) {
        return !text.empty() && text.size() <= 10 &&
               text.find_first_not_of("0123456789") == std::string_view::npos;
    };
    if (!digits(pid_text) || !digits(counter)) return 0;
    long pid = 0;
    std::from_chars(pid_text.data(), pid_text.data() + pid_text.size(), pid);
    return pid > 0 && pid <= std::numeric_limits<pid_t>::max() ? static_cast<pid_t>(pid) : 0;
}

// cgroupfs (kernfs) gives a directory 2 + its number of subdirectories as its link count:
// with exactly 2 there is no leaf at all, stale or not, and the sweep (a directory listing
// and a kill(0) per leaf) can be skipped. Every `sandgate exec` checks with one stat; on an
// idle host, where runs come one after another, nothing is left to list. A count that says
// nothing (not 2) means a sweep.
bool may_hold_leaves(const std::filesystem::path& parent) {
    struct stat st {};
    return ::stat(parent.c_str(), &st) != 0 || st.st_nlink != 2;
}

}  // namespace

// Plain readdir and *at() calls on the directory's fd: no path object per entry (a CLI run
// that finds leaves pays for this listing).
int remove_stale_leaves(const std::filesystem::path& parent, std::chrono::seconds min_age) {
    const std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(parent.c_str()), ::closedir);
    if (!dir) return 0;
    const int dir_fd = ::dirfd(dir.get());
    const pid_t self = ::getpid();
    const auto now = std::chrono::system_clock::now();
    int removed = 0;
    while (const dirent* entry = ::readdir(dir.get())) {
        const pid_t owner = leaf_owner(entry->d_name);
        if (owner <= 0 || owner == self) continue;
        // Alive (EPERM: someone else's): not stale. A pid from another pid namespace looks
        // dead from here, hence the age: a live process's leaf is empty only for moments.
        if (::kill(owner, 0) == 0 || errno != ESRCH) continue;
        struct stat st {};
        if (::fstatat(dir_fd, entry->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        const auto changed = std::chrono::system_clock::from_time_t(st.st_mtim.tv_sec);
        if (now - changed < min_age) continue;
        if (::unlinkat(dir_fd, entry->d_name, AT_REMOVEDIR) == 0) ++removed;
    }
    return removed;
}

// Once per parent and process, and only when there is something to look at: a leaf left by a
// killed sandgate costs a little kernel memory until someone removes it, never correctness
// (an empty leaf holds nothing; a busy one is refused by rmdir either way). Long-lived
// processes (agent, broker) sweep at their first run that finds leaves around; so does every
// `sandgate exec` that finds leaves besides its own, so stale ones do not pile up.
void remove_stale_leaves_once(const std::filesystem::path& parent) {
    if (!may_hold_leaves(parent)) return;
    static std::mutex mutex;
    static std::set<std::filesystem::path> swept;
    {
        std::lock_guard lock(mutex);
        if (!swept.insert(parent).second) return;
    }
    remove_stale_leaves(parent, std::chrono::minutes(1));
}

int Cgroup::remove_stale(std::chrono::seconds min_age) {
    auto parent = base();
    return parent ? remove_stale_leaves(*parent, min_age) : 0;
}

Expected<std::filesystem::path> Cgroup::located_base() {
    static const Expected<std::filesystem::path> cached = locate_base();
    return cached;
}

Expected<std::filesystem::path> Cgroup::base() {
    static const Expected<std::filesystem::path> cached = find_base();
    return cached;
}

Expected<Cgroup> Cgroup::create() {
    auto parent = SANDGATE_TRY(base());
    remove_stale_leaves_once(parent);
    const std::filesystem::path path =
        parent / ("sandgate-" + std::to_string(::getpid()) + "-" + std::to_string(++g_counter));
    if (::mkdir(path.c_str(), 0755) != 0)
        return fail(ErrorKind::unavailable, errno_message("mkdir " + path.string()));
    Fd dir(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    Fd events(dir ? ::openat(dir.get(), "cgroup.events", O_RDONLY | O_CLOEXEC) : -1);
    if (!dir || !events) {
        const std::string message = errno_message("open " + path.string() + "/cgroup.events");
        ::rmdir(path.c_str());
        return fail(ErrorKind::unavailable, message);
    }
    return Cgroup(path, std::move(dir), std::move(events));
}

Cgroup::Cgroup(std::filesystem::path path, Fd dir, Fd events)
    : m_path(std::move(path)), m_dir(std::move(dir)), m_events(std::move(events)) {}

Cgroup::~Cgroup() {
    if (m_path.empty() || !m_events) return;  // moved from
    // Usually the run has killed the tree and seen the leaf empty already; an empty leaf gains
    // no process by itself (nothing inside is left to fork), so only a populated one is killed.
    if (populated()) kill_and_wait();
    int attempt = 0;
    while (::rmdir(m_path.c_str()) != 0) {
        if (errno == ENOENT) return;
        if (errno != EBUSY || ++attempt == 100) {
            common::warn("cannot remove the run's cgroup " + m_path.string());
            return;
        }
        kill_and_wait();
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
}

// Killed processes leave the cgroup as they exit, zombie or not; the wait is bounded: a
// process stuck in uninterruptible sleep must not hang us forever.
void Cgroup::kill_and_wait() const {
    kill();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (populated() && std::chrono::steady_clock::now() < deadline) {
        pollfd pfd{m_events.get(), POLLPRI, 0};
        ::poll(&pfd, 1, 10);
    }
}

int Cgroup::signal_all(int sig) const {
    const std::string procs = read_small_file(m_dir.get(), "cgroup.procs");
    int signalled = 0;
    std::size_t start = 0;
    while (start < procs.size()) {
        std::size_t end = procs.find('\n', start);
        if (end == std::string::npos) end = procs.size();
        const pid_t pid = static_cast<pid_t>(std::strtol(procs.c_str() + start, nullptr, 10));
        if (pid > 0 && ::kill(pid, sig) == 0) ++signalled;
        start = end + 1;
    }
    return signalled;
}

void Cgroup::kill() const {
    Fd kill_fd(::openat(m_dir.get(), "cgroup.kill", O_WRONLY | O_CLOEXEC));
    if (kill_fd && ::write(kill_fd.get(), "1", 1) == 1) return;
    // Before 5.14: signal what is listed until nothing is (a fork may race one pass).
    for (int pass = 0; pass < 100 && signal_all(SIGKILL) > 0; ++pass) {
    }
}

bool Cgroup::populated() const {
    char buf[256];
    const ssize_t n = ::pread(m_events.get(), buf, sizeof buf - 1, 0);
    if (n <= 0) return false;
    buf[n] = '\0';
    return std::strstr(buf, "populated 1") != nullptr;
}

}  // namespace sandbox
