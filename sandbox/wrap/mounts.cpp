#include "sandbox/wrap/mounts.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <optional>

namespace sandbox {
namespace {

// Host files under /etc the wrap shows read-only: dynamic linking, time zone, name databases.
// Small regular files are copied into the sandbox's root (`--file`: no mount each, which is
// what makes bwrap slow); directories are bound. Nothing that commonly holds a secret (shadow,
// gitconfig, npmrc, pip.conf, ssh, sudoers, machine-id).
constexpr const char* k_etc_files[] = {
    "ld.so.cache",    "ld.so.conf",   "localtime",  "timezone", "os-release",
    "debian_version", "protocols",    "services",   "networks", "gai.conf",
    "host.conf",      "locale.alias", "mime.types",
};
// alternatives: cc, c++, java, python...; ssl: certificates; java: its conf symlinks point here.
constexpr const char* k_etc_dirs[] = {"alternatives", "ssl", "java-17-openjdk", "java-21-openjdk"};

// Under a user namespace created by root the sandbox uid is host uid 0 for permission checks,
// so every root-writable procfs file would be writable: bwrap itself only covers /proc/irq and
// /proc/bus. These are bound read-only from the host's procfs (sysctls of the net tree still
// follow the opener's network namespace), or masked with /dev/null.
// (Files that need a capability besides root's DAC, like kcore, kmsg or kpageflags, stay
// closed anyway: every capability is dropped.)
constexpr const char* k_proc_read_only[] = {"sys", "fs", "driver", "acpi"};
constexpr const char* k_proc_masked[] = {"sysrq-trigger", "mtrr", "latency_stats", "timer_list"};

// The top-level names that may hold the system: symlinks into /usr on merged-/usr systems,
// real directories elsewhere.
constexpr const char* k_top_level[] = {"bin", "sbin", "lib", "lib32", "lib64", "libx32"};

// Absolute, with no empty, "." or ".." component and no trailing separator: a path whose text
// compares the way its components do. The plan's paths are of this kind, and comparing their
// text spares the allocation of a path per component (the layout is compared often).
bool plain(std::string_view text) {
    if (text.empty() || text.front() != '/') return false;
    if (text.size() == 1) return true;
    if (text.back() == '/') return false;
    for (std::size_t start = 1; start <= text.size();) {
        const std::size_t end = std::min(text.find('/', start), text.size());
        const std::string_view part = text.substr(start, end - start);
        if (part.empty() || part == "." || part == "..") return false;
        start = end + 1;
    }
    return true;
}

std::size_t depth(const std::filesystem::path& path) {
    const std::string_view text = path.native();
    if (plain(text))
        return text.size() == 1
                   ? 1
                   : static_cast<std::size_t>(std::count(text.begin(), text.end(), '/')) + 1;
    return static_cast<std::size_t>(std::distance(path.begin(), path.end()));
}

// path_within on the text of plain paths; nullopt when either is not plain.
std::optional<bool> plain_within(std::string_view inner, std::string_view outer) {
    if (!plain(inner) || !plain(outer)) return std::nullopt;
    if (outer.size() == 1) return true;  // "/" holds every absolute path
    return inner.starts_with(outer) && (inner.size() == outer.size() || inner[outer.size()] == '/');
}

std::filesystem::path strip_trailing(std::filesystem::path path) {
    std::string text = path.string();
    while (text.size() > 1 && text.back() == '/') text.pop_back();
    return text;
}

MountEntry data_entry(std::filesystem::path dest, std::string content) {
    MountEntry entry;
    entry.kind = MountKind::data;
    entry.dest = std::move(dest);
    entry.content = std::move(content);
    entry.priority = 1;
    return entry;
}

std::optional<std::filesystem::path> env_path(const char* name) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value != '/') return std::nullopt;
    return std::filesystem::path(value);
}

}  // namespace

bool path_within(const std::filesystem::path& inner, const std::filesystem::path& outer) {
    if (const auto within = plain_within(inner.native(), outer.native())) return *within;
    auto i = inner.begin();
    for (auto o = outer.begin(); o != outer.end(); ++o, ++i) {
        if (o->empty()) continue;  // a trailing separator
        if (i == inner.end() || *i != *o) return false;
    }
    return true;
}

Expected<std::filesystem::path> checked_bind_path(const std::filesystem::path& path,
                                                  std::string_view what, MustExist must_exist) {
    if (path.empty()) return fail(ErrorKind::invalid_input, std::string(what) + ": empty path");
    std::error_code ec;
    std::filesystem::path absolute = std::filesystem::absolute(path, ec);
    if (ec)
        return fail(ErrorKind::invalid_input,
                    std::string(what) + " " + path.string() + ": " + ec.message());
    absolute = strip_trailing(absolute.lexically_normal());
    // Walk every prefix with lstat: a symlink anywhere would let whoever planted it choose
    // what gets mounted (bwrap resolves the destination inside the new root).
    std::filesystem::path prefix;
    for (const auto& part : absolute) {
        prefix /= part;
        struct stat st {};
        if (::lstat(prefix.c_str(), &st) != 0) {
            if (must_exist == MustExist::yes)
                return fail(ErrorKind::invalid_input, std::string(what) + " " + absolute.string() +
                                                          ": " + errno_message(prefix.string()));
            return absolute;
        }
        if (S_ISLNK(st.st_mode)) {
            auto target = std::filesystem::read_symlink(prefix, ec);
            return fail(ErrorKind::invalid_input,
                        std::string(what) + " " + absolute.string() + ": " + prefix.string() +
                            " is a symlink (to " + (ec ? std::string("?") : target.string()) +
                            "); bind paths must not pass through symlinks, give the resolved "
                            "path");
        }
    }
    return absolute;
}

