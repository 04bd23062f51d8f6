#include "jobs/actions/action_archive.hpp"

#include <sys/stat.h>

#include <memory>
#include <vector>

#include "jobs/actions/archive_handles.hpp"
#include "jobs/git/git_handles.hpp"
#include "jobs/git/git_remove.hpp"

namespace jobs {
namespace {

using common::ErrorKind;

using archive_io::archive_text;
using archive_io::ArchiveEntry;
using archive_io::ArchiveReader;
using archive_io::ArchiveWriter;
using archive_io::components;
using GitBlob = GitPtr<git_blob, git_blob_free>;

// Whether a link at `relative` (inside the tree) pointing at `target` stays inside it.
bool link_stays_inside(const std::filesystem::path& relative, std::string_view target) {
    if (target.empty() || target.front() == '/') return false;
    const auto resolved = (relative.parent_path() / std::string(target)).lexically_normal();
    const auto text = resolved.string();
    return !(text == ".." || text.starts_with("../") || resolved.is_absolute());
}

class Unpacker {
public:
    Unpacker(const std::filesystem::path& archive_path, const std::filesystem::path& dest,
             const ArchiveLimits& limits)
        : m_archive(archive_path), m_dest(dest), m_limits(limits) {}

    common::Expected<void> run() {
        ArchiveReader reader(archive_read_new());
        ArchiveWriter disk(archive_write_disk_new());
        if (!reader || !disk)
            return common::fail(ErrorKind::permanent, "libarchive: out of memory");
        archive_read_support_filter_gzip(reader.get());
        archive_read_support_format_tar(reader.get());
        archive_write_disk_set_options(
            disk.get(), ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_SECURE_NODOTDOT);
        if (archive_read_open_filename(reader.get(), m_archive.c_str(), 64 * 1024) != ARCHIVE_OK)
            return refuse("cannot be read: " + archive_text(reader.get()));
        if (::mkdir(m_dest.c_str(), 0700) != 0)  // trusted path: the store's own directory
            return common::fail(ErrorKind::permanent,
                                common::errno_message("creating " + m_dest.string()));
        archive_entry* entry = nullptr;
        for (;;) {
            const int status = archive_read_next_header(reader.get(), &entry);
            if (status == ARCHIVE_EOF) break;
            if (status != ARCHIVE_OK && status != ARCHIVE_WARN)
                return refuse("is corrupt: " + archive_text(reader.get()));
            if (auto ok = extract(reader.get(), disk.get(), entry); !ok) return ok;
        }
        if (m_top.empty()) return refuse("is empty");
        if (archive_write_close(disk.get()) != ARCHIVE_OK)
            return common::fail(ErrorKind::permanent, "unpacking " + m_archive.string() + ": " +
                                                          archive_text(disk.get()));
        return {};
    }

private:
    std::unexpected<common::Error> refuse(const std::string& why) const {
        return common::fail(ErrorKind::invalid_input,
                            "the action archive " + m_archive.string() + " " + why);
    }

    common::Expected<void> extract(archive* reader, archive* disk, archive_entry* entry) {
        const std::string name =
            archive_entry_pathname(entry) != nullptr ? archive_entry_pathname(entry) : "";
        const auto parts = components(name);
        if (parts.empty()) return refuse("has an entry outside its tree: '" + name + "'");
        if (m_top.empty()) m_top = parts.front();
        if (parts.front() != m_top)
            return refuse("has more than one top directory ('" + m_top + "', '" + parts.front() +
                          "')");
        if (++m_entries > m_limits.max_entries)
            return refuse("has more than " + std::to_string(m_limits.max_entries) + " entries");
        const auto type = archive_entry_filetype(entry);
        if (parts.size() == 1) {
            if (type != AE_IFDIR)
                return refuse("has a top-level entry that is not a directory: '" + name + "'");
            return {};
        }
        std::filesystem::path relative;
        for (std::size_t i = 1; i < parts.size(); ++i) relative /= parts[i];
        if (archive_entry_hardlink(entry) != nullptr)
            return refuse("has a hard link: '" + name + "'");
        if (type == AE_IFLNK) {
            const char* target = archive_entry_symlink(entry);
            if (target == nullptr || !link_stays_inside(relative, target))
                return refuse("has a link out of its tree: '" + name + "' -> '" +
                              (target ? target : "") + "'");
        } else if (type != AE_IFREG && type != AE_IFDIR) {
            return refuse("has an entry that is neither a file, a directory nor a link: '" + name +
                          "'");
        }
        if (type == AE_IFREG &&
            archive_entry_size(entry) > static_cast<la_int64_t>(m_limits.max_entry_bytes))
            return refuse("has an entry larger than " + std::to_string(m_limits.max_entry_bytes) +
                          " bytes: '" + name + "'");
        const auto mode = archive_entry_perm(entry);
        archive_entry_set_perm(entry, type == AE_IFDIR ? 0755 : ((mode & 0111) != 0 ? 0755 : 0644));
        archive_entry_set_uid(entry, 0);
        archive_entry_set_gid(entry, 0);
        archive_entry_set_uname(entry, nullptr);
        archive_entry_set_gname(entry, nullptr);
        const std::string destination = (m_dest / relative).string();
        archive_entry_set_pathname(entry, destination.c_str());
        if (archive_write_header(disk, entry) != ARCHIVE_OK)
            return refuse("'" + name + "' cannot be written: " + archive_text(disk));
        if (type == AE_IFREG) {
            if (auto ok = copy_data(reader, disk, name); !ok) return ok;
        }
        if (archive_write_finish_entry(disk) != ARCHIVE_OK)
            return refuse("'" + name + "' cannot be written: " + archive_text(disk));
        return {};
    }

