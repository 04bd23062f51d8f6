#include "jobs/builtins/tree_archive.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>

#include "common/sha256.hpp"
#include "jobs/actions/archive_handles.hpp"
#include "sandbox/access/safe_write.hpp"

namespace jobs {
namespace {

using archive_io::archive_text;
using archive_io::ArchiveEntry;
using archive_io::ArchiveReader;
using archive_io::ArchiveWriter;
using common::ErrorKind;

constexpr std::size_t k_chunk = 64 * 1024;

struct Sink {
    int fd = -1;
    common::Sha256Stream digest;
    std::uint64_t bytes = 0;
    int error = 0;
};

la_ssize_t sink_write(archive*, void* data, const void* buffer, std::size_t size) {
    auto& sink = *static_cast<Sink*>(data);
    const auto* bytes = static_cast<const char*>(buffer);
    for (std::size_t done = 0; done < size;) {
        const ssize_t n = ::write(sink.fd, bytes + done, size - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            sink.error = errno;
            return -1;
        }
        done += static_cast<std::size_t>(n);
    }
    sink.digest.update(std::string_view(bytes, size));
    sink.bytes += size;
    return static_cast<la_ssize_t>(size);
}

class Packer {
public:
    Packer(archive* writer, const ArchiveLimits& limits, const sandbox::ReadLimits& read,
           PackedArchive& result)
        : m_writer(writer), m_limits(limits), m_read(read), m_result(result) {}

    common::Expected<void> add(const TreeMember& member) {
        if (sandbox::read_limits_expired(m_read))
            return common::fail(ErrorKind::timeout, "the step's time ran out");
        struct stat st {};
        auto fd = member.root->open_file(member.relative, member.relative, &st);
        if (!fd) {  // replaced by a link or a special file since it was selected, or gone
            m_result.skipped.push_back(member.relative);
            return {};
        }
        const auto size = static_cast<std::uint64_t>(st.st_size);
        if (size > m_limits.max_entry_bytes)
            return common::fail(ErrorKind::invalid_input,
                                member.relative + " is larger than " +
                                    std::to_string(m_limits.max_entry_bytes) + " bytes");
        if (m_result.content_bytes + size > m_limits.max_total_bytes)
            return common::fail(ErrorKind::invalid_input,
                                "the files come to more than " +
                                    std::to_string(m_limits.max_total_bytes) + " bytes");
        if (++m_result.files > m_limits.max_entries)
            return common::fail(ErrorKind::invalid_input,
                                "more than " + std::to_string(m_limits.max_entries) + " files");
        ArchiveEntry entry(archive_entry_new());
        if (!entry) return common::fail(ErrorKind::permanent, "libarchive: out of memory");
        archive_entry_set_pathname(entry.get(), member.name.c_str());
        archive_entry_set_filetype(entry.get(), AE_IFREG);
        archive_entry_set_perm(entry.get(), (st.st_mode & 0111) != 0 ? 0755 : 0644);
        archive_entry_set_size(entry.get(), static_cast<la_int64_t>(size));
        archive_entry_set_mtime(entry.get(), st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
        if (archive_write_header(m_writer, entry.get()) != ARCHIVE_OK) return write_error();
        std::array<char, k_chunk> buffer{};
        std::uint64_t done = 0;
        while (done < size) {  // a file grown since is cut at its size; a shrunk one padded
            if (sandbox::read_limits_expired(m_read))
                return common::fail(ErrorKind::timeout, "the step's time ran out");
            const ssize_t got = ::read(fd->get(), buffer.data(),
                                       std::min<std::uint64_t>(buffer.size(), size - done));
            if (got < 0 && errno == EINTR) continue;
            if (got < 0)
                return common::fail(ErrorKind::permanent,
                                    common::errno_message("reading " + member.relative));
            if (got == 0) break;
            if (archive_write_data(m_writer, buffer.data(), static_cast<std::size_t>(got)) < 0)
                return write_error();
            done += static_cast<std::uint64_t>(got);
        }
        m_result.content_bytes += size;
        if (archive_write_finish_entry(m_writer) != ARCHIVE_OK) return write_error();
        return {};
    }

    std::unexpected<common::Error> write_error() const {
        return common::fail(ErrorKind::permanent, "writing the archive: " + archive_text(m_writer));
    }

private:
    archive* m_writer;
    const ArchiveLimits& m_limits;
    const sandbox::ReadLimits& m_read;
    PackedArchive& m_result;
};

}  // namespace

common::Expected<PackedArchive> write_tree_archive(const std::vector<TreeMember>& members,
                                                   const common::Fd& out,
                                                   const ArchiveLimits& limits,
                                                   const sandbox::ReadLimits& read) {
    ArchiveWriter writer(archive_write_new());
    if (!writer) return common::fail(ErrorKind::permanent, "libarchive: out of memory");
    archive_write_add_filter_gzip(writer.get());
    archive_write_set_format_pax_restricted(writer.get());
    archive_write_set_bytes_in_last_block(writer.get(), 1);
    Sink sink;
    sink.fd = out.get();
    if (archive_write_open2(writer.get(), &sink, nullptr, sink_write, nullptr, nullptr) !=
        ARCHIVE_OK)
        return common::fail(ErrorKind::permanent,
                            "writing the archive: " + archive_text(writer.get()));
    PackedArchive result;
    Packer packer(writer.get(), limits, read, result);
    for (const auto& member : members) {
        SANDGATE_CHECK(packer.add(member));
    }
    if (archive_write_close(writer.get()) != ARCHIVE_OK)
        return common::fail(ErrorKind::permanent,
                            sink.error != 0
                                ? common::errno_message("writing the archive", sink.error)
                                : "writing the archive: " + archive_text(writer.get()));
    result.archive_bytes = sink.bytes;
    result.sha256 = sink.digest.hex();
    return result;
}

namespace {

class Restorer {
public:
    Restorer(archive* reader, const PlaceEntry& place, const ArchiveLimits& limits)
        : m_reader(reader), m_place(place), m_limits(limits) {}