namespace {

// Appends an entry. The layout is made for every run, so each path is built once, from text: a
// path splits its text into components when made.
void add(std::vector<MountEntry>& entries, MountKind kind, std::string dest, std::string source,
         int priority) {
    MountEntry& entry = entries.emplace_back();
    entry.kind = kind;
    entry.dest = std::move(dest);
    entry.source = std::move(source);
    entry.priority = priority;
}

// /usr, and the top-level names as the host has them: symlinks into /usr, or bound directories.
void add_system_tree(std::vector<MountEntry>& entries) {
    add(entries, MountKind::ro_bind, "/usr", "/usr", 0);
    std::error_code ec;
    for (const char* name : k_top_level) {
        const std::string top = std::string("/") + name;
        // readlink first: on merged-/usr systems one call answers (EINVAL: not a symlink).
        char target[PATH_MAX];
        const ssize_t length = ::readlink(top.c_str(), target, sizeof target);
        if (length > 0 && static_cast<std::size_t>(length) < sizeof target) {
            add(entries, MountKind::symlink, top,
                std::string(target, static_cast<std::size_t>(length)), 0);
        } else if (length < 0 && errno == EINVAL && std::filesystem::is_directory(top, ec)) {
            add(entries, MountKind::ro_bind, top, top, 0);
        }
    }
}

// The procfs files a sandbox uid that is host root could write: only then (unprivileged, DAC
// already says no).
void add_proc_protection(std::vector<MountEntry>& entries) {
    if (::geteuid() != 0) return;
    for (const char* name : k_proc_read_only) {
        const std::string path = std::string("/proc/") + name;
        add(entries, MountKind::ro_bind_try, path, path, 1);
    }
    for (const char* name : k_proc_masked) {
        std::string path = std::string("/proc/") + name;
        if (::access(path.c_str(), F_OK) == 0)
            add(entries, MountKind::hide_file, std::move(path), {}, 1);
    }
}

// The allowlisted host files of /etc.
void add_host_etc_files(std::vector<MountEntry>& entries) {
    for (const char* name : k_etc_files) {
        const std::string path = std::string("/etc/") + name;
        // Followed: os-release and localtime are symlinks on Debian. Neither looked at nor
        // read here: bwrap copies the file from an fd the plan opens (wrap_files'
        // open_host_file, which leaves out what is missing, odd or large).
        add(entries, MountKind::host_file, path, path, 1);
    }
}

// The allowlisted host directories of /etc, and resolv.conf when asked for.
void add_host_etc_dirs(std::vector<MountEntry>& entries, WithResolv with_resolv) {
    for (const char* name : k_etc_dirs) {
        const std::string path = std::string("/etc/") + name;
        add(entries, MountKind::ro_bind_try, path, path, 0);
    }
    std::error_code ec;
    if (with_resolv == WithResolv::yes && std::filesystem::exists("/etc/resolv.conf", ec)) {
        // Often a symlink into /run: bind the file it resolves to, never /run itself.
        auto resolved = std::filesystem::canonical("/etc/resolv.conf", ec);
        if (!ec) add(entries, MountKind::ro_bind, "/etc/resolv.conf", resolved.native(), 0);
    }
}

// The generated identity and name files of /etc: the sandbox user with `home`, localhost.
void add_generated_etc(std::vector<MountEntry>& entries, unsigned uid, unsigned gid,
                       const std::filesystem::path& home) {
    const std::string uid_text = std::to_string(uid);
    const std::string gid_text = std::to_string(gid);
    // The login shell of a CI user: bash where there is one (bash sets $SHELL from it).
    const std::string login_shell = ::access("/bin/bash", F_OK) == 0 ? "/bin/bash" : "/bin/sh";
    entries.push_back(data_entry("/etc/passwd",
                                 "root:x:0:0:root:/root:/usr/sbin/nologin\n"
                                 "sandgate:x:" +
                                     uid_text + ":" + gid_text + ":sandgate:" + home.string() +
                                     ":" + login_shell +
                                     "\n"
                                     "nobody:x:65534:65534:nobody:/nonexistent:"
                                     "/usr/sbin/nologin\n"));
    entries.push_back(
        data_entry("/etc/group", "root:x:0:\nsandgate:x:" + gid_text + ":\nnogroup:x:65534:\n"));
    entries.push_back(data_entry("/etc/hosts",
                                 "127.0.0.1\tlocalhost sandgate\n"
                                 "::1\tlocalhost ip6-localhost ip6-loopback\n"));
    entries.push_back(data_entry("/etc/hostname", "sandgate\n"));
    entries.push_back(data_entry("/etc/nsswitch.conf",
                                 "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n"
                                 "networks: files\nprotocols: files\nservices: files\n"));
}

}  // namespace

