#include "jobs/builtins/artifact_store.hpp"

#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>

#include "sandbox/access/safe_write.hpp"

namespace jobs {
namespace {

using common::ErrorKind;

constexpr std::string_view k_suffix = ".tar.gz";
const sandbox::CreateOptions k_private{0700, std::nullopt};

}  // namespace

bool valid_artifact_name(std::string_view name) {
    return !name.empty() && name.size() <= 256 && name != "." && name != ".." &&
           name.find_first_of("\":<>|*?\\/\r\n") == std::string_view::npos;
}

common::Expected<ArtifactStore> ArtifactStore::open(const std::filesystem::path& dir) {
    auto root = SANDGATE_TRY(sandbox::SafeDir::make_trusted(dir, k_private, "the run's artifacts"));
    auto tmp = root.make_dirs("tmp", k_private, "the run's artifacts' tmp");
    if (!tmp) return std::unexpected(tmp.error());
    return ArtifactStore(std::move(root), std::move(*tmp));
}

common::Expected<PendingBlob> ArtifactStore::begin_upload() const {
    static std::atomic<unsigned> counter{0};
    const std::string name =
        std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1)) + ".tar.gz";
    auto fd = SANDGATE_TRY(
        sandbox::create_new_file(*m_tmp, name, {0400, std::nullopt}, "an artifact archive"));
    return PendingBlob(m_tmp.get(), name, std::move(fd));
}

common::Expected<void> ArtifactStore::commit(PendingBlob blob, const std::string& name,
                                             ArtifactOverwrite overwrite) const {
    if (!valid_artifact_name(name))
        return common::fail(ErrorKind::invalid_input, "the artifact name '" + name +
                                                          "' is not valid: it may not contain "
                                                          "\" : < > | * ? \\ / CR LF");
    const std::string file = name + std::string(k_suffix);
    const unsigned flags = overwrite == ArtifactOverwrite::yes ? 0U : RENAME_NOREPLACE;
    if (::renameat2(m_tmp->fd(), blob.name().c_str(), m_root.fd(), file.c_str(), flags) != 0) {
        if (errno == EEXIST)
            return common::fail(ErrorKind::invalid_input,
                                "an artifact named '" + name +
                                    "' exists already in this run (set overwrite: true to "
                                    "replace it)");
        return common::fail(ErrorKind::permanent,
                            common::errno_message("storing the artifact '" + name + "'"));
    }
    blob.release();
    return {};
}

common::Expected<std::vector<std::string>> ArtifactStore::names() const {
    std::vector<std::string> out;
    SANDGATE_CHECK(m_root.walk([&](const sandbox::WalkEntry& entry) {
        if (entry.kind == sandbox::EntryKind::regular && entry.relative.ends_with(k_suffix) &&
            entry.relative.find('/') == std::string::npos)
            out.push_back(entry.relative.substr(0, entry.relative.size() - k_suffix.size()));
        return sandbox::WalkStep::skip;
    }));
    std::ranges::sort(out);
    return out;
}

common::Expected<common::Fd> ArtifactStore::open_artifact(const std::string& name) const {
    if (valid_artifact_name(name)) {
        auto fd = SANDGATE_TRY(m_root.open_file_if_present(name + std::string(k_suffix), name));
        if (fd) return std::move(*fd);
    }
    return common::fail(ErrorKind::invalid_input, "Artifact not found for name: " + name);
}

}  // namespace jobs
