#include "jobs/git/git_mirror.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "common/fd.hpp"
#include "jobs/git/git_handles.hpp"
#include "jobs/git/git_lock.hpp"
#include "jobs/git/git_mirror_layout.hpp"
#include "jobs/git/git_remove.hpp"
#include "jobs/git/mirror_gc.hpp"

namespace jobs {
namespace {

namespace fs = std::filesystem;
using common::ErrorKind;

enum class CommitCheck { present, missing, corrupt };

std::unexpected<common::Error> io_fail(const std::string& what) {
    return common::fail(ErrorKind::permanent, common::errno_message(what));
}

// Every direct ref must name an object the mirror has: a ref to a missing object means lost
// objects (a deleted pack), and a fetch would then negotiate as if we had them.
bool refs_intact(git_repository* repository) {
    git_reference_iterator* raw = nullptr;
    if (git_reference_iterator_new(&raw, repository) != 0) return false;
    std::unique_ptr<git_reference_iterator,
                    GitFree<git_reference_iterator, git_reference_iterator_free>>
        it(raw);
    git_odb* odb_raw = nullptr;
    if (git_repository_odb(&odb_raw, repository) != 0) return false;
    GitOdb odb(odb_raw);
    git_reference* ref = nullptr;
    int rc;
    while ((rc = git_reference_next(&ref, it.get())) == 0) {
        GitReference owned(ref);
        const git_oid* target = git_reference_target(owned.get());
        if (target != nullptr && !git_odb_exists(odb.get(), target)) return false;
    }
    return rc == GIT_ITEROVER;
}

// Opens `gitdir` only if it is a whole mirror: marker present, a bare repository, refs intact.
GitRepository open_trusted(const fs::path& gitdir) {
    std::error_code ec;
    if (!fs::is_regular_file(gitdir / k_mirror_marker, ec)) return nullptr;
    git_repository* raw = nullptr;
    const unsigned flags = GIT_REPOSITORY_OPEN_NO_SEARCH | GIT_REPOSITORY_OPEN_BARE;
    if (git_repository_open_ext(&raw, gitdir.c_str(), flags, nullptr) != 0) return nullptr;
    GitRepository repository(raw);
    if (!git_repository_is_bare(repository.get()) || !refs_intact(repository.get())) return nullptr;
    return repository;
}

int check_tree_entry(const char*, const git_tree_entry* entry, void* payload) {
    if (git_tree_entry_type(entry) != GIT_OBJECT_BLOB) return 0;  // trees are read by the walk
    return git_odb_exists(static_cast<git_odb*>(payload), git_tree_entry_id(entry)) ? 0 : -1;
}

// present: the commit, its tree and every tree beneath are readable and every blob exists.
CommitCheck check_commit(git_repository* repository, const git_oid& oid) {
    git_odb* odb_raw = nullptr;
    if (git_repository_odb(&odb_raw, repository) != 0) return CommitCheck::corrupt;
    GitOdb odb(odb_raw);
    if (!git_odb_exists(odb.get(), &oid)) return CommitCheck::missing;
    git_commit* commit_raw = nullptr;
    if (git_commit_lookup(&commit_raw, repository, &oid) != 0) return CommitCheck::corrupt;
    GitCommit commit(commit_raw);
    git_tree* tree_raw = nullptr;
    if (git_commit_tree(&tree_raw, commit.get()) != 0) return CommitCheck::corrupt;
    GitTree tree(tree_raw);
    if (git_tree_walk(tree.get(), GIT_TREEWALK_PRE, check_tree_entry, odb.get()) != 0)
        return CommitCheck::corrupt;
    return CommitCheck::present;
}

void write_marker(const fs::path& gitdir, const RemoteUrl& remote) {
    common::Fd fd(::open((gitdir / k_mirror_marker).c_str(),
                         O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644));
    if (!fd) return;
    const std::string text = "remote " + remote.fetch_url + "\n";
    if (::write(fd.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size()))
        ::fsync(fd.get());
}

// Removes leftovers of a crashed creation or replacement (we hold the lock: nobody else is
// creating this mirror).
void remove_leftovers(const fs::path& dir, const std::string& name) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
        const std::string file = entry.path().filename().string();
        if (file.starts_with(name + ".tmp-") || file.starts_with(name + ".trash-"))
            (void)remove_tree(entry.path());
    }
}

