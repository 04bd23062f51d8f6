#include "jobs/git/git_provider.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>

#include "jobs/git/git_handles.hpp"
#include "sandbox/access/safe_access.hpp"

namespace jobs {
namespace {

namespace fs = std::filesystem;
using common::ErrorKind;

bool is_full_sha(const std::string& text) {
    return text.size() == 40 &&
           text.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos;
}

// `path:` made absolute below `workspace`; refuses anything that leaves it.
common::Expected<fs::path> target_path(const fs::path& workspace, const std::string& path) {
    if (path.empty() || path == ".") return workspace;
    const fs::path target = (workspace / path).lexically_normal();
    const fs::path relative = target.lexically_relative(workspace);
    if (fs::path(path).is_absolute() || relative.empty() || *relative.begin() == "..")
        return common::fail(ErrorKind::invalid_input,
                            "actions/checkout path '" + path + "' leaves the workspace");
    return target;
}

// Empties `target` (a previous checkout there, as actions/checkout's clean) and recreates it.
// The workspace itself is removed through its parent, the trusted side's. A `path:` below it
// is the steps' (earlier steps of the leg wrote there): removed and made again beneath the
// workspace's fd, so a link a step left on the way (`sub -> /etc` for `path: sub/x`) fails
// the step instead of leading the removal or the checkout out (sandbox/access/safe_access.hpp).
// libgit2 then writes by path into a directory each component of which was just found or
// made a real one; no step of the leg runs meanwhile.
common::Expected<void> fresh_dir(const fs::path& workspace, const fs::path& target) {
    const auto relative = target.lexically_relative(workspace).generic_string();
    if (relative.empty() || relative == "." || relative == "./") {
        // Emptied in place, never replaced: the job's sandbox, started by an earlier step, has
        // this directory bound, and a new one at the name would not show there.
        std::error_code ec;
        // trusted path: the workspace's parent is sandgate's
        fs::create_directories(target.parent_path(), ec);
        if (::mkdir(target.c_str(), 0755) != 0 && errno != EEXIST)
            return common::fail(ErrorKind::permanent,
                                common::errno_message("mkdir " + target.string()));
        auto dir = SANDGATE_TRY(sandbox::SafeDir::open_trusted(target, "the workspace"));
        return dir.clear();
    }
    const std::string label = "actions/checkout path '" + relative + "'";
    auto root = SANDGATE_TRY(sandbox::SafeDir::open_trusted(workspace, "the workspace"));
    if (auto removed = root.remove(relative, label); !removed) return removed;
    (void)SANDGATE_TRY(root.make_dirs(relative, {0755, std::nullopt}, label));
    return {};
}

}  // namespace

common::Expected<unsigned> parse_fetch_depth(const std::string& text) {
    if (text.empty()) return 1u;
    if (text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos)
        return common::fail(ErrorKind::invalid_input,
                            "actions/checkout fetch-depth '" + text + "' is not a number");
    unsigned depth = 0;
    std::from_chars(text.data(), text.data() + text.size(), depth);  // nine digits at most: fits
    return depth;
}

common::Expected<SubmoduleMode> parse_submodules(const std::string& text) {
    if (text.empty() || text == "false") return SubmoduleMode::none;
    if (text == "true") return SubmoduleMode::top;
    if (text == "recursive") return SubmoduleMode::recursive;
    return common::fail(ErrorKind::invalid_input, "actions/checkout submodules '" + text +
                                                      "' is not true, false or recursive");
}

GitWorkspace::GitWorkspace(const MirrorCache& cache, WorktreeArea& area, GitSource source)
    : m_cache(cache), m_area(area), m_source(std::move(source)) {}

common::Expected<fs::path> GitWorkspace::workspace_for(const std::string& job_key) {
    auto worktree = SANDGATE_TRY(m_area.create(job_key));
    const auto slash = m_source.repository.rfind('/');
    std::string name =
        slash == std::string::npos ? m_source.repository : m_source.repository.substr(slash + 1);
    if (name.empty() || name == "." || name == "..") name = "repository";
    // trusted path: the lease was made just now, before any step of the leg
    const fs::path path = worktree.path() / name;
    // 0755 in a lease the sandbox's host identity may pass through (0711), whatever the umask:
    // a job sandbox's broker runs the steps there as that identity.
    if (::mkdir(path.c_str(), 0755) != 0 || ::chmod(path.c_str(), 0755) != 0 ||
        ::chmod(worktree.path().c_str(), 0711) != 0)
        return common::fail(ErrorKind::permanent, common::errno_message("mkdir " + path.string()));
    std::lock_guard lock(m_mutex);
    m_worktrees.push_back(std::move(worktree));
    return path;
}

fs::path GitWorkspace::leg_root(const fs::path& workspace) const {
    return workspace.parent_path();
}

std::vector<fs::path> GitWorkspace::mirrors_used() const {
    std::lock_guard lock(m_mutex);
    return m_mirrors;
}

common::Expected<std::string> GitWorkspace::resolve_ref(const std::string& ref) const {
    if (ref.empty()) return m_source.sha;
    if (is_full_sha(ref)) return ref;
    MirrorRequest request{m_source.remote, m_source.sha, m_source.ref, m_source.token, ""};
    auto mirror = SANDGATE_TRY(m_cache.ensure_commit(request));
    git_repository* raw = nullptr;
    if (int rc = git_repository_open_bare(&raw, mirror.gitdir.c_str()); rc != 0)
        return git_fail(ErrorKind::permanent, "mirror " + mirror.gitdir.string(), rc);
    GitRepository repository(raw);
    const std::vector<std::string> candidates = {ref, "refs/heads/" + ref, "refs/tags/" + ref,
                                                 "refs/" + ref};
    for (const auto& name : candidates) {
        git_oid oid;
        if (!name.starts_with("refs/") ||
            git_reference_name_to_id(&oid, repository.get(), name.c_str()) != 0)
            continue;
        git_object* object = nullptr;
        if (git_object_lookup(&object, repository.get(), &oid, GIT_OBJECT_ANY) != 0) continue;
        GitObject owned(object);
        git_object* peeled = nullptr;  // an annotated tag names its commit
        if (git_object_peel(&peeled, owned.get(), GIT_OBJECT_COMMIT) != 0) continue;
        GitObject commit(peeled);
        return oid_hex(*git_object_id(commit.get()));
    }
    return common::fail(ErrorKind::invalid_input,
                        "actions/checkout ref '" + ref + "' is not in the mirror of " +
                            mirror.remote.fetch_url + " (offline: only its refs are known)");
}

common::Expected<std::string> GitWorkspace::checkout(const fs::path& workspace,
                                                     const CheckoutRequest& request) {
    if (!request.repository.empty() && request.repository != m_source.repository)
        return common::fail(ErrorKind::unavailable,
                            "actions/checkout of '" + request.repository +
                                "': the gate checks out only the repository under test");
    auto depth = parse_fetch_depth(request.fetch_depth);
    if (!depth) return std::unexpected(depth.error());
    auto submodules = parse_submodules(request.submodules);
    if (!submodules) return std::unexpected(submodules.error());
    auto target = SANDGATE_TRY(target_path(workspace, request.path));
    auto sha = SANDGATE_TRY(resolve_ref(request.ref));
    SANDGATE_CHECK(fresh_dir(workspace, target));
    GitCheckoutRequest git;
    git.source = MirrorRequest{
        m_source.remote, sha, request.ref.empty() ? m_source.ref : request.ref, m_source.token, ""};
    git.path = target;
    git.depth = *depth;
    git.submodules = *submodules;
    auto done = SANDGATE_TRY(checkout_commit(m_cache, git));
    if (done.mirror.presence == CommitPresence::missing)
        return common::fail(ErrorKind::invalid_input,
                            "commit " + sha + " is not in " + done.mirror.remote.fetch_url);
    {
        std::lock_guard lock(m_mutex);
        for (const auto& gitdir : done.mirror_gitdirs)
            if (std::find(m_mirrors.begin(), m_mirrors.end(), gitdir) == m_mirrors.end())
                m_mirrors.push_back(gitdir);
    }
    std::string line = "checked out " + sha;
    if (!git.source.ref.empty()) line += " (" + git.source.ref + ")";
    line += " at " + target.string();
    line += *depth == 0 ? ", whole history" : ", depth " + std::to_string(*depth);
    if (*submodules != SubmoduleMode::none) line += ", with submodules";
    return line;
}

}  // namespace jobs
