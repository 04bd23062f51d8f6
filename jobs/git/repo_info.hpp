#pragma once
// What the github context says about the repository a run starts in, read with libgit2:
// HEAD's sha and ref (its branch, or the tag it is detached at), and owner/name from the
// `origin` remote (https, ssh or scp-like URL).
// Outside a git repository every field stays empty; nothing here fails.

#include <filesystem>
#include <string>

namespace jobs {

struct RepoInfo {
    std::string sha;         // 40 hex digits, or ""
    std::string ref;         // "refs/heads/main"; "refs/tags/v1" when HEAD is detached at a
                             // commit a tag names (the first such tag by name); "" otherwise
    std::string repository;  // "owner/name", or ""
    std::string owner;
};

RepoInfo read_repo_info(const std::filesystem::path& directory);

// "https://github.com/nektos/act.git", "git@github.com:nektos/act" -> "nektos/act"; "" when
// the URL names no owner/name.
std::string repository_from_url(std::string_view url);

}  // namespace jobs
