#include "jobs/git/git_mirror_layout.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>

#include "jobs/git/git_lock.hpp"
#include "jobs/git/git_remove.hpp"
#include "jobs/git/mirror_gc.hpp"

namespace jobs {
namespace {

namespace fs = std::filesystem;
using common::ErrorKind;

bool exists_nofollow(const fs::path& path) {
    std::error_code ec;
    return fs::exists(fs::symlink_status(path, ec));
}

// `path` is `dir` or lies below it (both made physical as far as they exist).
bool is_within(const fs::path& path, const fs::path& dir) {
    std::error_code ec;
    const fs::path real_dir = fs::weakly_canonical(fs::absolute(dir, ec), ec);
    if (ec) return false;
    const fs::path relative = fs::weakly_canonical(path, ec).lexically_relative(real_dir);
    return !ec && !relative.empty() && *relative.begin() != "..";
}

// What crashed creations of the flat layout left beside the old mirror.
void remove_legacy_leftovers(const fs::path& legacy_gitdir) {
    const std::string name = legacy_gitdir.filename().string();
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(legacy_gitdir.parent_path(), ec)) {
        const std::string file = entry.path().filename().string();
        if (file.starts_with(name + ".tmp-") || file.starts_with(name + ".trash-"))
            (void)remove_tree(entry.path());
    }
}

}  // namespace

MirrorLayout mirror_layout(const fs::path& mirrors_dir, const RemoteUrl& scope,
                           const RemoteUrl& remote) {
    const std::string scope_name = mirror_dir_name(scope);
    const std::string name = mirror_dir_name(remote);
    MirrorLayout layout;
    layout.scope = mirrors_dir / scope_name;
    const bool own = remote.key == scope.key;
    layout.gitdir = own ? layout.scope / "repo.git" : layout.scope / "modules" / (name + ".git");
    layout.lock =
        mirrors_dir / "locks" / (own ? scope_name + ".lock" : scope_name + "." + name + ".lock");
    layout.legacy_gitdir = mirrors_dir / (name + ".git");
    layout.legacy_lock = mirrors_dir / (name + ".lock");
    return layout;
}

common::Expected<fs::path> make_mirror_scope(const fs::path& state_dir, std::string_view text) {
    auto remote = SANDGATE_TRY(parse_remote(text));
    const fs::path mirrors = state_dir / "mirrors";
    const fs::path scope = mirror_layout(mirrors, remote, remote).scope;
    std::error_code ec;
    fs::create_directories(scope, ec);
    if (!ec) fs::permissions(mirrors, fs::perms::owner_all, ec);  // mirrors may hold private code
    fs::path real = ec ? fs::path() : fs::canonical(scope, ec);
    if (ec)
        return common::fail(ErrorKind::permanent,
                            "cannot create " + scope.string() + ": " + ec.message());
    // A job of this repository starts: the mirror gc keeps its scope (mirror_gc.hpp).
    if (auto used = record_mirror_use(mirrors, scope.filename().string()); !used)
        spdlog::warn("mirror scope {}: {}", scope.string(), used.error().message);
    return real;
}

common::Expected<void> check_module_remote(const fs::path& state_dir, const RemoteUrl& scope,
                                           const RemoteUrl& remote) {
    if (remote.kind != RemoteKind::local) return {};
    if (scope.kind != RemoteKind::local)
        return common::fail(ErrorKind::invalid_input,
                            "submodule remote '" + remote.fetch_url +
                                "' is a local path under the " + scope.fetch_url +
                                " repository; refused (as git's protocol.file.allow=user)");
    if (is_within(remote.fetch_url, state_dir))
        return common::fail(
            ErrorKind::invalid_input,
            "submodule remote '" + remote.fetch_url + "' lies inside the state directory; refused");
    return {};
}

common::Expected<void> adopt_legacy_mirror(const MirrorLayout& layout) {
    if (exists_nofollow(layout.gitdir) || !exists_nofollow(layout.legacy_gitdir)) return {};
    // Held while renaming: a gate of the flat layout may still be fetching into it.
    auto old_lock = SANDGATE_TRY(FileLock::acquire(layout.legacy_lock, LockMode::exclusive));
    if (!exists_nofollow(layout.legacy_gitdir)) return {};  // another scope adopted it meanwhile
    if (::rename(layout.legacy_gitdir.c_str(), layout.gitdir.c_str()) != 0)
        return common::fail(ErrorKind::permanent,
                            common::errno_message("rename " + layout.legacy_gitdir.string()));
    spdlog::info("mirror {} moved to {}", layout.legacy_gitdir.string(), layout.gitdir.string());
    remove_legacy_leftovers(layout.legacy_gitdir);
    // Unlinked while held: a flat-layout locker waiting on it re-checks the path (FileLock).
    (void)old_lock.remove_lock_file();
    return {};
}

}  // namespace jobs
