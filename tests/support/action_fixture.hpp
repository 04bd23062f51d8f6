#pragma once
// The real actions of ../shared/corpora/actions for the action-store tests: their bundles
// cloned into bare mirrors (SOURCE/OWNER/REPO.git, a file:// source standing in for
// github.com), the table of the README (tag, bundle commit, upstream commit), and tarballs made
// with libarchive for the refusal cases.

#include <archive.h>
#include <archive_entry.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/helpers/git_fixture.hpp"

namespace tests {

struct CorpusAction {
    std::string owner, repo, tag;
    std::string bundle_sha;    // what the tag names in the bundle (and so in a mirror of it)
    std::string upstream_sha;  // the archive-cache file's name
};

inline const std::vector<CorpusAction>& corpus_actions() {
    static const std::vector<CorpusAction> table{
        {"actions", "setup-python", "v7", "91b337006d77bc934620a651e697d85c92c5b201",
         "5fda3b95a4ea91299a34e894583c3862153e4b97"},
        {"actions", "setup-node", "v7", "f6050b705c1c25263fa5cebebe944f2c0cc4eced",
         "820762786026740c76f36085b0efc47a31fe5020"},
        {"actions", "setup-go", "v7", "97f708e2e5dbe58e666cda77ee3c826ed303ba23",
         "b7ad1dad31e06c5925ef5d2fc7ad053ef454303e"},
        {"actions", "cache", "v5", "e41b6c426fb0813458289a32d082cfde1dae0640",
         "27d5ce7f107fe9357f9df03efb73ab90386fccae"},
        {"dtolnay", "rust-toolchain", "v1", "42bd78258edd451ea3bb64172d301c67497f7e6d",
         "e97e2d8cc328f1b50210efc529dca0028893a2d9"},
    };
    return table;
}

inline std::filesystem::path corpus_dir() {
    return std::filesystem::path(SANDGATE_SHARED_DIR) / "corpora/actions";
}

// SOURCE/OWNER/REPO.git for every corpus action (or only `only`), cloned from the bundles.
inline std::filesystem::path make_mirror_source(const std::filesystem::path& dir,
                                                const std::string& only = "") {
    const auto source = dir / "source";
    for (const auto& action : corpus_actions()) {
        if (!only.empty() && action.repo != only) continue;
        const auto target = source / action.owner / (action.repo + ".git");
        std::filesystem::create_directories(target.parent_path());
        sh("git clone -q --bare " +
           (corpus_dir() / (action.owner + "_" + action.repo + ".bundle")).string() + " " +
           target.string());
    }
    return source;
}

// A bare mirror SOURCE/OWNER/REPO.git holding `files` at one commit tagged `tag`; its SHA.
inline std::string make_action_repo(const std::filesystem::path& source, const std::string& owner,
                                    const std::string& repo, const std::string& tag,
                                    const std::map<std::string, std::string>& files) {
    const auto work = source.parent_path() / ("work-" + owner + "-" + repo);
    const auto sha = make_repo(work, files);
    sh("git -C " + work.string() + " tag " + tag);
    std::filesystem::create_directories(source / owner);
    sh("git clone -q --bare " + work.string() + " " + (source / owner / (repo + ".git")).string());
    return sha;
}

struct TarEntry {
    std::string name;
    unsigned type = AE_IFREG;
    std::string content;  // a file's bytes, or a link's target
    bool hardlink = false;
};

// Writes `entries` as a tar.gz at `path`.
inline void write_tarball(const std::filesystem::path& path, const std::vector<TarEntry>& entries) {
    archive* writer = archive_write_new();
    archive_write_add_filter_gzip(writer);
    archive_write_set_format_pax_restricted(writer);
    REQUIRE(archive_write_open_filename(writer, path.c_str()) == ARCHIVE_OK);
    for (const auto& item : entries) {
        archive_entry* entry = archive_entry_new();
        archive_entry_set_pathname(entry, item.name.c_str());
        archive_entry_set_filetype(entry, item.type);
        archive_entry_set_perm(entry, item.type == AE_IFDIR ? 0755 : 0644);
        if (item.hardlink)
            archive_entry_set_hardlink(entry, item.content.c_str());
        else if (item.type == AE_IFLNK)
            archive_entry_set_symlink(entry, item.content.c_str());
        const bool data = item.type == AE_IFREG && !item.hardlink;
        archive_entry_set_size(entry, data ? static_cast<la_int64_t>(item.content.size()) : 0);
        REQUIRE(archive_write_header(writer, entry) == ARCHIVE_OK);
        if (data && !item.content.empty())
            archive_write_data(writer, item.content.data(), item.content.size());
        archive_entry_free(entry);
    }
    archive_write_close(writer);
    archive_write_free(writer);
}

}  // namespace tests
