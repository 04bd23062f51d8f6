#include "jobs/git/repo_info.hpp"

#include <git2.h>

#include <memory>

namespace jobs {
namespace {

struct RepoDeleter {
    void operator()(git_repository* repo) const { git_repository_free(repo); }
};
struct ReferenceDeleter {
    void operator()(git_reference* ref) const { git_reference_free(ref); }
};
struct RemoteDeleter {
    void operator()(git_remote* remote) const { git_remote_free(remote); }
};
struct IteratorDeleter {
    void operator()(git_reference_iterator* it) const { git_reference_iterator_free(it); }
};
struct ObjectDeleter {
    void operator()(git_object* object) const { git_object_free(object); }
};

// The first tag (by name) whose commit is `head`, as "refs/tags/NAME"; "" for none.
std::string tag_at(git_repository* repo, const git_oid& head) {
    git_reference_iterator* raw = nullptr;
    if (git_reference_iterator_glob_new(&raw, repo, "refs/tags/*") != 0) return "";
    std::unique_ptr<git_reference_iterator, IteratorDeleter> it(raw);
    std::string found;
    git_reference* ref_raw = nullptr;
    while (git_reference_next(&ref_raw, it.get()) == 0) {
        std::unique_ptr<git_reference, ReferenceDeleter> ref(ref_raw);
        git_object* peeled_raw = nullptr;
        if (git_reference_peel(&peeled_raw, ref.get(), GIT_OBJECT_COMMIT) != 0) continue;
        std::unique_ptr<git_object, ObjectDeleter> peeled(peeled_raw);
        const std::string name = git_reference_name(ref.get());
        if (git_oid_equal(git_object_id(peeled.get()), &head) && (found.empty() || name < found))
            found = name;
    }
    return found;
}

// libgit2's global state, initialised once for the process and kept.
void init_libgit2() {
    static const int k_once = [] {
        const int count = git_libgit2_init();
        git_libgit2_opts(GIT_OPT_SET_OWNER_VALIDATION,
                         0);  // as in ensure_libgit2 (git_handles.cpp)
        return count;
    }();
    (void)k_once;
}

}  // namespace

std::string repository_from_url(std::string_view url) {
    std::string path(url);
    if (path.ends_with("/")) path.pop_back();
    if (path.ends_with(".git")) path.resize(path.size() - 4);
    auto scheme = path.find("://");
    if (scheme != std::string::npos) {
        auto slash = path.find('/', scheme + 3);
        if (slash == std::string::npos) return "";
        path = path.substr(slash + 1);
    } else if (auto colon = path.find(':'); colon != std::string::npos) {
        path = path.substr(colon + 1);  // git@host:owner/name
    }
    // The last two components.
    auto last = path.rfind('/');
    if (last == std::string::npos || last == 0) return "";
    auto before = path.rfind('/', last - 1);
    std::string result = before == std::string::npos ? path : path.substr(before + 1);
    return result.find('/') == std::string::npos || result.front() == '/' ? "" : result;
}

RepoInfo read_repo_info(const std::filesystem::path& directory) {
    init_libgit2();
    RepoInfo info;
    git_repository* raw = nullptr;
    if (git_repository_open_ext(&raw, directory.c_str(), 0, nullptr) != 0) return info;
    std::unique_ptr<git_repository, RepoDeleter> repo(raw);
    git_reference* head_raw = nullptr;
    if (git_repository_head(&head_raw, repo.get()) == 0) {
        std::unique_ptr<git_reference, ReferenceDeleter> head(head_raw);
        if (git_reference_is_branch(head.get()) || git_reference_is_tag(head.get()))
            info.ref = git_reference_name(head.get());
        if (const git_oid* oid = git_reference_target(head.get())) {
            char hex[GIT_OID_HEXSZ + 1] = {};
            git_oid_tostr(hex, sizeof hex, oid);
            info.sha = hex;
            if (info.ref.empty() && git_repository_head_detached(repo.get()) == 1)
                info.ref = tag_at(repo.get(), *oid);
        }
    }
    git_remote* remote_raw = nullptr;
    if (git_remote_lookup(&remote_raw, repo.get(), "origin") == 0) {
        std::unique_ptr<git_remote, RemoteDeleter> remote(remote_raw);
        if (const char* url = git_remote_url(remote.get()))
            info.repository = repository_from_url(url);
    }
    if (auto slash = info.repository.find('/'); slash != std::string::npos)
        info.owner = info.repository.substr(0, slash);
    return info;
}

}  // namespace jobs
