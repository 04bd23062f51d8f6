#include "agent/cli/run_setup.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "jobs/workflow/workflow_call.hpp"
#include "sandbox/access/safe_access.hpp"
#include "sandbox/access/safe_read.hpp"

namespace agent {

using common::ErrorKind;
using common::fail;

common::Expected<std::vector<std::filesystem::path>> workflow_files(
    const std::filesystem::path& base, const std::string& path) {
    const std::filesystem::path given(path);
    const std::filesystem::path full = given.is_absolute() ? given : base / given;
    // The repository is a pull request's tree: looked at through its fd, links never followed
    // (sandbox/access/safe_access.hpp). A path outside it is the caller's, taken as it is.
    auto relative = sandbox::relative_beneath(base, full);
    std::filesystem::path root_path = base;
    if (!relative) {
        root_path = full.parent_path();
        relative = full.filename().string();
    }
    const auto missing = [&] {
        return fail(ErrorKind::invalid_input, "-W " + path + ": no such file or directory");
    };
    std::error_code ec;
    root_path = std::filesystem::weakly_canonical(root_path,
                                                  ec);  // the caller's path: a link there is theirs
    auto root = sandbox::SafeDir::open_trusted(root_path, "-W " + path);
    if (!root) return missing();
    std::vector<std::filesystem::path> out;
    if (*relative != "." && root->open_file(*relative, "-W " + path)) {
        out.push_back(given);
        return out;
    }
    auto dir = *relative == "." ? sandbox::SafeDir::open_trusted(root_path, "-W " + path)
                                : root->open_dir(*relative, "-W " + path);
    if (!dir) return missing();
    auto listed = dir->walk([&](const sandbox::WalkEntry& entry) {
        const auto ext = std::filesystem::path(entry.relative).extension();
        if ((ext == ".yml" || ext == ".yaml") && entry.kind == sandbox::EntryKind::regular)
            out.push_back(given / entry.relative);
        return sandbox::WalkStep::skip;  // the directory itself, not below
    });
    if (!listed)
        return fail(ErrorKind::invalid_input, "-W " + path + ": " + listed.error().message);
    std::ranges::sort(out);
    if (out.empty())
        return fail(ErrorKind::invalid_input, "-W " + path + ": no *.yml or *.yaml workflow there");
    return out;
}

namespace {

constexpr std::uint64_t k_max_workflow_bytes = 4 * 1024 * 1024;

// A workflow file of the repository (a pull request's tree): read through the repository's fd,
// a regular file beneath it reached without a link (sandbox/access/safe_access.hpp). An absolute
// path outside the repository is the caller's own file (-W /some/file.yml), read as it is.
common::Expected<std::string> read_workflow_file(const std::filesystem::path& repository,
                                                 const std::filesystem::path& file) {
    const std::filesystem::path full = file.is_absolute() ? file : repository / file;
    const auto unreadable = [&] {
        return fail(ErrorKind::invalid_input, file.string() + ": cannot read the file");
    };
    auto relative = sandbox::relative_beneath(repository, full);
    std::filesystem::path base = repository;
    if (!relative) {
        base = full.parent_path();
        relative = full.filename().string();
    }
    std::error_code ec;
    base =
        std::filesystem::weakly_canonical(base, ec);  // the caller's path: a link there is theirs
    auto text = sandbox::read_file_beneath(base, base / *relative,
                                           {k_max_workflow_bytes, std::nullopt, -1}, file.string());
    if (!text) return unreadable();
    return text;
}

}  // namespace

common::Expected<std::vector<jobs::Workflow>> load_workflows(
    const std::filesystem::path& repository, const std::vector<std::filesystem::path>& files,
    jobs::Dialect dialect) {
    std::vector<jobs::Workflow> out;
    for (const auto& file : files) {
        auto text = SANDGATE_TRY(read_workflow_file(repository, file));
        auto workflow =
            SANDGATE_TRY(jobs::parse_workflow(text, file.lexically_normal().string(), dialect));
        for (const auto& job : workflow.jobs) {
            if (!job.uses || !job.uses->value.starts_with("./")) continue;
            (void)SANDGATE_TRY(jobs::load_called_workflow(repository, job));
        }
        out.push_back(std::move(workflow));
    }
    return out;
}

common::Expected<std::pair<std::string, std::string>> parse_matrix_filter(const std::string& text) {
    const auto colon = text.find(':');
    if (colon == std::string::npos || colon == 0)
        return fail(ErrorKind::invalid_input, "--matrix " + text + ": expected KEY:VALUE");
    return std::pair{text.substr(0, colon), text.substr(colon + 1)};
}

common::Expected<jobs::Value> load_event(const std::filesystem::path& path) {
    if (path.empty()) return jobs::Value(jobs::Object{});
    std::ifstream in(path, std::ios::binary);  // trusted path: -e, the caller's own file
    if (!in)
        return fail(ErrorKind::invalid_input, "-e " + path.string() + ": cannot read the file");
    std::ostringstream text;
    text << in.rdbuf();
    auto value = jobs::parse_json(text.str());
    if (!value)
        return fail(ErrorKind::invalid_input, "-e " + path.string() + ": " + value.error().message);
    if (!value->is_object())
        return fail(ErrorKind::invalid_input,
                    "-e " + path.string() + ": the payload must be a JSON object");
    return value;
}

jobs::Value synthesized_event(std::string_view event_name, const jobs::RepoInfo& repo) {
    jobs::Object payload;
    if (event_name == "push" && !repo.ref.empty()) payload.set("ref", repo.ref);
    return jobs::Value(std::move(payload));
}

common::Expected<jobs::Object> top_level_inputs(const jobs::RunSettings& settings,
                                                const jobs::Workflow& workflow) {
    jobs::Object given;
    if (const jobs::Value* inputs = settings.event.get("inputs"); inputs && inputs->is_object())
        given = inputs->as_object();
    jobs::EvalContext context;
    context.contexts.set("github", jobs::Value(jobs::Object{}));
    context.contexts.set("inputs", jobs::Value(given));
    context.contexts.set("vars", jobs::Value(settings.vars));
    if (settings.event_name == "workflow_dispatch")
        return jobs::resolve_inputs(workflow.on.dispatch_inputs, given, context,
                                    jobs::InputCheck::lenient);
    if (settings.event_name == "workflow_call")
        return jobs::resolve_inputs(workflow.on.call_inputs, given, context,
                                    jobs::InputCheck::lenient);
    return given;
}

}  // namespace agent
