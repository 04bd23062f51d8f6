#include "jobs/git/git_worktree.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <deque>
#include <fstream>
#include <map>
#include <set>

#include "jobs/git/git_handles.hpp"
#include "jobs/git/git_remove.hpp"

namespace jobs {
namespace {

namespace fs = std::filesystem;
using common::ErrorKind;

common::Expected<void> write_text(const fs::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) return common::fail(ErrorKind::permanent, "cannot write " + path.string());
    return {};
}

common::Expected<void> configure(git_repository* repository, const WorktreeSpec& spec) {
    git_config* raw = nullptr;
    if (int rc = git_repository_config(&raw, repository); rc != 0)
        return git_fail(ErrorKind::permanent, "config of " + spec.path.string(), rc);
    GitConfig config(raw);
    int rc = 0;
    if (!spec.origin_url.empty()) {
        rc = git_config_set_string(config.get(), "remote.origin.url", spec.origin_url.c_str());
        if (rc == 0)
            rc = git_config_set_string(config.get(), "remote.origin.fetch",
                                       "+refs/heads/*:refs/remotes/origin/*");
    }
    if (rc == 0)
        rc = git_config_set_int32(config.get(), "gc.auto", 0);  // never repack a job's view
    if (rc != 0) return git_fail(ErrorKind::permanent, "config of " + spec.path.string(), rc);
    return {};
}

// The commits at depth `depth` (1 = the commit itself) that have parents: git's shallow
// boundary for `--depth depth`, by breadth-first minimum depth over all parents.
common::Expected<std::vector<std::string>> shallow_boundary(git_repository* repository,
                                                            const git_oid& start, unsigned depth) {
    std::map<std::string, unsigned> seen{{oid_hex(start), 1}};
    std::deque<std::pair<git_oid, unsigned>> queue{{start, 1}};
    std::set<std::string> boundary;
    while (!queue.empty()) {
        auto [oid, level] = queue.front();
        queue.pop_front();
        git_commit* raw = nullptr;
        if (int rc = git_commit_lookup(&raw, repository, &oid); rc != 0)
            return git_fail(ErrorKind::permanent, "commit " + oid_hex(oid), rc);
        GitCommit commit(raw);
        const unsigned parents = git_commit_parentcount(commit.get());
        if (parents == 0) continue;
        if (level >= depth) {
            boundary.insert(oid_hex(oid));
            continue;
        }
        for (unsigned i = 0; i < parents; ++i) {
            const git_oid parent = *git_commit_parent_id(commit.get(), i);
            auto [it, inserted] = seen.emplace(oid_hex(parent), level + 1);
            if (inserted) queue.emplace_back(parent, level + 1);
        }
    }
    return std::vector<std::string>(boundary.begin(), boundary.end());
}

common::Expected<void> write_shallow(git_repository* repository, const WorktreeSpec& spec) {
    auto boundary = SANDGATE_TRY(shallow_boundary(repository, spec.commit, spec.depth));
    if (boundary.empty()) return {};
    std::string text;
    for (const auto& hex : boundary) text += hex + "\n";
    return write_text(spec.path / ".git/shallow", text);
}

common::Expected<void> record_ref(git_repository* repository, const WorktreeSpec& spec) {
    if (spec.ref.empty()) return {};
    std::string branch = spec.ref;
    if (branch.starts_with("refs/heads/"))
        branch.erase(0, 11);
    else if (branch.starts_with("refs/"))
        return {};  // tags, pulls: HEAD says it all
    const std::string name = "refs/remotes/origin/" + branch;
    if (!git_reference_is_valid_name(name.c_str())) return {};
    git_reference* raw = nullptr;
    if (int rc = git_reference_create(&raw, repository, name.c_str(), &spec.commit, 1, nullptr);
        rc != 0)
        return git_fail(ErrorKind::permanent, "ref " + name, rc);
    GitReference owned(raw);
    return {};
}

common::Expected<GitRepository> init_repository(const WorktreeSpec& spec) {
    git_repository_init_options options = GIT_REPOSITORY_INIT_OPTIONS_INIT;
    options.flags = GIT_REPOSITORY_INIT_MKPATH | GIT_REPOSITORY_INIT_NO_REINIT;
    git_repository* raw = nullptr;
    if (int rc = git_repository_init_ext(&raw, spec.path.c_str(), &options); rc != 0)
        return git_fail(ErrorKind::permanent, "init worktree " + spec.path.string(), rc);
    git_repository_free(raw);
    // Alternates are read when the object database is first loaded: write them, then reopen.
    const fs::path objects = fs::absolute(spec.mirror_gitdir) / "objects";
    SANDGATE_CHECK(write_text(spec.path / ".git/objects/info/alternates", objects.string() + "\n"));
    if (int rc = git_repository_open_ext(&raw, spec.path.c_str(), GIT_REPOSITORY_OPEN_NO_SEARCH,
                                         nullptr);
        rc != 0)
        return git_fail(ErrorKind::permanent, "open worktree " + spec.path.string(), rc);
    return GitRepository(raw);
}

}  // namespace

