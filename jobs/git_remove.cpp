#include "jobs/git_remove.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sandbox/fd.hpp"

namespace jobs {
namespace {

using sandbox::ErrorKind;
using sandbox::Fd;

struct DirCloser {
    void operator()(DIR* dir) const { ::closedir(dir); }
};

std::unexpected<sandbox::Error> io_fail(const std::string& what) {
    return sandbox::fail(ErrorKind::permanent, sandbox::errno_message(what));
}

// Opens directory `name` under `parent` without following a symlink. A directory we cannot
// read (mode 0 left by a step) is given owner rwx through an O_PATH descriptor first:
// chmod on /proc/self/fd/N acts on that very inode, never on a symlink target.
sandbox::Expected<Fd> open_dir(int parent, const char* name) {
    constexpr int k_flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    Fd fd(::openat(parent, name, k_flags));
    if (!fd && errno == EACCES) {
        Fd path_fd(::openat(parent, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!path_fd) return io_fail(std::string("open ") + name);
        const std::string proc = "/proc/self/fd/" + std::to_string(path_fd.get());
        if (::chmod(proc.c_str(), S_IRWXU) != 0) return io_fail(std::string("chmod ") + name);
        fd.reset(::openat(parent, name, k_flags));
    }
    if (!fd) return io_fail(std::string("open ") + name);
    struct stat st {};
    if (::fstat(fd.get(), &st) == 0 && (st.st_mode & S_IRWXU) != S_IRWXU)
        ::fchmod(fd.get(), (st.st_mode & 07777) | S_IRWXU);  // so its entries can be unlinked
    return fd;
}

// Unlinks every non-directory entry and every empty directory of `dir`; returns the name of
// the first non-empty subdirectory (to descend into), or nullopt when `dir` is now empty.
sandbox::Expected<std::optional<std::string>> sweep(int dir) {
    if (::lseek(dir, 0, SEEK_SET) < 0) return io_fail("lseek");
    Fd copy(::fcntl(dir, F_DUPFD_CLOEXEC, 0));
    if (!copy) return io_fail("dup");
    std::unique_ptr<DIR, DirCloser> stream(::fdopendir(copy.get()));
    if (!stream) return io_fail("fdopendir");
    copy.release();  // now owned by the DIR stream
    while (const dirent* entry = ::readdir(stream.get())) {
        const std::string name = entry->d_name;
        if (name == "." || name == "..") continue;
        struct stat st {};
        if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno == ENOENT) continue;
            return io_fail("stat " + name);
        }
        if (!S_ISDIR(st.st_mode)) {
            if (::unlinkat(dir, name.c_str(), 0) != 0 && errno != ENOENT) return io_fail("unlink " + name);
            continue;
        }
        if (::unlinkat(dir, name.c_str(), AT_REMOVEDIR) == 0 || errno == ENOENT) continue;
        if (errno != ENOTEMPTY && errno != EEXIST && errno != EACCES && errno != EPERM)
            return io_fail("rmdir " + name);
        return std::optional<std::string>(name);
    }
    return std::optional<std::string>();
}

std::unexpected<sandbox::Error> prefixed(const std::filesystem::path& path, const sandbox::Error& error) {
    return sandbox::fail(error.kind, path.string() + ": " + error.message);
}

}  // namespace

sandbox::Expected<void> remove_tree(const std::filesystem::path& path) {
    const std::filesystem::path parent_path = path.parent_path().empty() ? "." : path.parent_path();
    const std::string base = path.filename().string();
    if (base.empty() || base == "." || base == "..")
        return sandbox::fail(ErrorKind::invalid_input, "refusing to remove '" + path.string() + "'");
    Fd parent(::open(parent_path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!parent) {
        if (errno == ENOENT) return {};
        return io_fail("open " + parent_path.string());
    }
    struct stat st {};
    if (::fstatat(parent.get(), base.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) return {};
        return io_fail("stat " + path.string());
    }
    if (!S_ISDIR(st.st_mode)) {
        if (::unlinkat(parent.get(), base.c_str(), 0) != 0) return io_fail("unlink " + path.string());
        return {};
    }
    auto root = open_dir(parent.get(), base.c_str());
    if (!root) return std::unexpected(root.error());
    Fd current = std::move(*root);
    std::vector<std::string> names;  // the path from the root down to `current`
    std::string emptied;             // the child we just climbed out of, now empty
    // Depth-first with one descriptor: descend into the first non-empty subdirectory, and when
    // a directory is empty climb back through ".." (the physical parent, never a symlink) and
    // sweep again; the emptied child is then removed by that sweep.
    for (;;) {
        auto next = sweep(current.get());
        if (!next) return prefixed(path, next.error());
        if (*next) {
            if (**next == emptied)  // empty, yet rmdir refuses it: do not loop forever
                return sandbox::fail(ErrorKind::permanent, path.string() + ": cannot remove " + emptied);
            auto child = open_dir(current.get(), (*next)->c_str());
            if (!child) return prefixed(path, child.error());
            current = std::move(*child);
            names.push_back(**next);
            emptied.clear();
            continue;
        }
        if (names.empty()) break;
        Fd up(::openat(current.get(), "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (!up) return io_fail("open .. under " + path.string());
        current = std::move(up);
        emptied = names.back();
        names.pop_back();
    }
    current.reset();
    if (::unlinkat(parent.get(), base.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT)
        return io_fail("rmdir " + path.string());
    return {};
}

}  // namespace jobs
