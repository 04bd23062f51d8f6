#include "jobs/actions/action_store.hpp"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "common/fd.hpp"
#include "jobs/actions/action_archive.hpp"
#include "jobs/git/git_remove.hpp"
#include "sandbox/access/safe_access.hpp"

namespace jobs {
namespace {

using common::ErrorKind;

constexpr std::string_view k_temp_prefix = ".tmp-";
constexpr std::string_view k_archive_suffix = ".tar.gz";
const sandbox::ReadLimits k_refs_limits{1024 * 1024, std::nullopt, -1};

std::unexpected<common::Error> io_fail(const std::string& what) {
    return common::fail(ErrorKind::permanent, common::errno_message(what));
}

common::Expected<void> make_dirs(const std::filesystem::path& path) {
    std::error_code ec;
    std::filesystem::create_directories(path, ec);  // trusted path: the store's own directories
    if (ec)
        return common::fail(ErrorKind::permanent,
                            "creating " + path.string() + ": " + ec.message());
    return {};
}

// "REF<TAB>SHA" lines; anything else is skipped.
std::vector<std::pair<std::string, std::string>> parse_refs(std::string_view text) {
    std::vector<std::pair<std::string, std::string>> out;
    std::size_t start = 0;
    while (start < text.size()) {
        auto end = text.find('\n', start);
        if (end == std::string_view::npos) end = text.size();
        const auto line = text.substr(start, end - start);
        const auto tab = line.find('\t');
        if (tab != std::string_view::npos && tab > 0 && is_full_sha(line.substr(tab + 1)))
            out.emplace_back(std::string(line.substr(0, tab)), std::string(line.substr(tab + 1)));
        start = end + 1;
    }
    return out;
}

std::vector<std::pair<std::string, std::string>> read_refs(const std::filesystem::path& dir) {
    auto opened = sandbox::SafeDir::open_trusted(dir, "the action's archive directory");
    if (!opened) return {};
    auto text = opened->read_file_if_present("refs", k_refs_limits, (dir / "refs").string());
    if (!text || !*text) return {};
    return parse_refs(**text);
}

bool entry_exists(const std::filesystem::path& path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0;  // trusted path: the store's own
}

}  // namespace

std::filesystem::path ActionStore::archive_path(const ActionRef& ref,
                                                const std::string& sha) const {
    return m_dirs.archives / ref.archive_name() / (sha + std::string(k_archive_suffix));
}

bool ActionStore::has_archive(const ActionRef& ref, const std::string& sha) const {
    struct stat st {};
    // trusted path: the store
    return ::stat(archive_path(ref, sha).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::optional<std::string> ActionStore::pinned(const ActionRef& ref) const {
    for (const auto& [name, sha] : read_refs(m_dirs.archives / ref.archive_name()))
        if (name == ref.ref) return sha;
    return std::nullopt;
}

common::Expected<void> ActionStore::pin(const ActionRef& ref, const std::string& sha) const {
    const auto dir = m_dirs.archives / ref.archive_name();
    if (auto made = make_dirs(dir); !made) return made;
    auto refs = read_refs(dir);
    std::erase_if(refs, [&](const auto& pair) { return pair.first == ref.ref; });
    refs.emplace_back(ref.ref, sha);
    std::ranges::sort(refs);
    std::string text;
    for (const auto& [name, pinned_sha] : refs) text += name + "\t" + pinned_sha + "\n";
    auto opened =
        SANDGATE_TRY(sandbox::SafeDir::open_trusted(dir, "the action's archive directory"));
    return opened.replace_file("refs", text, sandbox::CreateOptions{0644, std::nullopt},
                               (dir / "refs").string());
}

common::Expected<std::filesystem::path> ActionStore::archive_temp_path(
    const ActionRef& ref, const std::string& sha) const {
    const auto dir = m_dirs.archives / ref.archive_name();
    SANDGATE_CHECK(make_dirs(dir));
    std::string pattern = (dir / (std::string(k_temp_prefix) + sha + "-XXXXXX")).string();
    common::Fd fd(::mkstemp(pattern.data()));  // trusted path: the store's own directory
    if (!fd) return io_fail("mkstemp " + pattern);
    ::fchmod(fd.get(), 0644);
    return std::filesystem::path(pattern);
}

common::Expected<void> ActionStore::commit_archive(const std::filesystem::path& temp,
                                                   const ActionRef& ref,
                                                   const std::string& sha) const {
    const auto final_path = archive_path(ref, sha);
    if (has_archive(ref, sha)) {
        ::unlink(temp.c_str());  // trusted path: the store's own temp file
        return {};
    }
    if (::rename(temp.c_str(), final_path.c_str()) != 0) {  // trusted path
        const int saved = errno;
        ::unlink(temp.c_str());
        return common::fail(ErrorKind::permanent,
                            common::errno_message("renaming into " + final_path.string(), saved));
    }
    return {};
}

common::Expected<std::filesystem::path> ActionStore::tree(const ActionRef& ref,
                                                          const std::string& sha) const {
    const auto parent = trees_root() / ref.archive_name();
    const auto final_path = parent / sha;
    if (entry_exists(final_path)) return final_path;
    if (!has_archive(ref, sha))
        return common::fail(ErrorKind::unavailable,
                            "no archive " + archive_path(ref, sha).string());
    SANDGATE_CHECK(make_dirs(parent));
    std::string pattern = (parent / (std::string(k_temp_prefix) + sha + "-XXXXXX")).string();
    // trusted path: the store's own
    if (::mkdtemp(pattern.data()) == nullptr) return io_fail("mkdtemp " + pattern);
    const std::filesystem::path temp(pattern);
    ::chmod(temp.c_str(), 0755);
    const auto unpacked = temp / "t";
    auto done = unpack_action_archive(archive_path(ref, sha), unpacked);
    // Read-only but for its root until it is in place: moving a directory to another parent
    // rewrites its `..`, which needs write permission on it.
    if (done) done = make_tree_read_only(unpacked);
    if (done) ::chmod(unpacked.c_str(), 0755);  // trusted path: the store's own temp tree
    if (done && ::rename(unpacked.c_str(), final_path.c_str()) != 0) {  // trusted path
        const int saved = errno;
        if (!entry_exists(final_path))  // another run's rename won: theirs is as good
            done =
                common::fail(ErrorKind::permanent,
                             common::errno_message("renaming into " + final_path.string(), saved));
    } else if (done) {
        ::chmod(final_path.c_str(), 0555);  // trusted path: the store's tree, now whole
    }
    (void)remove_tree(
        temp);  // empty after the rename; the whole attempt otherwise (or another's won)
    if (!done) return std::unexpected(done.error());
    return final_path;
}

common::Expected<FileLock> ActionStore::lock_shared() const {
    SANDGATE_CHECK(make_dirs(m_dirs.work));
    return FileLock::acquire(m_dirs.work / "lock", LockMode::shared);
}

common::Expected<std::vector<StoredAction>> ActionStore::list() const {
    std::vector<StoredAction> out;
    std::error_code ec;
    if (!std::filesystem::is_directory(m_dirs.archives, ec)) return out;
    // trusted path: the action store (no step writes there)
    for (const auto& repo : std::filesystem::directory_iterator(m_dirs.archives, ec)) {
        if (!repo.is_directory(ec) || repo.is_symlink(ec)) continue;
        const auto name = repo.path().filename().string();
        if (name.starts_with(".")) continue;
        const auto refs = read_refs(repo.path());
        // trusted path: the action store (no step writes there)
        for (const auto& file : std::filesystem::directory_iterator(repo.path(), ec)) {
            const auto file_name = file.path().filename().string();
            if (!file_name.ends_with(k_archive_suffix) || !file.is_regular_file(ec)) continue;
            StoredAction action;
            action.name = name;
            action.sha = file_name.substr(0, file_name.size() - k_archive_suffix.size());
            if (!is_full_sha(action.sha)) continue;
            action.bytes = file.file_size(ec);
            for (const auto& [ref, sha] : refs)
                if (sha == action.sha) action.refs.push_back(ref);
            action.unpacked = entry_exists(trees_root() / name / action.sha);
            out.push_back(std::move(action));
        }
    }
    if (ec)
        return common::fail(ErrorKind::permanent,
                            "listing " + m_dirs.archives.string() + ": " + ec.message());
    std::ranges::sort(out, [](const auto& a, const auto& b) {
        return std::tie(a.name, a.sha) < std::tie(b.name, b.sha);
    });
    return out;
}

common::Expected<std::vector<std::string>> ActionStore::prune(PruneArchives archives) const {
    SANDGATE_CHECK(make_dirs(m_dirs.work));
    auto lock = FileLock::acquire(m_dirs.work / "lock", LockMode::exclusive, LockWait::try_once);
    if (!lock)
        return common::fail(lock.error().kind, "a run is using the action store " +
                                                   m_dirs.work.string() + ": prune it later");
    std::vector<std::string> removed;
    auto remove = [&](const std::filesystem::path& path) -> common::Expected<void> {
        if (auto gone = remove_tree(path); !gone) return gone;
        removed.push_back(path.string());
        return {};
    };
    std::error_code ec;
    if (std::filesystem::is_directory(trees_root(), ec))
        // trusted path: the action store (no step writes there)
        for (const auto& repo : std::filesystem::directory_iterator(trees_root(), ec))
            SANDGATE_CHECK(remove(repo.path()));
    if (std::filesystem::is_directory(m_dirs.archives, ec)) {
        // trusted path: the action store (no step writes there)
        for (const auto& repo : std::filesystem::directory_iterator(m_dirs.archives, ec)) {
            if (!repo.is_directory(ec) || repo.is_symlink(ec)) continue;
            const auto refs = read_refs(repo.path());
            // trusted path: the action store (no step writes there)
            for (const auto& file : std::filesystem::directory_iterator(repo.path(), ec)) {
                const auto name = file.path().filename().string();
                bool drop = name.starts_with(k_temp_prefix);
                if (!drop && archives == PruneArchives::unreferenced &&
                    name.ends_with(k_archive_suffix)) {
                    const auto sha = name.substr(0, name.size() - k_archive_suffix.size());
                    drop = std::ranges::none_of(
                        refs, [&](const auto& pair) { return pair.second == sha; });
                }
                if (drop) SANDGATE_CHECK(remove(file.path()));
            }
        }
    }
    if (ec)
        return common::fail(ErrorKind::permanent,
                            "pruning " + m_dirs.archives.string() + ": " + ec.message());
    return removed;
}

}  // namespace jobs
