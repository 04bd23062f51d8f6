// actions/upload-artifact and actions/download-artifact as builtins: the run's artifacts
// (jobs/builtins/artifact_store.hpp) on the trusted side, kept with the run's report. An upload
// reads the workspace through sandbox/access/safe_access.hpp only
// (jobs/builtins/workspace_pack.hpp); a download writes into the workspace at its own step, beneath
// the workspace's fd.
#include <fnmatch.h>

#include "jobs/builtins/artifact_store.hpp"
#include "jobs/builtins/workspace_pack.hpp"
#include "jobs/run/job_steps.hpp"
#include "jobs/run/step_inputs.hpp"
#include "sandbox/access/safe_access.hpp"

namespace jobs::detail {
namespace {

std::string joined(const std::vector<std::string>& lines) {
    std::string out;
    for (const auto& line : lines) out += (out.empty() ? "" : ", ") + line;
    return out;
}

}  // namespace

void JobRun::run_upload_artifact(const NamedValues& with, StepReport& report) {
    log_start(report);
    const std::string name = input_text(with, "name", "artifact");
    const auto paths = input_lines(with, "path");
    if (paths.empty()) return fail_step(report, "Input required and not supplied: path");
    const std::string if_none = input_text(with, "if-no-files-found", "warn");
    if (if_none != "warn" && if_none != "error" && if_none != "ignore")
        return fail_step(report, "Unrecognized if-no-files-found input. Provided: " + if_none +
                                     ". Available options: warn, error, ignore");
    if (!valid_artifact_name(name))
        return fail_step(report,
                         "The artifact name '" + name +
                             "' is not valid: it may not contain \" : < > | * ? \\ / CR LF");
    if (m_services.artifacts == nullptr)
        return fail_step(report, "this run keeps no artifacts: actions/upload-artifact cannot run");
    auto blob = m_services.artifacts->begin_upload();
    if (!blob) return fail_step(report, blob.error().message);
    PackRequest request{
        m_leg.workspace,
        paths,
        PackNames::below_common_root,
        input_true(with, "include-hidden-files") ? HiddenFiles::include : HiddenFiles::exclude,
        ArchiveLimits{},
        workspace_read_limits()};
    auto packed = pack_workspace(request, blob->fd());
    if (!packed) return fail_step(report, packed.error().message);
    log_skipped(report, packed->skipped, packed->outside);
    const StepLabel label{m_label, report.name};
    if (packed->archive.files == 0) {
        const std::string message = "No files were found with the provided path: " + joined(paths) +
                                    ". No artifacts will be uploaded.";
        if (if_none == "error") return fail_step(report, message);
        if (if_none == "warn")
            warn(report, message);
        else
            m_services.log.output(label, m_services.masker.mask(message));
        report.outcome = report.conclusion = Outcome::success;
        return log_finish(report);
    }
    const auto overwrite =
        input_true(with, "overwrite") ? ArtifactOverwrite::yes : ArtifactOverwrite::no;
    if (auto committed = m_services.artifacts->commit(std::move(*blob), name, overwrite);
        !committed)
        return fail_step(report, committed.error().message);
    set_named(report.outputs, "artifact-id", packed->archive.sha256.substr(0, 16));
    set_named(report.outputs, "artifact-digest", packed->archive.sha256);
    set_named(report.outputs, "artifact-url", "");
    m_services.log.output(
        label,
        m_services.masker.mask("sandgate: kept the artifact '" + name + "' (" +
                               std::to_string(packed->archive.files) + " files, " +
                               std::to_string(packed->archive.content_bytes) +
                               " bytes) with this run instead of running actions/upload-artifact"));
    report.outcome = report.conclusion = Outcome::success;
    log_finish(report);
}

void JobRun::run_download_artifact(const NamedValues& with, StepReport& report) {
    log_start(report);
    const std::string name = input_text(with, "name");
    const std::string pattern = input_text(with, "pattern");
    const std::string run_id = input_text(with, "run-id");
    if (!run_id.empty() && run_id != m_settings.run_id)
        return fail_step(report, "sandgate keeps the artifacts of this run only: run-id " + run_id +
                                     " cannot be downloaded");
    if (m_services.artifacts == nullptr)
        return fail_step(report,
                         "this run keeps no artifacts: actions/download-artifact cannot run");
    const std::filesystem::path given = input_text(with, "path", ".");
    const auto destination =
        (given.is_absolute() ? given : m_leg.workspace / given).lexically_normal();
    const auto relative = sandbox::relative_beneath(m_leg.workspace, destination);
    if (!relative)
        return fail_step(report, "sandgate downloads artifacts into the workspace only: '" +
                                     given.string() + "' is outside it");
    auto workspace = sandbox::SafeDir::open_trusted(m_leg.workspace, "the workspace");
    if (!workspace) return fail_step(report, workspace.error().message);
    const sandbox::CreateOptions dirs{0755, std::nullopt};
    auto target = relative->empty() || *relative == "."
                      ? sandbox::SafeDir::open_trusted(m_leg.workspace, "the workspace")
                      : workspace->make_dirs(*relative, dirs, given.string());
    if (!target) return fail_step(report, target.error().message);
    std::vector<std::string> names;
    if (!name.empty()) {
        names.push_back(name);
    } else {
        auto all = m_services.artifacts->names();
        if (!all) return fail_step(report, all.error().message);
        for (auto& each : *all)
            if (pattern.empty() || ::fnmatch(pattern.c_str(), each.c_str(), 0) == 0)
                names.push_back(std::move(each));
    }
    const bool into_own_directory = name.empty() && !input_true(with, "merge-multiple");
    const StepLabel label{m_label, report.name};
    for (const auto& each : names) {
        auto archive = m_services.artifacts->open_artifact(each);
        if (!archive)
            return fail_step(report, "Unable to download artifact(s): " + archive.error().message);
        std::optional<sandbox::SafeDir> own;
        if (into_own_directory) {
            auto made = target->make_dirs(each, dirs, each);
            if (!made) return fail_step(report, made.error().message);
            own = std::move(*made);
        }
        const sandbox::SafeDir* root = own ? &*own : &*target;
        auto unpacked = read_tree_archive(
            *archive,
            [&](const std::string& entry) {
                return std::optional<TreePlacement>({root, entry});
            },
            ArchiveLimits{});
        if (!unpacked)
            return fail_step(
                report, "Unable to download artifact '" + each + "': " + unpacked.error().message);
        m_services.log.output(
            label, m_services.masker.mask("sandgate: unpacked the artifact '" + each + "' (" +
                                          std::to_string(unpacked->files) +
                                          " files) of this run into " + root->path().string() +
                                          " instead of running actions/download-artifact"));
    }
    if (names.empty())
        m_services.log.output(label,
                              "sandgate: no artifact of this run matches: nothing "
                              "downloaded");
    set_named(report.outputs, "download-path", destination.string());
    report.outcome = report.conclusion = Outcome::success;
    log_finish(report);
}

}  // namespace jobs::detail
