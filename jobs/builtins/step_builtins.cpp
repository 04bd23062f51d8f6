// The service builtins of a job leg: actions/cache (restore, and its save as a post step when
// the job succeeded without an exact hit), actions/cache/restore and actions/cache/save on the
// machine's cache store (jobs/builtins/cache_store.hpp), actions/upload-artifact and
// actions/download-artifact on the run's artifacts (jobs/builtins/artifact_store.hpp).
//
// The workspace is a step's: its files are selected and read only through
// sandbox/access/safe_access.hpp (jobs/expr/path_patterns.hpp, jobs/builtins/tree_archive.hpp):
// links, FIFOs and devices among the saved paths are left out (counted on one line), never
// followed. Restores and downloads write into the workspace at their own step, before the steps
// that use them; nothing written by a step reaches the stores but through an archive the trusted
// side wrote. Paths outside the workspace (`~/.npm`) are left out with a warning.
#include <algorithm>

#include "common/sha256.hpp"
#include "jobs/builtins/artifact_store.hpp"
#include "jobs/builtins/cache_store.hpp"
#include "jobs/builtins/tree_archive.hpp"
#include "jobs/builtins/workspace_pack.hpp"
#include "jobs/expr/path_patterns.hpp"
#include "jobs/run/job_steps.hpp"
#include "jobs/run/step_inputs.hpp"
#include "sandbox/access/safe_access.hpp"

namespace jobs::detail {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view k_workspace_prefix = "w/";  // cache archives: workspace-relative
// The state a cache restore hands its post step.
constexpr std::string_view k_state_key = "key";
constexpr std::string_view k_state_path = "path";
constexpr std::string_view k_state_hit = "sandgate-exact-hit";

std::string joined(const std::vector<std::string>& lines, std::string_view separator) {
    std::string out;
    for (const auto& line : lines) out += (out.empty() ? "" : std::string(separator)) + line;
    return out;
}

std::string plural(std::uint64_t count, std::string_view word) {
    return std::to_string(count) + " " + std::string(word) + (count == 1 ? "" : "s");
}

std::string action_name(const std::string& uses) {
    return uses.substr(0, uses.find('@'));
}

// GitHub's version of an entry: what it holds (its paths) and how (the compression).
std::string cache_version(const std::vector<std::string>& paths) {
    return common::sha256_hex(joined(paths, "\n") + "|gzip");
}

std::optional<std::string> invalid_key(const std::vector<std::string>& keys) {
    for (const auto& key : keys) {
        if (!valid_cache_key(key))
            return "Key Validation Error: '" + key +
                   "' must be 1 to 512 characters and cannot contain commas";
    }
    return std::nullopt;
}

}  // namespace

void JobRun::run_cache_restore(BuiltinAction builtin, const std::string& uses,
                               const NamedValues& with, Scope& scope, StepReport& report) {
    log_start(report);
    const std::string key = input_text(with, "key");
    const auto paths = input_lines(with, "path");
    if (paths.empty()) return fail_step(report, "Input required and not supplied: path");
    std::vector<std::string> keys{key};
    for (auto& restore_key : input_lines(with, "restore-keys"))
        keys.push_back(std::move(restore_key));
    if (auto invalid = invalid_key(keys)) return fail_step(report, *invalid);
    const StepLabel label{m_label, report.name};
    set_named(report.outputs, "cache-primary-key", key);
    std::optional<CacheEntry> found;
    if (m_services.caches == nullptr) {
        m_services.log.output(label, "sandgate: this run has no cache store: " + action_name(uses) +
                                         " restores nothing");
    } else {
        auto looked = m_services.caches->lookup(cache_scopes(), cache_version(paths), keys);
        if (!looked) return fail_step(report, looked.error().message);
        found = std::move(*looked);
    }
    const bool exact = found && found->key == key;
    set_named(report.outputs, "cache-hit", exact ? "true" : "false");
    set_named(report.outputs, "cache-matched-key", found ? found->key : "");
    if (!found) {
        m_services.log.output(
            label, m_services.masker.mask("Cache not found for input keys: " + joined(keys, ", ") +
                                          " (sandgate looked in its own store instead of running " +
                                          action_name(uses) + ")"));
        if (input_true(with, "fail-on-cache-miss"))
            return fail_step(report,
                             "Failed to restore cache entry. Exiting as fail-on-cache-miss "
                             "is set. Input key: " +
                                 key);
    } else if (input_true(with, "lookup-only")) {
        m_services.log.output(
            label,
            m_services.masker.mask("sandgate: cache found in its store for key " + found->key +
                                   " (lookup-only: nothing restored) instead "
                                   "of running " +
                                   action_name(uses)));
    } else if (auto restored = restore_cache(*found, report); !restored) {
        return fail_step(report, restored.error().message);
    }
    if (builtin == BuiltinAction::cache) {
        PostStep post;
        post.builtin = BuiltinAction::cache;
        post.name = "Post " + report.name;
        post.id = report.id;
        post.scope = scope;
        set_named(post.state, k_state_key, key);
        set_named(post.state, k_state_path, joined(paths, "\n"));
        set_named(post.state, k_state_hit, exact ? "true" : "false");
        m_posts.push_back(std::move(post));
    }
    report.outcome = report.conclusion = Outcome::success;
    log_finish(report);
}

