#include "jobs/actions/action_source.hpp"

#include <sys/stat.h>

#include "jobs/actions/action_archive.hpp"
#include "jobs/git/git_fetch.hpp"
#include "jobs/git/git_handles.hpp"
#include "jobs/git/git_lock.hpp"
#include "jobs/git/git_url.hpp"

namespace jobs {
namespace {

using common::ErrorKind;

bool is_directory(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 &&
           S_ISDIR(st.st_mode);  // trusted path: the configured source
}

common::Expected<GitRepository> open_mirror(const std::filesystem::path& gitdir) {
    ensure_libgit2();
    git_repository* raw = nullptr;
    if (is_directory(gitdir.string())) {
        if (int rc = git_repository_open_bare(&raw, gitdir.c_str()); rc != 0)
            return git_fail(ErrorKind::permanent, "opening the action mirror " + gitdir.string(),
                            rc);
    } else if (int rc = git_repository_init(&raw, gitdir.c_str(), 1); rc != 0) {
        return git_fail(ErrorKind::permanent, "creating the action mirror " + gitdir.string(), rc);
    }
    return GitRepository(raw);
}

std::optional<git_oid> commit_of(git_repository* repository, const std::string& name) {
    git_object* raw = nullptr;
    if (git_revparse_single(&raw, repository, (name + "^{commit}").c_str()) != 0)
        return std::nullopt;
    GitObject object(raw);
    return *git_object_id(object.get());
}

std::optional<git_oid> resolve_in(git_repository* repository, const std::string& ref) {
    for (const std::string& name : {"refs/tags/" + ref, "refs/heads/" + ref}) {
        git_reference* raw = nullptr;
        if (git_reference_lookup(&raw, repository, name.c_str()) != 0) continue;
        GitReference reference(raw);
        if (auto oid = commit_of(repository, name)) return oid;
    }
    if (is_full_sha(ref)) return commit_of(repository, ref);
    return std::nullopt;
}

}  // namespace

common::Expected<ActionSource> ActionSource::parse(std::string_view text) {
    ActionSource source;
    source.m_text = text.empty() ? "none" : std::string(text);
    if (text.empty() || text == "none") return source;
    std::string base(text);
    while (base.size() > 1 && base.back() == '/') base.pop_back();
    if (base.starts_with("file://")) base = base.substr(7);
    if (base.starts_with("http://") || base.starts_with("https://")) {
        auto remote = parse_remote(base);
        if (!remote)
            return common::fail(ErrorKind::invalid_input,
                                "--actions-source: " + remote.error().message);
        source.m_base = remote->fetch_url;
        return source;
    }
    if (base.find("://") != std::string::npos || !base.starts_with("/"))
        return common::fail(ErrorKind::invalid_input,
                            "--actions-source '" + std::string(text) +
                                "': an https:// or file:// URL, an absolute directory or 'none'");
    source.m_base = base;
    source.m_local = true;
    return source;
}

std::string ActionSource::repository_url(const ActionRef& ref) const {
    const std::string plain = m_base + "/" + ref.owner + "/" + ref.repo;
    if (m_local && is_directory(plain + ".git")) return plain + ".git";
    return plain;
}

common::Expected<std::string> ActionSource::fetch(const ActionRef& ref,
                                                  const ActionStore& store) const {
    if (!configured())
        return common::fail(ErrorKind::unavailable, "no action source is configured");
    const std::string url = repository_url(ref);
    if (m_local && !is_directory(url))
        return common::fail(ErrorKind::unavailable, "the source has no " + url);
    auto remote = SANDGATE_TRY(parse_remote(url));
    std::error_code ec;
    std::filesystem::create_directories(store.mirrors_root(), ec);  // trusted path: the store's own
    if (ec)
        return common::fail(ErrorKind::permanent,
                            "creating " + store.mirrors_root().string() + ": " + ec.message());
    const auto gitdir = store.mirrors_root() / (ref.archive_name() + ".git");
    auto lock = FileLock::acquire(store.mirrors_root() / (ref.archive_name() + ".lock"),
                                  LockMode::exclusive);
    if (!lock) return std::unexpected(lock.error());
    auto repository = SANDGATE_TRY(open_mirror(gitdir));
    std::optional<git_oid> commit =
        is_full_sha(ref.ref) ? resolve_in(repository.get(), ref.ref) : std::nullopt;
    if (!commit) {
        const std::vector<std::string> refspecs{"+refs/heads/*:refs/heads/*",
                                                "+refs/tags/*:refs/tags/*"};
        // Anonymous: the token is nullopt, so no credential of any kind is offered.
        SANDGATE_CHECK(fetch_refspecs(repository.get(), remote, refspecs, std::nullopt, remote));
        commit = resolve_in(repository.get(), ref.ref);
    }
    if (!commit)
        return common::fail(
            ErrorKind::invalid_input,
            "'" + ref.repository() + "' has no tag, branch or commit '" + ref.ref + "'");
    const std::string sha = oid_hex(*commit);
    if (!store.has_archive(ref, sha)) {
        auto temp = SANDGATE_TRY(store.archive_temp_path(ref, sha));
        const std::string top = ref.owner + "-" + ref.repo + "-" + sha.substr(0, 7);
        if (auto written = write_commit_archive(repository.get(), *commit, top, temp); !written) {
            std::filesystem::remove(temp, ec);  // trusted path: the store's own temp file
            return std::unexpected(written.error());
        }
        SANDGATE_CHECK(store.commit_archive(temp, ref, sha));
    }
    return sha;
}

}  // namespace jobs