    common::Expected<void> entry(archive_entry* entry) {
        const std::string name =
            archive_entry_pathname(entry) != nullptr ? archive_entry_pathname(entry) : "";
        const auto parts = archive_io::components(name);
        if (parts.empty()) return refuse("has an entry outside its tree: '" + name + "'");
        const auto type = archive_entry_filetype(entry);
        if (type == AE_IFDIR) return {};
        if (type != AE_IFREG || archive_entry_hardlink(entry) != nullptr)
            return refuse("has an entry that is not a regular file: '" + name + "'");
        if (++m_result.files > m_limits.max_entries)
            return refuse("has more than " + std::to_string(m_limits.max_entries) + " entries");
        std::string clean;
        for (const auto& part : parts) clean += (clean.empty() ? "" : "/") + part;
        const auto placement = m_place(clean);
        if (!placement) return {};
        return write(*placement, archive_entry_perm(entry), archive_entry_mtime(entry),
                     archive_entry_mtime_nsec(entry));
    }

    UnpackedArchive result() const { return m_result; }

private:
    std::unexpected<common::Error> refuse(const std::string& why) const {
        return common::fail(ErrorKind::invalid_input, "the archive " + why);
    }

    common::Expected<void> write(const TreePlacement& placement, mode_t perm, time_t mtime,
                                 long mtime_nsec) {
        const std::string& relative = placement.relative;
        const auto slash = relative.rfind('/');
        const std::string base = slash == std::string::npos ? relative : relative.substr(slash + 1);
        std::optional<sandbox::SafeDir> made;
        if (slash != std::string::npos) {
            auto dirs = SANDGATE_TRY(placement.root->make_dirs(
                relative.substr(0, slash), {0755, std::nullopt}, relative.substr(0, slash)));
            made = std::move(dirs);
        }
        const sandbox::SafeDir& parent = made ? *made : *placement.root;
        // What a step left at the name (a file, a link, a directory) goes; a link is unlinked.
        if (auto removed = parent.remove(base, relative); !removed) return removed;
        auto fd = SANDGATE_TRY(sandbox::create_new_file(
            parent, base, {(perm & 0111) != 0 ? mode_t{0755} : mode_t{0644}, std::nullopt},
            relative));
        if (auto copied = copy_data(fd, relative); !copied) return copied;
        const std::array<timespec, 2> times{timespec{mtime, mtime_nsec},
                                            timespec{mtime, mtime_nsec}};
        ::futimens(fd.get(), times.data());
        return {};
    }

    common::Expected<void> copy_data(const common::Fd& fd, const std::string& relative) {
        const void* block = nullptr;
        std::size_t size = 0;
        la_int64_t offset = 0;
        std::uint64_t entry_bytes = 0;
        for (;;) {
            const int status = archive_read_data_block(m_reader, &block, &size, &offset);
            if (status == ARCHIVE_EOF) return {};
            if (status != ARCHIVE_OK)
                return refuse("is corrupt at '" + relative + "': " + archive_text(m_reader));
            entry_bytes += size;
            m_result.bytes += size;
            if (entry_bytes > m_limits.max_entry_bytes)
                return refuse("has an entry larger than " +
                              std::to_string(m_limits.max_entry_bytes) + " bytes");
            if (m_result.bytes > m_limits.max_total_bytes)
                return refuse("unpacks to more than " + std::to_string(m_limits.max_total_bytes) +
                              " bytes");
            const auto* bytes = static_cast<const char*>(block);
            for (std::size_t done = 0; done < size;) {
                const ssize_t n = ::pwrite(fd.get(), bytes + done, size - done,
                                           static_cast<off_t>(offset) + static_cast<off_t>(done));
                if (n < 0 && errno == EINTR) continue;
                if (n <= 0)
                    return common::fail(ErrorKind::permanent,
                                        common::errno_message("writing " + relative));
                done += static_cast<std::size_t>(n);
            }
        }
    }

    archive* m_reader;
    const PlaceEntry& m_place;
    const ArchiveLimits& m_limits;
    UnpackedArchive m_result;
};

}  // namespace

common::Expected<UnpackedArchive> read_tree_archive(const common::Fd& archive_fd,
                                                    const PlaceEntry& place,
                                                    const ArchiveLimits& limits) {
    ArchiveReader reader(archive_read_new());
    if (!reader) return common::fail(ErrorKind::permanent, "libarchive: out of memory");
    archive_read_support_filter_gzip(reader.get());
    archive_read_support_format_tar(reader.get());
    if (::lseek(archive_fd.get(), 0, SEEK_SET) != 0 ||
        archive_read_open_fd(reader.get(), archive_fd.get(), k_chunk) != ARCHIVE_OK)
        return common::fail(ErrorKind::invalid_input,
                            "the archive cannot be read: " + archive_text(reader.get()));
    Restorer restorer(reader.get(), place, limits);
    archive_entry* entry = nullptr;
    for (;;) {
        const int status = archive_read_next_header(reader.get(), &entry);
        if (status == ARCHIVE_EOF) break;
        if (status != ARCHIVE_OK && status != ARCHIVE_WARN)
            return common::fail(ErrorKind::invalid_input,
                                "the archive is corrupt: " + archive_text(reader.get()));
        SANDGATE_CHECK(restorer.entry(entry));
    }
    return restorer.result();
}

}  // namespace jobs