// Creates a whole mirror at `gitdir`: init and fetch in a temporary directory, marker last,
// then swap it into place (the old, untrusted one is moved aside and removed).
common::Expected<void> create_mirror(const fs::path& gitdir, const RemoteUrl& remote,
                                     const RemoteUrl& gated, const MirrorRequest& request) {
    const fs::path dir = gitdir.parent_path();
    const std::string name = gitdir.filename().string();
    remove_leftovers(dir, name);
    std::string tmp = (dir / (name + ".tmp-XXXXXX")).string();
    if (::mkdtemp(tmp.data()) == nullptr) return io_fail("mkdtemp " + tmp);
    ::chmod(tmp.c_str(), 0755);  // readable by the sandbox's host identity (see prepare)
    auto created = [&]() -> common::Expected<void> {
        git_repository* raw = nullptr;
        if (int rc = git_repository_init(&raw, tmp.c_str(), 1); rc != 0)
            return git_fail(ErrorKind::permanent, "init mirror " + tmp, rc);
        GitRepository repository(raw);
        auto fetched = fetch_refspecs(repository.get(), remote, mirror_refspecs(request.ref),
                                      request.token, gated);
        if (!fetched) return fetched;
        write_marker(tmp, remote);
        return {};
    }();
    if (!created) {
        (void)remove_tree(tmp);
        return created;
    }
    std::error_code ec;
    if (fs::exists(fs::symlink_status(gitdir, ec))) {
        std::string trash = (dir / (name + ".trash-XXXXXX")).string();
        if (::mkdtemp(trash.data()) == nullptr) return io_fail("mkdtemp " + trash);
        if (::rename(gitdir.c_str(), (trash + "/old").c_str()) != 0)
            return io_fail("rename " + gitdir.string());
        (void)remove_tree(trash);
    }
    if (::rename(tmp.c_str(), gitdir.c_str()) != 0) {
        auto error = io_fail("rename " + tmp);
        (void)remove_tree(tmp);
        return error;
    }
    return {};
}

// Asks the remote for the commit itself (servers that allow reachable or any SHA in wants).
void fetch_by_oid(git_repository* repository, const RemoteUrl& remote, const RemoteUrl& gated,
                  const MirrorRequest& request) {
    const std::string spec = "+" + request.sha + ":refs/sandgate/wanted/" + request.sha;
    if (auto fetched = fetch_refspecs(repository, remote, {spec}, request.token, gated); !fetched)
        spdlog::debug("fetch of {} by id from {}: {}", request.sha, remote.fetch_url,
                      fetched.error().message);
}

common::Expected<void> make_private_dir(const fs::path& dir) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec)
        return common::fail(ErrorKind::permanent,
                            "cannot create " + dir.string() + ": " + ec.message());
    return {};
}

// The mirror's paths, its directories made, the old flat layout adopted: under the lock it
// returns, which the caller holds for as long as it touches the mirror.
common::Expected<FileLock> prepare(const fs::path& state_dir, const fs::path& mirrors_dir,
                                   const MirrorLayout& layout) {
    SANDGATE_CHECK(make_private_dir(mirrors_dir));
    ::chmod(state_dir.c_str(), 0700);  // mirrors may hold private code
    SANDGATE_CHECK(make_private_dir(layout.lock.parent_path()));
    auto lock = FileLock::acquire(layout.lock, LockMode::exclusive);
    if (!lock) return lock;
    // Made under the lock: the mirror gc (mirror_gc.hpp) may have moved the scope away while
    // we waited for it.
    SANDGATE_CHECK(make_private_dir(layout.gitdir.parent_path()));
    if (auto used = record_mirror_use(mirrors_dir, layout.scope.filename().string()); !used)
        spdlog::warn("mirror {}: {}", layout.scope.string(), used.error().message);
    if (auto adopted = adopt_legacy_mirror(layout); !adopted)
        spdlog::warn("old mirror {} not adopted ({}); cloning anew", layout.legacy_gitdir.string(),
                     adopted.error().message);
    // The mirror is bound read-only into the sandboxes of its repository's jobs, which run as an
    // unprivileged host uid when sandgate is root (sandbox/wrap/identity.hpp): its own directory
    // must be readable by anyone who reaches it (mkdtemp made it 0700, as it did for older
    // mirrors). The state dir (0700) still keeps other host users out; the sandbox gets the mirror
    // bound through the portal (sandbox/wrap/wrap_bwrap.cpp).
    ::chmod(layout.gitdir.c_str(), 0755);
    return lock;
}

}  // namespace