common::Expected<void> materialise_worktree(const WorktreeSpec& spec) {
    ensure_libgit2();
    auto repository = SANDGATE_TRY(init_repository(spec));
    git_repository* repo = repository.get();
    if (auto configured = configure(repo, spec); !configured) return configured;
    const std::string hex = oid_hex(spec.commit);
    git_object* raw = nullptr;
    if (int rc = git_object_lookup(&raw, repo, &spec.commit, GIT_OBJECT_COMMIT); rc != 0)
        return git_fail(ErrorKind::permanent, "commit " + hex, rc);
    GitObject commit(raw);
    git_checkout_options options = GIT_CHECKOUT_OPTIONS_INIT;
    options.checkout_strategy = GIT_CHECKOUT_FORCE;
    if (int rc = git_checkout_tree(repo, commit.get(), &options); rc != 0)
        return git_fail(ErrorKind::permanent, "checkout of " + hex, rc);
    if (int rc = git_repository_set_head_detached(repo, &spec.commit); rc != 0)
        return git_fail(ErrorKind::permanent, "HEAD of " + spec.path.string(), rc);
    if (auto recorded = record_ref(repo, spec); !recorded) return recorded;
    if (spec.depth > 0)
        if (auto shallow = write_shallow(repo, spec); !shallow) return shallow;
    return {};
}

std::vector<std::pair<std::string, std::string>> worktree_git_environment(
    const fs::path& worktree) {
    return {{"GIT_CONFIG_COUNT", "1"},
            {"GIT_CONFIG_KEY_0", "safe.directory"},
            {"GIT_CONFIG_VALUE_0", worktree.string()}};
}

// ---- JobWorktree / WorktreeArea ----

JobWorktree::JobWorktree(fs::path path, fs::path lease_path, FileLock lease)
    : m_path(std::move(path)), m_lease_path(std::move(lease_path)), m_lease(std::move(lease)) {}

JobWorktree::JobWorktree(JobWorktree&& other) noexcept
    : m_path(std::move(other.m_path)),
      m_lease_path(std::move(other.m_lease_path)),
      m_lease(std::move(other.m_lease)) {
    other.m_lease.reset();  // the moved-from object must not remove the worktree
}

JobWorktree& JobWorktree::operator=(JobWorktree&& other) noexcept {
    if (this != &other) {
        (void)remove();
        m_path = std::move(other.m_path);
        m_lease_path = std::move(other.m_lease_path);
        m_lease = std::move(other.m_lease);
        other.m_lease.reset();
    }
    return *this;
}

JobWorktree::~JobWorktree() {
    (void)remove();
}

common::Expected<void> JobWorktree::remove() {
    if (!m_lease) return {};
    auto removed = remove_tree(m_path);
    if (!removed) return removed;  // keep the lease: a later reap retries
    ::unlink(m_lease_path.c_str());
    m_lease.reset();
    return {};
}

WorktreeArea::WorktreeArea(const fs::path& state_dir) : m_dir(state_dir / "worktrees") {}

common::Expected<JobWorktree> WorktreeArea::create(std::string_view label) {
    std::error_code ec;
    fs::create_directories(m_dir, ec);
    if (ec)
        return common::fail(ErrorKind::permanent,
                            "cannot create " + m_dir.string() + ": " + ec.message());
    unsigned char bytes[6];
    if (::getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes))
        return common::fail(ErrorKind::permanent, common::errno_message("getrandom"));
    std::string id;
    for (char c : label)
        id += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ? c : '_';
    if (id.empty() || id.size() > 40) id = id.empty() ? "job" : id.substr(0, 40);
    id += '-';
    for (unsigned char b : bytes)
        id += "0123456789abcdef"[b >> 4], id += "0123456789abcdef"[b & 15];
    const fs::path lease_path = m_dir / (id + ".lease");
    // The lease exists (and is held) before the directory, so a reaper never mistakes a
    // worktree being created for an orphan.
    auto lease =
        SANDGATE_TRY(FileLock::acquire(lease_path, LockMode::exclusive, LockWait::try_once));
    const std::string pid = std::to_string(::getpid()) + "\n";
    if (::write(lease.fd(), pid.data(), pid.size()) < 0) { /* the pid is informational */
    }
    const fs::path path = m_dir / id;
    if (::mkdir(path.c_str(), 0700) != 0) {
        auto error =
            common::fail(ErrorKind::permanent, common::errno_message("mkdir " + path.string()));
        ::unlink(lease_path.c_str());
        return error;
    }
    return JobWorktree(path, lease_path, std::move(lease));
}

std::size_t WorktreeArea::reap_stale() {
    std::size_t reaped = 0;
    std::error_code ec;
    std::vector<fs::path> entries;  // a snapshot: reaping removes entries as it goes
    for (const auto& entry : fs::directory_iterator(m_dir, ec)) entries.push_back(entry.path());
    std::ranges::sort(entries);
    for (const fs::path& path : entries) {
        if (path.extension() == ".lease") {
            common::Fd fd(::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC));
            if (!fd || ::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) continue;  // alive (or gone)
            // An empty lease may be one being created (opened, not yet locked): leave it
            // unless it is old.
            struct stat st {};
            if (::fstat(fd.get(), &st) != 0) continue;
            if (st.st_size == 0) {
                if (::time(nullptr) - st.st_mtime > 60) ::unlink(path.c_str());
                continue;
            }
            fs::path dir = path;
            dir.replace_extension();
            if (remove_tree(dir)) {
                ::unlink(path.c_str());
                ++reaped;
            }
        } else if (fs::is_directory(fs::symlink_status(path, ec))) {
            fs::path lease = path;
            lease += ".lease";
            if (!fs::exists(lease, ec) && remove_tree(path)) ++reaped;
        }
    }
    return reaped;
}

}  // namespace jobs
