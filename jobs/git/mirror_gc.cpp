#include "jobs/git/mirror_gc.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "common/fd.hpp"
#include "jobs/git/git_lock.hpp"
#include "jobs/git/git_remove.hpp"
#include "jobs/git/git_url.hpp"

namespace jobs {

namespace fs = std::filesystem;
using common::ErrorKind;
using SysTime = std::chrono::system_clock::time_point;

namespace {

constexpr std::string_view k_last_use_dir = "last-use";
constexpr std::string_view k_trash_prefix = "gc-trash.";

std::optional<SysTime> mtime_of(const fs::path& path) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) return std::nullopt;
    return SysTime(std::chrono::duration_cast<SysTime::duration>(
        std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
}

// mirror_dir_name()'s shape: "<name>-<16 hex>" ("locks", "last-use" and trash never match).
bool is_mirror_name(std::string_view name) {
    if (name.size() < 18 || name.front() == '.' || name[name.size() - 17] != '-') return false;
    return std::all_of(name.end() - 16, name.end(),
                       [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

struct Candidate {
    std::string name;  // the scope name (a flat mirror's too, without ".git")
    MirrorKind kind = MirrorKind::scope;
    fs::path dir;  // what is removed
};

std::string label(const Candidate& candidate) {
    return candidate.kind == MirrorKind::scope ? candidate.name : candidate.name + ".git";
}

std::vector<Candidate> find_candidates(const fs::path& mirrors, std::error_code& ec) {
    std::vector<Candidate> found;
    for (const auto& entry : fs::directory_iterator(mirrors, ec)) {
        std::error_code type_ec;
        if (entry.symlink_status(type_ec).type() != fs::file_type::directory) continue;
        std::string name = entry.path().filename().string();
        if (is_mirror_name(name)) {
            found.push_back({name, MirrorKind::scope, entry.path()});
        } else if (name.ends_with(".git") &&
                   is_mirror_name(std::string_view(name).substr(0, name.size() - 4))) {
            name.resize(name.size() - 4);
            found.push_back({name, MirrorKind::flat, entry.path()});
        }
    }
    return found;
}

SysTime last_use(const fs::path& mirrors, const Candidate& candidate) {
    std::vector<fs::path> paths{candidate.dir};
    if (candidate.kind == MirrorKind::scope) {
        paths.push_back(mirrors / k_last_use_dir / candidate.name);
        paths.push_back(candidate.dir / "repo.git");
        paths.push_back(candidate.dir / "repo.git" / "FETCH_HEAD");
    } else {
        paths.push_back(candidate.dir / "FETCH_HEAD");
        paths.push_back(mirrors / (candidate.name + ".lock"));
    }
    SysTime newest = SysTime::min();
    for (const auto& path : paths)
        if (auto time = mtime_of(path)) newest = std::max(newest, *time);
    return newest;
}

// The locks the fetch path takes for this mirror: the scope's and each of its submodules'.
std::vector<fs::path> lock_paths(const fs::path& mirrors, const Candidate& candidate) {
    if (candidate.kind == MirrorKind::flat) return {mirrors / (candidate.name + ".lock")};
    std::vector<fs::path> paths{mirrors / "locks" / (candidate.name + ".lock")};
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(mirrors / "locks", ec)) {
        const std::string file = entry.path().filename().string();
        if (file.starts_with(candidate.name + ".") && file.ends_with(".lock") &&
            file != candidate.name + ".lock")
            paths.push_back(entry.path());
    }
    return paths;
}

std::optional<MirrorGcReason> verdict(const fs::path& mirrors, const Candidate& candidate,
                                      const MirrorGcPolicy& policy, SysTime now) {
    if (policy.in_use.contains(candidate.name)) return std::nullopt;
    if (policy.served && !policy.served->contains(candidate.name)) {
        // A job that started since the collection began keeps even an unlisted scope.
        if (last_use(mirrors, candidate) >= now) return std::nullopt;
        return MirrorGcReason::unserved;
    }
    if (last_use(mirrors, candidate) + policy.max_idle < now) return MirrorGcReason::idle;
    return std::nullopt;
}

// The flat layout's leftovers of `name` (<name>.git.tmp-*, <name>.git.trash-*).
std::vector<fs::path> flat_leftovers(const fs::path& mirrors, const std::string& name) {
    std::vector<fs::path> found;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(mirrors, ec)) {
        const std::string file = entry.path().filename().string();
        if (file.starts_with(name + ".git.tmp-") || file.starts_with(name + ".git.trash-"))
            found.push_back(entry.path());
    }
    return found;
}

common::Expected<fs::path> make_trash(const fs::path& mirrors) {
    std::string trash = (mirrors / (std::string(k_trash_prefix) + "XXXXXX")).string();
    if (::mkdtemp(trash.data()) == nullptr)
        return common::fail(ErrorKind::permanent, common::errno_message("mkdtemp " + trash));
    return fs::path(trash);
}

// Under the mirror's locks: rename it (and a flat mirror's leftovers) into a fresh trash
// directory, drop its last-use record. Returns the trash directory to remove afterwards. The
// lock files go after it (remove_locks).
common::Expected<fs::path> move_to_trash(const fs::path& mirrors, const Candidate& candidate) {
    auto trash = make_trash(mirrors);
    if (!trash) return trash;
    std::vector<fs::path> moving{candidate.dir};
    if (candidate.kind == MirrorKind::flat)
        for (auto& leftover : flat_leftovers(mirrors, candidate.name))
            moving.push_back(std::move(leftover));
    for (const auto& path : moving)
        if (::rename(path.c_str(), (*trash / path.filename()).c_str()) != 0) {
            auto error = common::fail(ErrorKind::permanent,
                                      common::errno_message("rename " + path.string()));
            ::rmdir(trash->c_str());  // empty unless the mirror itself went in: then it stays trash
            return error;
        }
    if (candidate.kind == MirrorKind::scope)
        ::unlink((mirrors / k_last_use_dir / candidate.name).c_str());
    return trash;
}

// The collected mirror's lock files, unlinked while held: a fetch waiting on one re-checks
// the path after its flock (FileLock) and locks the new file a later fetch creates instead.
void remove_locks(std::vector<FileLock>& held, const Candidate& candidate) {
    for (auto& lock : held)
        if (auto gone = lock.remove_lock_file(); !gone)
            spdlog::warn("mirror gc: {}: {} (an empty lock file is left)", label(candidate),
                         gone.error().message);
}

// Removes the gc-trash.* directories of `mirrors`; their failures are appended to `failed`.
std::size_t remove_trash(const fs::path& mirrors, std::vector<std::string>& failed) {
    std::error_code ec;
    std::vector<fs::path> trash;
    for (const auto& entry : fs::directory_iterator(mirrors, ec))
        if (entry.path().filename().string().starts_with(k_trash_prefix))
            trash.push_back(entry.path());
    std::size_t removed = 0;
    for (const auto& dir : trash) {
        if (auto gone = remove_tree(dir); !gone) {
            spdlog::warn("mirror gc: {} (left in the trash, removed at the next collection)",
                         gone.error().message);
            failed.push_back(gone.error().message);
        } else {
            ++removed;
        }
    }
    return removed;
}

enum class Outcome { removed, busy, failed };

Outcome collect_one(const fs::path& mirrors, const Candidate& candidate,
                    const MirrorGcPolicy& policy, SysTime now, MirrorGcReason reason,
                    MirrorGcReport& report) {
    std::vector<FileLock> held;
    for (const auto& path : lock_paths(mirrors, candidate)) {
        auto lock = FileLock::acquire(path, LockMode::exclusive, LockWait::try_once);
        if (!lock && lock.error().kind == ErrorKind::transient) return Outcome::busy;
        if (!lock) {
            report.failed.push_back(label(candidate) + ": " + lock.error().message);
            return Outcome::failed;
        }
        held.push_back(std::move(*lock));
    }
    // Looked at again under the locks: a job may have started, a fetch may have ended.
    if (!verdict(mirrors, candidate, policy, now)) return Outcome::busy;
    auto moved = move_to_trash(mirrors, candidate);
    if (!moved) {
        report.failed.push_back(label(candidate) + ": " + moved.error().message);
        return Outcome::failed;
    }
    remove_locks(held, candidate);
    report.removed.push_back({label(candidate), candidate.kind, reason});
    return Outcome::removed;
}

}  // namespace

std::string_view to_string(MirrorGcReason reason) {
    return reason == MirrorGcReason::unserved ? "unserved" : "idle";
}

common::Expected<void> record_mirror_use(const fs::path& mirrors_dir, std::string_view scope_name) {
    const fs::path dir = mirrors_dir / k_last_use_dir;
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec)
        return common::fail(ErrorKind::permanent,
                            "cannot create " + dir.string() + ": " + ec.message());
    const fs::path stamp = dir / scope_name;
    common::Fd fd(::open(stamp.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd || ::futimens(fd.get(), nullptr) != 0)
        return common::fail(ErrorKind::permanent, common::errno_message("touch " + stamp.string()));
    return {};
}

common::Expected<std::string> mirror_scope_name(std::string_view remote) {
    auto parsed = SANDGATE_TRY(parse_remote(remote));
    return mirror_dir_name(parsed);
}

common::Expected<MirrorGcReport> collect_mirrors(const fs::path& state_dir,
                                                 const MirrorGcPolicy& policy, SysTime now,
                                                 TrashRemoval removal) {
    MirrorGcReport report;
    const fs::path mirrors = state_dir / "mirrors";
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(mirrors, ec))) return report;
    if (removal == TrashRemoval::now) remove_trash(mirrors, report.failed);
    auto candidates = find_candidates(mirrors, ec);
    if (ec)
        return common::fail(ErrorKind::permanent,
                            "cannot read " + mirrors.string() + ": " + ec.message());
    fs::create_directories(mirrors / "locks", ec);
    for (const auto& candidate : candidates) {
        const auto reason = verdict(mirrors, candidate, policy, now);
        if (!reason) {
            ++report.kept;
            continue;
        }
        switch (collect_one(mirrors, candidate, policy, now, *reason, report)) {
            case Outcome::removed:
                spdlog::info("mirror gc: removed {} ({})", label(candidate), to_string(*reason));
                break;
            case Outcome::busy:
                report.busy.push_back(label(candidate));
                spdlog::info("mirror gc: kept {}: in use", label(candidate));
                break;
            case Outcome::failed:
                spdlog::warn("mirror gc: cannot remove {}: {}", label(candidate),
                             report.failed.back());
                break;
        }
    }
    // The locks were given back mirror by mirror: each was out of every fetch's way already.
    if (removal == TrashRemoval::now) remove_trash(mirrors, report.failed);
    return report;
}

common::Expected<std::size_t> empty_mirror_trash(const fs::path& state_dir) {
    std::vector<std::string> failed;
    const std::size_t removed = remove_trash(state_dir / "mirrors", failed);
    if (!failed.empty()) return common::fail(ErrorKind::permanent, failed.front());
    return removed;
}

}  // namespace jobs