    common::Expected<void> copy_data(archive* reader, archive* disk, const std::string& name) {
        const void* block = nullptr;
        std::size_t size = 0;
        la_int64_t offset = 0;
        std::uint64_t entry_bytes = 0;
        for (;;) {
            const int status = archive_read_data_block(reader, &block, &size, &offset);
            if (status == ARCHIVE_EOF) return {};
            if (status != ARCHIVE_OK)
                return refuse("is corrupt at '" + name + "': " + archive_text(reader));
            entry_bytes += size;
            m_total += size;
            if (entry_bytes > m_limits.max_entry_bytes)
                return refuse("has an entry larger than " +
                              std::to_string(m_limits.max_entry_bytes) + " bytes: '" + name + "'");
            if (m_total > m_limits.max_total_bytes)
                return refuse("unpacks to more than " + std::to_string(m_limits.max_total_bytes) +
                              " bytes");
            if (archive_write_data_block(disk, block, size, offset) != ARCHIVE_OK)
                return refuse("'" + name + "' cannot be written: " + archive_text(disk));
        }
    }

    const std::filesystem::path& m_archive;
    const std::filesystem::path& m_dest;
    const ArchiveLimits& m_limits;
    std::string m_top;
    std::uint64_t m_entries = 0;
    std::uint64_t m_total = 0;
};

struct PackState {
    git_repository* repository;
    archive* writer;
    std::string top;
    std::time_t mtime;
    std::string error;
};

bool write_entry(PackState& state, const std::string& name, unsigned type, unsigned perm,
                 std::string_view content, const char* link_target) {
    ArchiveEntry entry(archive_entry_new());
    if (!entry) return state.error = "libarchive: out of memory", false;
    archive_entry_set_pathname(entry.get(), (state.top + "/" + name).c_str());
    archive_entry_set_filetype(entry.get(), type);
    archive_entry_set_perm(entry.get(), perm);
    archive_entry_set_mtime(entry.get(), state.mtime, 0);
    if (link_target != nullptr) archive_entry_set_symlink(entry.get(), link_target);
    archive_entry_set_size(entry.get(),
                           type == AE_IFREG ? static_cast<la_int64_t>(content.size()) : 0);
    if (archive_write_header(state.writer, entry.get()) != ARCHIVE_OK)
        return state.error = archive_text(state.writer), false;
    if (type == AE_IFREG && !content.empty() &&
        archive_write_data(state.writer, content.data(), content.size()) !=
            static_cast<la_ssize_t>(content.size()))
        return state.error = archive_text(state.writer), false;
    return true;
}

int pack_entry(const char* root, const git_tree_entry* tree_entry, void* payload) {
    auto& state = *static_cast<PackState*>(payload);
    const std::string name = std::string(root) + git_tree_entry_name(tree_entry);
    const auto type = git_tree_entry_type(tree_entry);
    if (type == GIT_OBJECT_TREE)
        return write_entry(state, name + "/", AE_IFDIR, 0755, {}, nullptr) ? 0 : -1;
    if (type != GIT_OBJECT_BLOB) return 1;  // a submodule: skipped
    git_blob* raw = nullptr;
    if (git_blob_lookup(&raw, state.repository, git_tree_entry_id(tree_entry)) != 0)
        return state.error = git_error_text("reading " + name, -1), -1;
    GitBlob blob(raw);
    const std::string_view content(static_cast<const char*>(git_blob_rawcontent(blob.get())),
                                   static_cast<std::size_t>(git_blob_rawsize(blob.get())));
    const auto mode = git_tree_entry_filemode(tree_entry);
    if (mode == GIT_FILEMODE_LINK) {
        const std::string target(content);
        return write_entry(state, name, AE_IFLNK, 0777, {}, target.c_str()) ? 0 : -1;
    }
    return write_entry(state, name, AE_IFREG, mode == GIT_FILEMODE_BLOB_EXECUTABLE ? 0755 : 0644,
                       content, nullptr)
               ? 0
               : -1;
}

}  // namespace

common::Expected<void> unpack_action_archive(const std::filesystem::path& archive,
                                             const std::filesystem::path& dest,
                                             const ArchiveLimits& limits) {
    Unpacker unpacker(archive, dest, limits);
    auto done = unpacker.run();
    if (!done) (void)remove_tree(dest);  // restores the write bits it needs
    return done;
}

common::Expected<void> write_commit_archive(git_repository* repository, const git_oid& commit,
                                            const std::string& top,
                                            const std::filesystem::path& out) {
    git_commit* raw_commit = nullptr;
    if (int rc = git_commit_lookup(&raw_commit, repository, &commit); rc != 0)
        return git_fail(ErrorKind::permanent, "reading commit " + oid_hex(commit), rc);
    GitCommit owned_commit(raw_commit);
    git_tree* raw_tree = nullptr;
    if (int rc = git_commit_tree(&raw_tree, owned_commit.get()); rc != 0)
        return git_fail(ErrorKind::permanent, "reading the tree of " + oid_hex(commit), rc);
    GitTree tree(raw_tree);
    ArchiveWriter writer(archive_write_new());
    if (!writer) return common::fail(ErrorKind::permanent, "libarchive: out of memory");
    archive_write_add_filter_gzip(writer.get());
    archive_write_set_format_pax_restricted(writer.get());
    if (archive_write_open_filename(writer.get(), out.c_str()) != ARCHIVE_OK)
        return common::fail(ErrorKind::permanent,
                            "writing " + out.string() + ": " + archive_text(writer.get()));
    PackState state{repository,
                    writer.get(),
                    top,
                    static_cast<std::time_t>(git_commit_time(owned_commit.get())),
                    {}};
    bool ok = write_entry(state, "", AE_IFDIR, 0755, {}, nullptr);
    if (ok && git_tree_walk(tree.get(), GIT_TREEWALK_PRE, pack_entry, &state) != 0) ok = false;
    if (ok && archive_write_close(writer.get()) != ARCHIVE_OK) {
        state.error = archive_text(writer.get());
        ok = false;
    }
    if (!ok)
        return common::fail(ErrorKind::permanent, "writing " + out.string() + ": " + state.error);
    return {};
}

common::Expected<void> make_tree_read_only(const std::filesystem::path& root) {
    std::error_code ec;
    std::vector<std::filesystem::path> dirs{root};
    for (std::filesystem::recursive_directory_iterator it(root, ec), end; !ec && it != end;
         it.increment(ec)) {
        const auto status = it->symlink_status(ec);
        if (ec) break;
        if (std::filesystem::is_symlink(status)) continue;
        if (std::filesystem::is_directory(status)) {
            dirs.push_back(it->path());
            continue;
        }
        std::filesystem::permissions(
            it->path(),
            std::filesystem::perms::owner_write | std::filesystem::perms::group_write |
                std::filesystem::perms::others_write,
            std::filesystem::perm_options::remove | std::filesystem::perm_options::nofollow, ec);
        if (ec) break;
    }
    for (auto it = dirs.rbegin(); !ec && it != dirs.rend(); ++it)
        std::filesystem::permissions(
            *it,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec |
                std::filesystem::perms::group_read | std::filesystem::perms::group_exec |
                std::filesystem::perms::others_read | std::filesystem::perms::others_exec,
            std::filesystem::perm_options::replace, ec);
    if (ec)
        return common::fail(ErrorKind::permanent,
                            "making " + root.string() + " read-only: " + ec.message());
    return {};
}

}  // namespace jobs
