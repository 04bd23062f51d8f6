// The safe-access module (see the header). Kernel notes:
// - openat2's RESOLVE_NO_SYMLINKS refuses a symlink in every component, the last one included
//   (ELOOP); RESOLVE_BENEATH refuses absolute paths and ".." above the dirfd (EXDEV);
//   RESOLVE_NO_XDEV refuses a mount crossing, bind mounts included (EXDEV). EAGAIN means a
//   rename raced a ".." lookup: retried.
// - O_NONBLOCK: opening a FIFO for reading returns at once; fstat then refuses it. A step
//   cannot make device nodes on the host (no CAP_MKNOD outside its user namespace), so the
//   open itself has no side effect to fear.
#include "sandbox/access/safe_access.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <vector>

#include "sandbox/access/safe_read.hpp"
#include "sandbox/access/safe_write.hpp"

namespace sandbox {
namespace {

constexpr std::uint64_t k_resolve =
    RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
constexpr std::size_t k_chunk = 64 * 1024;

std::unexpected<Error> unavailable_openat2() {
    return fail(ErrorKind::unavailable,
                "reading or writing step-writable files needs openat2 (Linux 5.6 or later), which "
                "this kernel refuses: sandgate does not fall back to opens that follow links");
}

// The message for a failed resolution or open of `label`; never names anything outside.
std::unexpected<Error> open_error(const std::string& label, int error, std::string_view want) {
    switch (error) {
        case ENOENT:
            return fail(ErrorKind::invalid_input, label + " does not exist");
        case ELOOP:
        case EXDEV:
        case ENOTDIR:
        case ENXIO:
        case ENODEV:
        case EOPNOTSUPP:
        case EISDIR:
            return fail(ErrorKind::invalid_input, label + " is not " + std::string(want));
        case EEXIST:
            return fail(ErrorKind::invalid_input, label + " exists already");
        case ENOSYS:
            return unavailable_openat2();
        default:
            return fail(ErrorKind::permanent, errno_message(label, error));
    }
}

bool cancel_fired(const ReadLimits& limits) {
    if (limits.cancel_fd < 0) return false;
    pollfd ready{limits.cancel_fd, POLLIN, 0};
    return ::poll(&ready, 1, 0) == 1;
}

bool expired(const ReadLimits& limits) {
    if (limits.deadline && std::chrono::steady_clock::now() >= *limits.deadline) return true;
    return cancel_fired(limits);
}

std::unexpected<Error> expired_error(const ReadLimits& limits, const std::string& label) {
    if (cancel_fired(limits)) return fail(ErrorKind::timeout, label + ": cancelled");
    return fail(ErrorKind::timeout, label + ": the time allowed ran out");
}

// Splits "a/b/c" into its components; empty components and "." are dropped. nullopt for an
// absolute path or one with "..": callers name paths beneath, lexically.
std::optional<std::vector<std::string>> components(std::string_view relative) {
    if (relative.starts_with('/')) return std::nullopt;
    std::vector<std::string> parts;
    while (!relative.empty()) {
        const auto slash = relative.find('/');
        const auto part = relative.substr(0, slash);
        if (part == "..") return std::nullopt;
        if (!part.empty() && part != ".") parts.emplace_back(part);
        if (slash == std::string_view::npos) break;
        relative.remove_prefix(slash + 1);
    }
    return parts;
}

std::string joined(const std::vector<std::string>& parts, std::size_t count) {
    std::string out;
    for (std::size_t i = 0; i < count; ++i) {
        if (!out.empty()) out += '/';
        out += parts[i];
    }
    return out.empty() ? std::string(".") : out;
}

Expected<void> write_all(const Fd& fd, std::string_view content, const std::string& label) {
    for (std::size_t done = 0; done < content.size();) {
        const ssize_t n = ::pwrite(fd.get(), content.data() + done, content.size() - done,
                                   static_cast<off_t>(done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return fail(ErrorKind::permanent, errno_message("writing " + label));
        done += static_cast<std::size_t>(n);
    }
    return {};
}

EntryKind kind_of(mode_t mode) {
    if (S_ISREG(mode)) return EntryKind::regular;
    if (S_ISDIR(mode)) return EntryKind::directory;
    if (S_ISLNK(mode)) return EntryKind::symlink;
    return EntryKind::other;
}

EntryKind kind_of(int dirfd, const char* name, unsigned char type) {
    switch (type) {
        case DT_REG:
            return EntryKind::regular;
        case DT_DIR:
            return EntryKind::directory;
        case DT_LNK:
            return EntryKind::symlink;
        case DT_UNKNOWN:
            break;
        default:
            return EntryKind::other;
    }
    struct stat st {};
    if (::fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return EntryKind::other;
    return kind_of(st.st_mode);
}

// Calls `each(name, d_type)` for every entry of the directory `fd` except "." and "..",
// reading from its start. false from `each` stops the listing.
template <typename Each>
Expected<void> list(int fd, const std::string& label, Each&& each) {
    if (::lseek(fd, 0, SEEK_SET) < 0)
        return fail(ErrorKind::permanent, errno_message("listing " + label));
    alignas(dirent64) std::array<char, 32 * 1024> buffer;
    for (;;) {
        const ssize_t got = ::getdents64(fd, buffer.data(), buffer.size());
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return fail(ErrorKind::permanent, errno_message("listing " + label));
        if (got == 0) return {};
        for (ssize_t offset = 0; offset < got;) {
            const auto* entry = reinterpret_cast<const dirent64*>(buffer.data() + offset);
            offset += entry->d_reclen;
            const std::string_view name = entry->d_name;
            if (name == "." || name == "..") continue;
            if (!each(entry->d_name, entry->d_type)) return {};
        }
    }
}

// Opens directory `name` of `parent` for emptying: never through a link; a directory a step
// left without owner rwx gets it back (fchmod on the opened directory itself).
Expected<Fd> open_for_removal(int parent, const char* name, const std::string& label) {
    Fd fd(open_beneath(parent, name, O_RDONLY | O_DIRECTORY));
    if (!fd && errno == EACCES) {
        Fd path_fd(open_beneath(parent, name, O_PATH | O_DIRECTORY));
        if (!path_fd) return open_error(label, errno, "a directory");
        // fchmod refuses O_PATH descriptors; /proc/self/fd/N names this very inode.
        const std::string proc = "/proc/self/fd/" + std::to_string(path_fd.get());
        if (::chmod(proc.c_str(), S_IRWXU) != 0)
            return fail(ErrorKind::permanent, errno_message("opening " + label));
        fd.reset(open_beneath(parent, name, O_RDONLY | O_DIRECTORY));
    }
    if (!fd) return open_error(label, errno, "a directory");
    struct stat st {};
    if (::fstat(fd.get(), &st) == 0 && (st.st_mode & S_IRWXU) != S_IRWXU)
        ::fchmod(fd.get(), (st.st_mode & 07777) | S_IRWXU);
    return fd;
}

// Unlinks every non-directory entry and every empty directory of `dir`; the name of the first
// subdirectory that is not empty (to descend into), or nullopt once `dir` is empty.
Expected<std::optional<std::string>> sweep(int dir, const std::string& label) {
    std::optional<std::string> pending;
    std::optional<Error> failure;
    SANDGATE_CHECK(list(dir, label, [&](const char* name, unsigned char type) {
        const EntryKind kind = kind_of(dir, name, type);
        if (kind != EntryKind::directory) {
            if (::unlinkat(dir, name, 0) != 0 && errno != ENOENT)
                failure =
                    Error{ErrorKind::permanent, errno_message("removing " + label + "/" + name)};
            return !failure;
        }
        if (::unlinkat(dir, name, AT_REMOVEDIR) == 0 || errno == ENOENT) return true;
        if (errno != ENOTEMPTY && errno != EEXIST && errno != EACCES && errno != EPERM) {
            failure = Error{ErrorKind::permanent, errno_message("removing " + label + "/" + name)};
            return false;
        }
        pending = name;
        return false;
    }));
    if (failure) return std::unexpected(*failure);
    return pending;
}

// Empties the directory `root` depth-first holding O(1) descriptors: down into the first
// non-empty subdirectory, back up through ".." once a directory is empty. Each climb is
// checked against the device and inode it came from, so a directory moved meanwhile stops the
// removal instead of leading it elsewhere.
Expected<void> empty_tree(Fd root, const std::string& label) {
    Fd current = std::move(root);
    std::vector<std::pair<std::string, std::pair<dev_t, ino_t>>> trail;  // name, parent identity
    std::string emptied;
    for (;;) {
        auto next = SANDGATE_TRY(sweep(current.get(), label));
        if (next) {
            if (*next == emptied)
                return fail(ErrorKind::permanent, label + ": cannot remove " + emptied);
            struct stat here {};
            if (::fstat(current.get(), &here) != 0)
                return fail(ErrorKind::permanent, errno_message("removing " + label));
            auto child =
                SANDGATE_TRY(open_for_removal(current.get(), (next)->c_str(), label + "/" + *next));
            trail.push_back({*next, {here.st_dev, here.st_ino}});
            current = std::move(child);
            emptied.clear();
            continue;
        }
        if (trail.empty()) return {};
        Fd up(::openat(current.get(), "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        struct stat st {};
        if (!up || ::fstat(up.get(), &st) != 0 || st.st_dev != trail.back().second.first ||
            st.st_ino != trail.back().second.second)
            return fail(ErrorKind::permanent, label + ": changed while it was being removed");
        current = std::move(up);
        emptied = trail.back().first;
        trail.pop_back();
    }
}

Expected<void> remove_entry(int parent, const std::string& name, const std::string& label) {
    struct stat st {};
    if (::fstatat(parent, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) return {};
        return fail(ErrorKind::permanent, errno_message("removing " + label));
    }
    if (!S_ISDIR(st.st_mode)) {
        if (::unlinkat(parent, name.c_str(), 0) != 0 && errno != ENOENT)
            return fail(ErrorKind::permanent, errno_message("removing " + label));
        return {};
    }
    auto dir = SANDGATE_TRY(open_for_removal(parent, name.c_str(), label));
    if (auto emptied = empty_tree(std::move(dir), label); !emptied) return emptied;
    if (::unlinkat(parent, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT)
        return fail(ErrorKind::permanent, errno_message("removing " + label));
    return {};
}

// O_CREAT | O_EXCL beneath `dir`; nullopt when an entry is there already.
Expected<std::optional<Fd>> create_exclusive(const SafeDir& dir, std::string_view relative,
                                             const CreateOptions& options,
                                             const std::string& label) {
    const auto parts = components(relative);
    if (!parts || parts->empty())
        return fail(ErrorKind::invalid_input, label + " is not beneath " + dir.label());
    Fd fd(open_beneath(dir.fd(), joined(*parts, parts->size()).c_str(), O_WRONLY | O_CREAT | O_EXCL,
                       options.mode));
    if (!fd && errno == EEXIST) return std::optional<Fd>();
    if (!fd) return open_error(label, errno, "a new file");
    if (options.owner && ::fchown(fd.get(), options.owner->uid, options.owner->gid) != 0)
        return fail(ErrorKind::permanent, errno_message("giving " + label + " to the sandbox"));
    return std::optional<Fd>(std::move(fd));
}

}  // namespace

bool openat2_available() {
    static const bool available = [] {
        open_how how{};
        how.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
        how.resolve = k_resolve;
        const long fd = ::syscall(SYS_openat2, AT_FDCWD, ".", &how, sizeof how);
        if (fd >= 0) {
            ::close(static_cast<int>(fd));
            return true;
        }
        return errno != ENOSYS && errno != EPERM;
    }();
    return available;
}

int open_beneath(int dirfd, const char* relative, int flags, mode_t mode) {
    open_how how{};
    how.flags = static_cast<std::uint64_t>(flags | O_CLOEXEC | O_NOFOLLOW);
    how.mode = (flags & O_CREAT) != 0 ? mode : 0;
    how.resolve = k_resolve;
    for (int attempt = 0; attempt < 16; ++attempt) {
        const long fd = ::syscall(SYS_openat2, dirfd, relative, &how, sizeof how);
        if (fd >= 0) return static_cast<int>(fd);
        if (errno == EAGAIN || errno == EINTR) continue;
        if (errno == EPERM && !openat2_available()) errno = ENOSYS;
        return -1;
    }
    errno = EAGAIN;
    return -1;
}

bool read_limits_expired(const ReadLimits& limits) {
    return expired(limits);
}

Expected<void> remove_tree(const std::filesystem::path& path) {
    const std::filesystem::path parent = path.parent_path().empty() ? "." : path.parent_path();
    const std::string base = path.filename().string();
    if (base.empty() || base == "." || base == "..")
        return fail(ErrorKind::invalid_input, "refusing to remove '" + path.string() + "'");
    if (!openat2_available()) return unavailable_openat2();
    Fd fd(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));  // the trusted parent
    if (!fd && errno == ENOENT) return {};
    if (!fd) return fail(ErrorKind::permanent, errno_message("removing " + path.string()));
    return remove_entry(fd.get(), base, path.string());
}

std::optional<std::string> relative_beneath(const std::filesystem::path& root,
                                            const std::filesystem::path& path) {
    const auto relative = path.lexically_normal().lexically_relative(root.lexically_normal());
    if (relative.empty() || *relative.begin() == "..") return std::nullopt;
    return relative.generic_string();
}

Expected<std::string> read_all(const Fd& fd, const ReadLimits& limits, const std::string& label) {
    std::string text;
    std::array<char, k_chunk> buffer;
    for (;;) {
        if (expired(limits)) return expired_error(limits, label);
        const ssize_t got = ::read(fd.get(), buffer.data(), buffer.size());
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return fail(ErrorKind::permanent, errno_message("reading " + label));
        if (got == 0) return text;
        if (text.size() + static_cast<std::size_t>(got) > limits.max_bytes)
            return fail(ErrorKind::invalid_input,
                        label + " is larger than " + std::to_string(limits.max_bytes) + " bytes");
        text.append(buffer.data(), static_cast<std::size_t>(got));
    }
}

Expected<std::string> read_file_beneath(const std::filesystem::path& root,
                                        const std::filesystem::path& path, const ReadLimits& limits,
                                        const std::string& label) {
    const auto relative = relative_beneath(root, path);
    if (!relative || *relative == ".")
        return fail(ErrorKind::invalid_input, label + " is not beneath " + root.string());
    auto dir = SANDGATE_TRY(SafeDir::open_trusted(root, root.string()));
    return dir.read_file(*relative, limits, label);
}

Expected<SafeDir> SafeDir::open_trusted(const std::filesystem::path& path, std::string label) {
    if (!openat2_available()) return unavailable_openat2();
    Fd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) return open_error(label, errno, "a directory");
    return SafeDir(std::move(fd), path, std::move(label));
}

Expected<SafeDir> SafeDir::make_trusted(const std::filesystem::path& path,
                                        const CreateOptions& options, std::string label) {
    if (::mkdir(path.c_str(), options.mode) == 0) {
        auto dir = open_trusted(path, std::move(label));
        if (dir && options.owner &&
            ::fchown(dir->fd(), options.owner->uid, options.owner->gid) != 0)
            return fail(ErrorKind::permanent,
                        errno_message("giving " + dir->label() + " to the sandbox"));
        return dir;
    }
    if (errno != EEXIST) return fail(ErrorKind::permanent, errno_message("creating " + label));
    return open_trusted(path, std::move(label));
}

Expected<SafeDir> SafeDir::open_dir(std::string_view relative, std::string label) const {
    const auto parts = components(relative);
    if (!parts) return fail(ErrorKind::invalid_input, label + " is not beneath " + m_label);
    Fd fd(open_beneath(m_fd.get(), joined(*parts, parts->size()).c_str(), O_RDONLY | O_DIRECTORY));
    if (!fd) return open_error(label, errno, "a directory");
    return SafeDir(std::move(fd), m_path / joined(*parts, parts->size()), std::move(label));
}

Expected<SafeDir> SafeDir::make_dirs(std::string_view relative, const CreateOptions& options,
                                     std::string label) const {
    const auto parts = components(relative);
    if (!parts) return fail(ErrorKind::invalid_input, label + " is not beneath " + m_label);
    Fd current(::fcntl(m_fd.get(), F_DUPFD_CLOEXEC, 0));
    if (!current) return fail(ErrorKind::unavailable, errno_message("dup"));
    for (const auto& part : *parts) {
        Fd next(open_beneath(current.get(), part.c_str(), O_RDONLY | O_DIRECTORY));
        if (!next && errno == ENOENT) {
            if (::mkdirat(current.get(), part.c_str(), options.mode) != 0 && errno != EEXIST)
                return fail(ErrorKind::permanent, errno_message("creating " + label));
            next.reset(open_beneath(current.get(), part.c_str(), O_RDONLY | O_DIRECTORY));
            if (next && options.owner &&
                ::fchown(next.get(), options.owner->uid, options.owner->gid) != 0)
                return fail(ErrorKind::permanent,
                            errno_message("giving " + label + " to the sandbox"));
        }
        if (!next) return open_error(label, errno, "a directory");
        current = std::move(next);
    }
    return SafeDir(std::move(current), m_path / joined(*parts, parts->size()), std::move(label));
}

Expected<Fd> SafeDir::open_file(std::string_view relative, const std::string& label,
                                struct stat* stat) const {
    return open_regular(relative, label, stat, nullptr);
}

Expected<std::optional<Fd>> SafeDir::open_file_if_present(std::string_view relative,
                                                          const std::string& label,
                                                          struct stat* stat) const {
    bool missing = false;
    auto fd = open_regular(relative, label, stat, &missing);
    if (!fd && missing) return std::optional<Fd>();
    if (!fd) return std::unexpected(fd.error());
    return std::optional<Fd>(std::move(*fd));
}

Expected<Fd> SafeDir::open_regular(std::string_view relative, const std::string& label,
                                   struct stat* stat, bool* missing) const {
    const auto parts = components(relative);
    if (!parts || parts->empty())
        return fail(ErrorKind::invalid_input, label + " is not beneath " + m_label);
    Fd fd(open_beneath(m_fd.get(), joined(*parts, parts->size()).c_str(),
                       O_RDONLY | O_NONBLOCK | O_NOCTTY));
    if (!fd) {
        if (missing != nullptr) *missing = errno == ENOENT;
        return open_error(label, errno, "a regular file");
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0)
        return fail(ErrorKind::permanent, errno_message("reading " + label));
    if (!S_ISREG(st.st_mode))
        return fail(ErrorKind::invalid_input, label + " is not a regular file");
    // Reads block again (a regular file ignores O_NONBLOCK, but a caller may hand the fd on).
    ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
    if (stat != nullptr) *stat = st;
    return fd;
}

Expected<std::string> SafeDir::read_file(std::string_view relative, const ReadLimits& limits,
                                         const std::string& label) const {
    auto text = SANDGATE_TRY(read_file_if_present(relative, limits, label));
    if (!text) return fail(ErrorKind::invalid_input, label + " does not exist");
    return std::move(*text);
}

Expected<std::optional<std::string>> SafeDir::read_file_if_present(std::string_view relative,
                                                                   const ReadLimits& limits,
                                                                   const std::string& label) const {
    struct stat st {};
    bool missing = false;
    auto fd = open_regular(relative, label, &st, &missing);
    if (!fd && missing) return std::optional<std::string>();
    if (!fd) return std::unexpected(fd.error());
    if (static_cast<std::uint64_t>(st.st_size) > limits.max_bytes)
        return fail(ErrorKind::invalid_input,
                    label + " is larger than " + std::to_string(limits.max_bytes) + " bytes");
    auto text = SANDGATE_TRY(read_all(*fd, limits, label));
    return std::optional<std::string>(std::move(text));
}

Expected<void> SafeDir::create_file(std::string_view relative, std::string_view content,
                                    const CreateOptions& options, const std::string& label) const {
    auto made = SANDGATE_TRY(create_file_once(relative, content, options, label));
    if (!made) return fail(ErrorKind::invalid_input, label + " exists already");
    return {};
}

Expected<bool> SafeDir::create_file_once(std::string_view relative, std::string_view content,
                                         const CreateOptions& options,
                                         const std::string& label) const {
    auto fd = SANDGATE_TRY(create_exclusive(*this, relative, options, label));
    if (!fd) return false;
    SANDGATE_CHECK(write_all(*fd, content, label));
    return true;
}

Expected<Fd> create_new_file(const SafeDir& dir, std::string_view relative,
                             const CreateOptions& options, const std::string& label) {
    auto fd = SANDGATE_TRY(create_exclusive(dir, relative, options, label));
    if (!fd) return fail(ErrorKind::invalid_input, label + " exists already");
    return std::move(*fd);
}

Expected<void> SafeDir::replace_file(std::string_view name, std::string_view content,
                                     const CreateOptions& options, const std::string& label) const {
    if (name.empty() || name.find('/') != std::string_view::npos || name == "." || name == "..")
        return fail(ErrorKind::invalid_input, label + " is not a name in " + m_label);
    static std::atomic<unsigned> counter{0};
    const std::string temp = "." + std::string(name) + ".sandgate-" + std::to_string(::getpid()) +
                             "-" + std::to_string(counter.fetch_add(1));
    if (auto made = create_file(temp, content, options, label); !made) return made;
    if (::renameat(m_fd.get(), temp.c_str(), m_fd.get(), std::string(name).c_str()) != 0) {
        const int saved = errno;
        ::unlinkat(m_fd.get(), temp.c_str(), 0);
        return fail(ErrorKind::permanent, errno_message("writing " + label, saved));
    }
    return {};
}

Expected<void> SafeDir::remove(std::string_view relative, const std::string& label) const {
    auto parts = components(relative);
    if (!parts || parts->empty())
        return fail(ErrorKind::invalid_input, label + " is not beneath " + m_label);
    const std::string name = parts->back();
    if (parts->size() == 1) return remove_entry(m_fd.get(), name, label);
    Fd parent(open_beneath(m_fd.get(), joined(*parts, parts->size() - 1).c_str(),
                           O_RDONLY | O_DIRECTORY));
    if (!parent) {
        if (errno == ENOENT) return {};
        return open_error(label, errno, "beneath " + m_label);
    }
    return remove_entry(parent.get(), name, label);
}

Expected<void> SafeDir::clear() const {
    Fd copy(open_beneath(m_fd.get(), ".", O_RDONLY | O_DIRECTORY));
    if (!copy) return open_error(m_label, errno, "a directory");
    return empty_tree(std::move(copy), m_label);
}

Expected<void> SafeDir::walk(const std::function<WalkStep(const WalkEntry&)>& visit,
                             const ReadLimits& limits) const {
    // Depth-first over relative paths, each directory opened beneath this one afresh: O(1)
    // descriptors however deep, and no step of the walk can be led outside.
    std::vector<std::string> pending{""};
    std::size_t visited = 0;
    while (!pending.empty()) {
        const std::string dir = std::move(pending.back());
        pending.pop_back();
        Fd fd(open_beneath(m_fd.get(), dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY));
        if (!fd) {
            if (errno == ENOSYS) return unavailable_openat2();
            continue;  // gone, replaced by a link, another mount, closed: not part of the tree
        }
        std::optional<Error> stop;
        auto listed = list(fd.get(), m_label, [&](const char* name, unsigned char type) {
            if ((++visited & 63) == 0 && expired(limits)) {
                stop = expired_error(limits, m_label).error();
                return false;
            }
            WalkEntry entry{dir.empty() ? std::string(name) : dir + "/" + name,
                            kind_of(fd.get(), name, type)};
            const WalkStep step = visit(entry);
            if (entry.kind == EntryKind::directory && step == WalkStep::descend)
                pending.push_back(std::move(entry.relative));
            return true;
        });
        if (!listed) return listed;
        if (stop) return std::unexpected(*stop);
    }
    return {};
}

Expected<void> SafeDir::chown_tree(const Owner& owner, const std::vector<std::string>& skip) const {
    struct stat st {};
    if (::fstat(m_fd.get(), &st) == 0 && (st.st_uid != owner.uid || st.st_gid != owner.gid) &&
        ::fchown(m_fd.get(), owner.uid, owner.gid) != 0)
        return fail(ErrorKind::permanent, errno_message("giving " + m_label + " to the sandbox"));
    // Each entry through the directory fd it was listed from, opened beneath: fchownat on a
    // multi-component path could be sent through a symlink swapped in meanwhile.
    std::vector<std::string> pending{""};
    while (!pending.empty()) {
        const std::string dir = std::move(pending.back());
        pending.pop_back();
        Fd fd(open_beneath(m_fd.get(), dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY));
        if (!fd) continue;
        std::optional<Error> failure;
        auto listed = list(fd.get(), m_label, [&](const char* name, unsigned char) {
            const std::string relative = dir.empty() ? std::string(name) : dir + "/" + name;
            if (std::find(skip.begin(), skip.end(), relative) != skip.end()) return true;
            struct stat entry {};
            if (::fstatat(fd.get(), name, &entry, AT_SYMLINK_NOFOLLOW) != 0) return true;
            if ((entry.st_uid != owner.uid || entry.st_gid != owner.gid) &&
                ::fchownat(fd.get(), name, owner.uid, owner.gid, AT_SYMLINK_NOFOLLOW) != 0 &&
                errno != ENOENT) {
                failure = Error{ErrorKind::permanent,
                                errno_message("giving " + m_label + " to the sandbox")};
                return false;
            }
            if (S_ISDIR(entry.st_mode)) pending.push_back(relative);
            return true;
        });
        if (!listed) return listed;
        if (failure) return std::unexpected(*failure);
    }
    return {};
}

namespace {

std::pair<std::string, std::string> split_last(const std::string& relative) {
    const auto slash = relative.rfind('/');
    if (slash == std::string::npos) return {".", relative};
    return {relative.substr(0, slash), relative.substr(slash + 1)};
}

Expected<void> copy_file(const SafeDir& from, const SafeDir& to, const std::string& relative,
                         const std::optional<Owner>& owner) {
    struct stat st {};
    auto in = SANDGATE_TRY(from.open_file(relative, relative, &st));
    Fd out(open_beneath(to.fd(), relative.c_str(), O_WRONLY | O_CREAT | O_EXCL, st.st_mode & 0777));
    if (!out) return open_error(relative, errno, "a new file");
    if (owner && ::fchown(out.get(), owner->uid, owner->gid) != 0)
        return fail(ErrorKind::permanent, errno_message("giving " + relative + " to the sandbox"));
    for (;;) {
        const ssize_t n = ::copy_file_range(in.get(), nullptr, out.get(), nullptr, 1 << 30, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return fail(ErrorKind::permanent, errno_message("copying " + relative));
        if (n == 0) return {};
    }
}

Expected<void> copy_link(const SafeDir& from, const SafeDir& to, const std::string& relative,
                         const std::optional<Owner>& owner) {
    const auto [parent, name] = split_last(relative);
    auto source = from.open_dir(parent, relative);
    auto target = to.open_dir(parent, relative);
    if (!source) return std::unexpected(source.error());
    if (!target) return std::unexpected(target.error());
    std::array<char, 4096> buffer;
    const ssize_t n = ::readlinkat(source->fd(), name.c_str(), buffer.data(), buffer.size());
    if (n < 0 || static_cast<std::size_t>(n) == buffer.size())
        return fail(ErrorKind::permanent, errno_message("reading the link " + relative));
    const std::string link(buffer.data(), static_cast<std::size_t>(n));
    if (::symlinkat(link.c_str(), target->fd(), name.c_str()) != 0)
        return fail(ErrorKind::permanent, errno_message("copying the link " + relative));
    if (owner &&
        ::fchownat(target->fd(), name.c_str(), owner->uid, owner->gid, AT_SYMLINK_NOFOLLOW) != 0)
        return fail(ErrorKind::permanent, errno_message("giving " + relative + " to the sandbox"));
    return {};
}

}  // namespace

Expected<void> copy_tree(const SafeDir& from, const SafeDir& to, const std::optional<Owner>& owner,
                         const std::vector<std::string>& skip) {
    std::optional<Error> failure;
    auto walked = from.walk([&](const WalkEntry& entry) {
        if (failure || std::find(skip.begin(), skip.end(), entry.relative) != skip.end())
            return WalkStep::skip;
        Expected<void> done;
        switch (entry.kind) {
            case EntryKind::directory: {
                auto made = to.make_dirs(entry.relative, {0755, owner}, entry.relative);
                if (!made) done = std::unexpected(made.error());
                break;
            }
            case EntryKind::regular:
                done = copy_file(from, to, entry.relative, owner);
                break;
            case EntryKind::symlink:
                done = copy_link(from, to, entry.relative, owner);
                break;
            case EntryKind::other:
                break;
        }
        if (!done) failure = done.error();
        return failure ? WalkStep::skip : WalkStep::descend;
    });
    if (!walked) return walked;
    if (failure) return std::unexpected(*failure);
    return {};
}

}  // namespace sandbox