common::Expected<void> JobRun::restore_cache(const CacheEntry& entry, StepReport& report) {
    auto workspace = sandbox::SafeDir::open_trusted(m_leg.workspace, "the workspace");
    if (!workspace) return std::unexpected(workspace.error());
    auto blob = SANDGATE_TRY(m_services.caches->open_blob(entry));
    const sandbox::SafeDir* root = &*workspace;
    auto unpacked = SANDGATE_TRY(read_tree_archive(
        blob,
        [&](const std::string& name) -> std::optional<TreePlacement> {
            if (!name.starts_with(k_workspace_prefix)) return std::nullopt;
            return TreePlacement{root, name.substr(k_workspace_prefix.size())};
        },
        ArchiveLimits{m_services.caches->limits().max_entry_bytes * 8,
                      m_services.caches->limits().max_entry_bytes, 10'000'000}));
    m_services.log.output(
        StepLabel{m_label, report.name},
        m_services.masker.mask("sandgate: restored the cache entry for key " + entry.key + " (" +
                               plural(unpacked.files, "file") + ", " +
                               std::to_string(unpacked.bytes) +
                               " bytes) from its store into the workspace instead of running "
                               "actions/cache"));
    return {};
}

void JobRun::run_cache_save(const NamedValues& inputs, StepReport& report) {
    const StepLabel label{m_label, report.name};
    const std::string key = input_text(inputs, k_state_key);
    const auto paths = input_lines(inputs, k_state_path);
    report.outcome = report.conclusion = Outcome::success;
    if (input_true(inputs, k_state_hit)) {
        m_services.log.output(label, m_services.masker.mask("Cache hit occurred on the primary "
                                                            "key " +
                                                            key + ", not saving cache."));
        return log_finish(report);
    }
    if (paths.empty()) return fail_step(report, "Input required and not supplied: path");
    if (auto invalid = invalid_key({key})) return fail_step(report, *invalid);
    if (m_services.caches == nullptr) {
        m_services.log.output(label, "sandgate: this run has no cache store: nothing saved");
        return log_finish(report);
    }
    const auto scope = cache_scopes().front();
    const auto version = cache_version(paths);
    // Entries are immutable: a key the scope holds already is not packed again.
    if (auto held = m_services.caches->lookup({scope}, version, {key});
        held && *held && (*held)->key == key) {
        warn(report, "Failed to save: Unable to reserve cache with key " + key +
                         ", another job may be creating this cache.");
        return log_finish(report);
    }
    auto blob = m_services.caches->begin_save();
    if (!blob) return fail_step(report, blob.error().message);
    const CacheLimits& limits = m_services.caches->limits();
    PackRequest request{m_leg.workspace,
                        paths,
                        PackNames::workspace_prefixed,
                        HiddenFiles::include,
                        ArchiveLimits{limits.max_entry_bytes, limits.max_entry_bytes, 10'000'000},
                        workspace_read_limits()};
    auto packed = pack_workspace(request, blob->fd());
    if (!packed) {
        warn(report, "Failed to save: " + packed.error().message);
        return log_finish(report);
    }
    log_skipped(report, packed->skipped, packed->outside);
    if (packed->archive.files == 0) {
        warn(report,
             "Path Validation Error: Path(s) specified in the action for caching do(es) "
             "not exist, hence no cache is being saved.");
        return log_finish(report);
    }
    auto committed =
        m_services.caches->commit(std::move(*blob), scope, version, key, packed->archive.sha256,
                                  packed->archive.archive_bytes);
    if (!committed) {
        warn(report, "Failed to save: " + committed.error().message);
    } else if (*committed == SaveOutcome::exists) {
        warn(report, "Failed to save: Unable to reserve cache with key " + key +
                         ", another job may be creating this cache.");
    } else {
        m_services.log.output(
            label,
            m_services.masker.mask("sandgate: saved the cache entry for key " + key + " (" +
                                   plural(packed->archive.files, "file") + ", " +
                                   std::to_string(packed->archive.content_bytes) +
                                   " bytes) in its store instead of running actions/cache's save"));
    }
    log_finish(report);
}

std::vector<std::string> JobRun::cache_scopes() const {
    const auto text = [&](const Value* value) {
        return value == nullptr ? std::string() : value->to_display_string();
    };
    std::string repository = text(m_github.find("repository"));
    if (repository.empty()) repository = m_settings.repository.string();
    std::vector<std::string> scopes{repository + "@" + text(m_github.find("ref"))};
    const auto add = [&](const std::string& branch) {
        if (branch.empty()) return;
        std::string scope = repository + "@refs/heads/" + branch;
        if (std::ranges::find(scopes, scope) == scopes.end()) scopes.push_back(std::move(scope));
    };
    add(text(m_github.find("base_ref")));
    if (const Value* event = m_github.find("event"); event != nullptr)
        if (const Value* repo = event->get("repository"); repo != nullptr)
            add(text(repo->get("default_branch")));
    return scopes;
}

sandbox::ReadLimits JobRun::workspace_read_limits() const {
    const sandbox::CancelToken* token = m_leg.cancel != nullptr ? m_leg.cancel : m_services.cancel;
    return sandbox::ReadLimits{0, m_deadline, token != nullptr ? token->fd() : -1};
}

void JobRun::log_skipped(StepReport& report, const std::vector<std::string>& skipped,
                         const std::vector<std::string>& outside) {
    const StepLabel label{m_label, report.name};
    if (!skipped.empty())
        m_services.log.output(
            label,
            m_services.masker.mask("sandgate: left out " + std::to_string(skipped.size()) +
                                   " entries that are links, FIFOs, sockets or devices (never "
                                   "followed), the first: " +
                                   skipped.front()));
    if (!outside.empty())
        warn(report,
             "sandgate keeps files of the workspace only: " + joined(outside, ", ") + " left out");
}

}  // namespace jobs::detail
