// Where the payload's program is, seen from inside the wrap (see payload.hpp).
#include "sandbox/wrap/payload.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <cstdlib>

namespace sandbox {

namespace {

std::string env_value(const Environment& env, std::string_view name) {
    for (const auto& [key, value] : env) {
        if (key == name) return value;
    }
    return {};
}

// Whether some mount or file of the wrap lies at or above `path`. Where none does, the path
// is on the wrap's bare root, where nothing but the mount points exists: a PATH entry of the
// host's HOME, say, holds nothing inside, and needs no stat to say so.
bool covered(const std::vector<MountEntry>& ordered, const std::filesystem::path& path) {
    return std::any_of(ordered.begin(), ordered.end(),
                       [&](const MountEntry& entry) { return path_within(path, entry.dest); });
}

// An entry the wrap makes at exactly `path` itself (no host file behind it): a program copied
// in, or a symlink (its target is then what counts).
const MountEntry* made_at(const std::vector<MountEntry>& ordered,
                          const std::filesystem::path& path) {
    for (const auto& entry : ordered) {
        if (entry.dest == path &&
            (entry.kind == MountKind::program || entry.kind == MountKind::symlink))
            return &entry;
    }
    return nullptr;
}

// The bind showing `path` inside (the deepest one at or above it: later entries cover earlier
// ones), or null when something else is deepest.
const MountEntry* showing_bind(const std::vector<MountEntry>& ordered,
                               const std::filesystem::path& path) {
    const MountEntry* deepest = nullptr;
    for (const auto& entry : ordered) {
        if (path_within(path, entry.dest)) deepest = &entry;
    }
    const bool bind =
        deepest && (deepest->kind == MountKind::bind || deepest->kind == MountKind::ro_bind ||
                    deepest->kind == MountKind::ro_bind_try);
    return bind ? deepest : nullptr;
}

// `path` moved from below `from` to below `to` (path lies within from).
std::filesystem::path rebased(const std::filesystem::path& path, const std::filesystem::path& from,
                              const std::filesystem::path& to) {
    const auto rel = path.lexically_relative(from);
    return rel == "." ? to : to / rel;
}

}  // namespace

int resolve_payload(const std::string& name, const Environment& env,
                    const std::filesystem::path& cwd, const std::vector<MountEntry>& ordered) {
    auto verdict = [&](std::filesystem::path candidate) {
        if (const MountEntry* made = made_at(ordered, candidate)) {
            if (made->kind == MountKind::program) return 0;
            candidate =
                made->source.is_absolute() ? made->source : candidate.parent_path() / made->source;
            if (const MountEntry* next = made_at(ordered, candidate))
                return next->kind == MountKind::program ? 0 : 127;
        }
        if (!covered(ordered, candidate)) return 127;
        // A bind showing a host path elsewhere (the hooks' /__e): the file is at the host side
        // (for a bind moved to the portal, the path its fd was opened from). Most PATH entries
        // do not hold the name: one stat (which follows links, so it also describes the real
        // file) says so without a readlink of every component.
        const MountEntry* bind = showing_bind(ordered, candidate);
        const std::filesystem::path host_side = !bind                       ? candidate
                                                : bind->host_source.empty() ? bind->source
                                                                            : bind->host_source;
        const std::filesystem::path host =
            bind && host_side != bind->dest ? rebased(candidate, bind->dest, host_side) : candidate;
        struct stat st {};
        if (::stat(host.c_str(), &st) != 0) return 127;
        // The real path decides visibility: a symlink may lead out of every mount (one staying
        // within the bind's host side is seen at the bind's destination).
        char real[PATH_MAX];
        if (::realpath(host.c_str(), real) == nullptr) return 127;
        std::filesystem::path seen(real);
        if (host != candidate && path_within(seen, host_side))
            seen = rebased(seen, host_side, bind->dest);
        if (!visible_inside(ordered, seen)) return 127;
        if (!S_ISREG(st.st_mode) || (st.st_mode & 0111) == 0) return 126;
        return 0;
    };
    if (name.find('/') != std::string::npos) {
        std::filesystem::path path(name);
        return verdict(path.is_absolute() ? path : cwd / path);
    }
    const std::string path_list = env_value(env, "PATH");
    int best = 127;
    std::size_t start = 0;
    while (start <= path_list.size()) {
        std::size_t end = path_list.find(':', start);
        if (end == std::string::npos) end = path_list.size();
        std::filesystem::path dir = path_list.substr(start, end - start);
        if (dir.empty()) dir = cwd;
        if (dir.is_relative()) dir = cwd / dir;
        const int result = verdict(dir / name);
        if (result == 0) return 0;
        if (result == 126) best = 126;  // execvp: EACCES is remembered, the search goes on
        start = end + 1;
    }
    return best;
}

std::vector<std::string> failing_payload(int status, const std::string& name) {
    const std::string message = "sandgate: " + name +
                                (status == 127 ? ": command not found inside the sandbox"
                                               : ": permission denied (not executable)");
    return {"/bin/sh", "-c", "printf '%s\\n' \"$1\" >&2; exit " + std::to_string(status),
            "sandgate", message};
}

}  // namespace sandbox