MirrorCache::MirrorCache(fs::path state_dir) : m_state_dir(std::move(state_dir)) {}

fs::path MirrorCache::default_state_dir() {
    if (const char* xdg = std::getenv("XDG_STATE_HOME"); xdg && *xdg == '/')
        return fs::path(xdg) / "sandgate";
    const char* home = std::getenv("HOME");
    return fs::path(home && *home ? home : "/") / ".local/state/sandgate";
}

common::Expected<Mirror> MirrorCache::ensure_commit(const MirrorRequest& request) const {
    return ensure(request, Trust::verify);
}

common::Expected<Mirror> MirrorCache::reclone(const MirrorRequest& request) const {
    return ensure(request, Trust::distrust);
}

common::Expected<fs::path> MirrorCache::scope_dir(std::string_view text) const {
    return make_mirror_scope(m_state_dir, text);
}

common::Expected<Mirror> MirrorCache::ensure(const MirrorRequest& request, Trust trust) const {
    ensure_libgit2();
    auto remote = parse_remote(request.remote);
    if (!remote) return std::unexpected(remote.error());
    auto scope = request.scope.empty() ? remote : parse_remote(request.scope);
    if (!scope) return std::unexpected(scope.error());
    if (!request.scope.empty()) SANDGATE_CHECK(check_module_remote(m_state_dir, *scope, *remote));
    auto oid = SANDGATE_TRY(parse_sha(request.sha));
    const MirrorLayout layout = mirror_layout(mirrors_dir(), *scope, *remote);
    // Held to the end: the clone, fetch and check below are the lock holder's alone.
    const auto lock = SANDGATE_TRY(prepare(m_state_dir, mirrors_dir(), layout));

    Mirror mirror;
    mirror.remote = *remote;
    mirror.scope_remote = *scope;
    mirror.commit = oid;
    mirror.gitdir = layout.gitdir;
    mirror.scope = layout.scope;
    GitRepository repository = trust == Trust::verify ? open_trusted(mirror.gitdir) : nullptr;
    auto recreate = [&]() -> common::Expected<void> {
        repository.reset();
        std::error_code ec;
        const bool existed = fs::exists(fs::symlink_status(mirror.gitdir, ec));
        if (existed)
            spdlog::warn("mirror {} is incomplete or damaged; re-cloning", mirror.gitdir.string());
        if (auto created = create_mirror(mirror.gitdir, *remote, *scope, request); !created)
            return created;
        mirror.event = existed ? MirrorEvent::recloned : MirrorEvent::cloned;
        repository = open_trusted(mirror.gitdir);
        if (!repository)
            return common::fail(ErrorKind::permanent, "mirror " + mirror.gitdir.string() +
                                                          " is unusable right after cloning");
        return {};
    };
    if (!repository) SANDGATE_CHECK(recreate());

    CommitCheck check = check_commit(repository.get(), oid);
    if (check == CommitCheck::missing && mirror.event == MirrorEvent::none) {
        SANDGATE_CHECK(fetch_refspecs(repository.get(), *remote, mirror_refspecs(request.ref),
                                      request.token, *scope));
        mirror.event = MirrorEvent::fetched;
        check = check_commit(repository.get(), oid);
        if (check == CommitCheck::missing && !refs_intact(repository.get()))
            check = CommitCheck::corrupt;
    }
    if (check == CommitCheck::corrupt) {
        if (mirror.event == MirrorEvent::cloned || mirror.event == MirrorEvent::recloned)
            return common::fail(ErrorKind::permanent, "commit " + request.sha + " from " +
                                                          remote->fetch_url +
                                                          " is unreadable right after cloning");
        SANDGATE_CHECK(recreate());
        check = check_commit(repository.get(), oid);
    }
    if (check == CommitCheck::missing) {
        fetch_by_oid(repository.get(), *remote, *scope, request);
        check = check_commit(repository.get(), oid);
    }
    if (check == CommitCheck::corrupt)
        return common::fail(ErrorKind::permanent, "commit " + request.sha + " in mirror " +
                                                      mirror.gitdir.string() + " is unreadable");
    mirror.presence =
        check == CommitCheck::present ? CommitPresence::present : CommitPresence::missing;
    return mirror;
}

}  // namespace jobs