std::vector<MountEntry> system_mounts(WithResolv with_resolv) {
    std::vector<MountEntry> entries;
    entries.reserve(48);
    add_system_tree(entries);
    add_proc_protection(entries);
    add_host_etc_dirs(entries, with_resolv);
    return entries;
}

std::vector<MountEntry> system_files(unsigned uid, unsigned gid,
                                     const std::filesystem::path& home) {
    std::vector<MountEntry> entries;
    entries.reserve(24);
    add_host_etc_files(entries);
    add_generated_etc(entries, uid, gid, home);
    return entries;
}

Expected<void> refuse_host_roots(const std::filesystem::path& path, std::string_view what) {
    static constexpr std::string_view k_host_roots[] = {"/tmp",     "/var/tmp", "/run", "/var/run",
                                                        "/dev/shm", "/proc",    "/sys", "/dev",
                                                        "/etc",     "/boot"};
    const auto refuse = [&](std::string_view root) {
        return fail(ErrorKind::invalid_input,
                    std::string(what) + " " + path.string() + ": would expose " +
                        std::string(root) +
                        " to the sandbox (the host's /tmp, /run, HOME and system trees are never "
                        "bound); use a project directory");
    };
    for (const std::string_view root : k_host_roots) {
        // The roots are plain: with a plain `path` no path object is made for them.
        const auto within = plain_within(root, path.native());
        if (within ? *within : path_within(std::filesystem::path(root), path)) return refuse(root);
    }
    if (auto home = env_path("HOME")) {
        const auto root = strip_trailing(home->lexically_normal());
        if (path_within(root, path)) return refuse(root.native());
    }
    return {};
}

std::vector<std::filesystem::path> agent_private_paths(const std::vector<MountEntry>& entries) {
    std::vector<std::filesystem::path> candidates;
    const auto home = env_path("HOME");
    if (auto state = env_path("XDG_STATE_HOME")) candidates.push_back(*state / "sandgate");
    if (auto config = env_path("XDG_CONFIG_HOME")) candidates.push_back(*config / "sandgate");
    if (home) {
        candidates.push_back(*home / ".local/state/sandgate");
        candidates.push_back(*home / ".config/sandgate");
    }
    if (auto dir = env_path("SANDGATE_STATE_DIR")) candidates.push_back(*dir);
    if (auto file = env_path("SANDGATE_CONFIG")) candidates.push_back(*file);
    std::vector<std::filesystem::path> existing;
    std::error_code ec;
    const auto exposed = [&](const std::filesystem::path& path) {
        return std::any_of(entries.begin(), entries.end(), [&](const MountEntry& entry) {
            return (entry.kind == MountKind::bind || entry.kind == MountKind::ro_bind ||
                    entry.kind == MountKind::ro_bind_try) &&
                   path_within(path, entry.dest);
        });
    };
    for (auto& candidate : candidates) {
        candidate = strip_trailing(candidate.lexically_normal());
        if (!exposed(candidate) || !std::filesystem::exists(candidate, ec)) continue;
        if (std::find(existing.begin(), existing.end(), candidate) == existing.end())
            existing.push_back(candidate);
    }
    return existing;
}

void order_mounts(std::vector<MountEntry>& entries) {
    // The keys are computed once and small indices sorted: a comparison that measured depths
    // and a merge that moved whole entries (two paths and a string each) cost a tenth of a plan.
    struct Key {
        std::size_t depth;
        int priority;
        std::size_t index;
    };
    std::vector<Key> keys;
    keys.reserve(entries.size());
    for (std::size_t i = 0; i < entries.size(); ++i)
        keys.push_back({depth(entries[i].dest), entries[i].priority, i});
    // The index breaks ties, so an unstable sort keeps the stable order.
    std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
        if (a.depth != b.depth) return a.depth < b.depth;
        if (a.priority != b.priority) return a.priority < b.priority;
        return a.index < b.index;
    });
    std::vector<MountEntry> ordered;
    ordered.reserve(entries.size());
    for (const Key& key : keys) ordered.push_back(std::move(entries[key.index]));
    entries = std::move(ordered);
}

bool visible_inside(const std::vector<MountEntry>& ordered, const std::filesystem::path& path) {
    const MountEntry* deepest = nullptr;
    for (const auto& entry : ordered) {
        if (path_within(path, entry.dest)) deepest = &entry;  // later entries cover earlier ones
    }
    if (deepest == nullptr) return false;
    return deepest->kind == MountKind::ro_bind || deepest->kind == MountKind::ro_bind_try ||
           deepest->kind == MountKind::bind ||
           ((deepest->kind == MountKind::data || deepest->kind == MountKind::host_file) &&
            deepest->dest == path);
}

}  // namespace sandbox
