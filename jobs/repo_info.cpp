#include "jobs/repo_info.hpp"

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

// libgit2's global state, initialised once for the process and kept.
void init_libgit2() {
    static const int k_once = [] {
        const int count = git_libgit2_init();
        git_libgit2_opts(GIT_OPT_SET_OWNER_VALIDATION, 0);  // as in ensure_libgit2 (git_handles.cpp)
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
        }
    }
    git_remote* remote_raw = nullptr;
    if (git_remote_lookup(&remote_raw, repo.get(), "origin") == 0) {
        std::unique_ptr<git_remote, RemoteDeleter> remote(remote_raw);
        if (const char* url = git_remote_url(remote.get())) info.repository = repository_from_url(url);
    }
    if (auto slash = info.repository.find('/'); slash != std::string::npos)
        info.owner = info.repository.substr(0, slash);
    return info;
}

}  // namespace jobs
