#pragma once
// The artifacts of one run, behind the upload-artifact and download-artifact builtins
// (jobs/builtins/step_builtins.cpp): DIR/NAME.tar.gz (jobs/builtins/tree_archive.hpp) for each
// uploaded artifact, DIR/tmp/ for uploads being written. DIR is the trusted side's (kept with the
// run's report), never bound into a sandbox. Thread- and process-safe: an artifact appears by one
// rename, refused when the name is taken unless the upload overwrites.

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "jobs/builtins/cache_store.hpp"  // PendingBlob
#include "sandbox/access/safe_access.hpp"

namespace jobs {

enum class ArtifactOverwrite { no, yes };

// Whether `name` can name an artifact: not empty, at most 256 characters, none of GitHub's
// forbidden characters (" : < > | * ? \ / CR LF), not "." or "..".
bool valid_artifact_name(std::string_view name);

class ArtifactStore {
public:
    // Opens (creating) DIR; its parent must exist.
    static common::Expected<ArtifactStore> open(const std::filesystem::path& dir);
    ArtifactStore(ArtifactStore&&) noexcept = default;

    common::Expected<PendingBlob> begin_upload() const;
    // invalid_input "an artifact named NAME exists already" unless `overwrite`.
    common::Expected<void> commit(PendingBlob blob, const std::string& name,
                                  ArtifactOverwrite overwrite) const;
    // The artifacts' names, sorted.
    common::Expected<std::vector<std::string>> names() const;
    // NAME's archive; invalid_input "Artifact not found for name: NAME" when there is none.
    common::Expected<common::Fd> open_artifact(const std::string& name) const;
    const std::filesystem::path& dir() const { return m_root.path(); }

private:
    ArtifactStore(sandbox::SafeDir root, sandbox::SafeDir tmp)
        : m_root(std::move(root)), m_tmp(std::make_unique<sandbox::SafeDir>(std::move(tmp))) {}
    sandbox::SafeDir m_root;
    std::unique_ptr<sandbox::SafeDir> m_tmp;
};

}  // namespace jobs
