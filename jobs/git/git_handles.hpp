#pragma once
// RAII owners for libgit2 handles. Every libgit2 object sandgate holds lives in one of these
// (a std::unique_ptr with the matching git_*_free), so no exit path leaks or double-frees.
// ensure_libgit2() initialises the library once per process; it is never shut down (other
// threads may still hold handles at exit).

#include <git2.h>

#include <memory>
#include <string>
#include <string_view>

#include "common/error.hpp"

namespace jobs {

template <typename T, void (*Free)(T*)>
struct GitFree {
    void operator()(T* handle) const { Free(handle); }
};

template <typename T, void (*Free)(T*)>
using GitPtr = std::unique_ptr<T, GitFree<T, Free>>;

using GitRepository = GitPtr<git_repository, git_repository_free>;
using GitRemote = GitPtr<git_remote, git_remote_free>;
using GitObject = GitPtr<git_object, git_object_free>;
using GitCommit = GitPtr<git_commit, git_commit_free>;
using GitTree = GitPtr<git_tree, git_tree_free>;
using GitOdb = GitPtr<git_odb, git_odb_free>;
using GitOdbObject = GitPtr<git_odb_object, git_odb_object_free>;
using GitIndex = GitPtr<git_index, git_index_free>;
using GitConfig = GitPtr<git_config, git_config_free>;
using GitRevwalk = GitPtr<git_revwalk, git_revwalk_free>;
using GitSubmodule = GitPtr<git_submodule, git_submodule_free>;
using GitReference = GitPtr<git_reference, git_reference_free>;
using GitDiff = GitPtr<git_diff, git_diff_free>;

// A git_buf that is disposed of on destruction.
class GitBuf {
public:
    GitBuf() = default;
    GitBuf(const GitBuf&) = delete;
    GitBuf& operator=(const GitBuf&) = delete;
    ~GitBuf() { git_buf_dispose(&m_buf); }
    git_buf* get() { return &m_buf; }
    std::string_view view() const { return {m_buf.ptr ? m_buf.ptr : "", m_buf.size}; }

private:
    git_buf m_buf = GIT_BUF_INIT;
};

// Initialises libgit2 once (thread-safe; later calls are free). Owner validation is left on:
// sandgate only opens repositories it created itself.
void ensure_libgit2();

// "what: <libgit2's last error message>" (or the numeric code when libgit2 has none).
std::string git_error_text(std::string_view what, int code);

// A common::Error of `kind` built from git_error_text().
std::unexpected<common::Error> git_fail(common::ErrorKind kind, std::string_view what, int code);

// Parses a full 40-hex SHA. Abbreviations are refused: a gate checks one exact commit.
common::Expected<git_oid> parse_sha(std::string_view sha);

std::string oid_hex(const git_oid& oid);

}  // namespace jobs
