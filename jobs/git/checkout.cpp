#include "jobs/git/checkout.hpp"

#include <git2.h>

#include "common/temp_dir.hpp"
#include "jobs/git/git_handles.hpp"
#include "jobs/git/git_remove.hpp"
#include "sandbox/access/safe_access.hpp"

namespace jobs {

namespace {

using GitStatusList = GitPtr<git_status_list, git_status_list_free>;

// The paths git ignores in `directory` (a directory once, not what is below it), relative;
// none when it is not the top of a repository libgit2 opens (another user's, say).
std::vector<std::string> ignored_paths(const std::filesystem::path& directory) {
    ensure_libgit2();
    std::vector<std::string> paths;
    git_repository* raw = nullptr;
    if (git_repository_open_ext(&raw, directory.c_str(), GIT_REPOSITORY_OPEN_NO_SEARCH, nullptr) !=
        0)
        return paths;
    GitRepository repository(raw);
    git_status_options options;
    if (git_status_options_init(&options, GIT_STATUS_OPTIONS_VERSION) != 0) return paths;
    options.show = GIT_STATUS_SHOW_WORKDIR_ONLY;
    options.flags = GIT_STATUS_OPT_INCLUDE_IGNORED | GIT_STATUS_OPT_EXCLUDE_SUBMODULES;
    git_status_list* list = nullptr;
    if (git_status_list_new(&list, repository.get(), &options) != 0) return paths;
    GitStatusList owned(list);
    for (std::size_t i = 0, n = git_status_list_entrycount(list); i < n; ++i) {
        const git_status_entry* entry = git_status_byindex(list, i);
        if ((entry->status & GIT_STATUS_IGNORED) == 0 || entry->index_to_workdir == nullptr)
            continue;
        std::string path = entry->index_to_workdir->new_file.path;
        while (path.ends_with('/')) path.pop_back();
        if (!path.empty()) paths.push_back(std::move(path));
    }
    return paths;
}

}  // namespace

DirectoryWorkspace::DirectoryWorkspace(std::filesystem::path repository, std::string name)
    : m_repository(std::move(repository)), m_name(std::move(name)) {}

common::Expected<std::filesystem::path> DirectoryWorkspace::workspace_for(const std::string&) {
    std::error_code ec;
    if (!std::filesystem::is_directory(m_repository, ec))
        return common::fail(
            common::ErrorKind::invalid_input,
            "the repository directory " + m_repository.string() + " does not exist");
    return m_repository;
}

common::Expected<std::string> DirectoryWorkspace::checkout(const std::filesystem::path& workspace,
                                                           const CheckoutRequest& request) {
    if (!request.repository.empty() && request.repository != m_name)
        return common::fail(
            common::ErrorKind::unavailable,
            "actions/checkout of '" + request.repository +
                "': sandgate runs offline and only checks out the repository it runs in");
    if (!request.ref.empty())
        return common::fail(common::ErrorKind::unavailable,
                            "actions/checkout with ref '" + request.ref +
                                "': sandgate runs offline on the repository directory as it is");
    if (request.path.empty() || request.path == ".")
        return "workspace is the repository directory " + workspace.string();
    const std::filesystem::path target = (workspace / request.path).lexically_normal();
    const auto relative = target.lexically_relative(workspace);
    if (relative.empty() || *relative.begin() == "..")
        return common::fail(common::ErrorKind::invalid_input,
                            "actions/checkout path '" + request.path + "' leaves the workspace");
    // The workspace is the steps' (earlier ones may have run): the copy goes through
    // descriptors opened beneath it, into a fresh directory, links copied as links and never
    // followed on either side (sandbox/access/safe_access.hpp).
    auto root = sandbox::SafeDir::open_trusted(workspace, "the workspace");
    auto source = sandbox::SafeDir::open_trusted(m_repository, "the repository");
    if (!root) return std::unexpected(root.error());
    if (!source) return std::unexpected(source.error());
    const std::string into = relative.generic_string();
    SANDGATE_CHECK(root->remove(into, "actions/checkout path '" + request.path + "'"));
    auto dest =
        root->make_dirs(into, {0755, std::nullopt}, "actions/checkout path '" + request.path + "'");
    if (!dest) return std::unexpected(dest.error());
    // Never copy the checkout target into itself.
    const auto inside = sandbox::relative_beneath(m_repository, target);
    std::vector<std::string> skip;
    if (inside) skip.push_back(std::filesystem::path(*inside).begin()->string());
    if (auto copied = sandbox::copy_tree(*source, *dest, std::nullopt, skip); !copied)
        return common::fail(
            common::ErrorKind::permanent,
            "checkout copy of " + m_repository.string() + ": " + copied.error().message);
    return "copied the repository " + m_repository.string() + " to " + target.string();
}

CopyWorkspace::CopyWorkspace(std::filesystem::path repository, std::string name,
                             std::filesystem::path dir)
    : m_repository(std::move(repository)),
      m_name(std::move(name)),
      m_dir(std::move(dir)),
      m_paths(m_repository, m_name) {}

CopyWorkspace::~CopyWorkspace() {
    (void)remove_tree(m_dir);  // never following a link a step left
}

common::Expected<std::unique_ptr<CopyWorkspace>> CopyWorkspace::create(
    std::filesystem::path repository, std::string name) {
    auto dir = SANDGATE_TRY(common::make_host_temp_dir("sandgate-work-"));
    return std::unique_ptr<CopyWorkspace>(
        new CopyWorkspace(std::move(repository), std::move(name), std::move(dir)));
}

common::Expected<std::filesystem::path> CopyWorkspace::workspace_for(const std::string&) {
    unsigned number = 0;
    {
        std::lock_guard lock(m_mutex);
        number = ++m_legs;
    }
    const std::string base = m_repository.filename().empty() ? std::string("repository")
                                                             : m_repository.filename().string();
    const std::string relative = std::to_string(number) + "/" + base;
    // Made beneath the private directory's descriptor before any step of the leg runs; the
    // copy reads the repository directory through descriptors that never follow a link.
    auto root = SANDGATE_TRY(sandbox::SafeDir::open_trusted(m_dir, "the legs' directory"));
    auto dest = SANDGATE_TRY(root.make_dirs(relative, {0755, std::nullopt}, "the leg's workspace"));
    auto source = SANDGATE_TRY(sandbox::SafeDir::open_trusted(m_repository, "the repository"));
    if (auto copied = sandbox::copy_tree(source, dest, std::nullopt, ignored_paths(m_repository));
        !copied)
        return common::fail(common::ErrorKind::permanent,
                            "copy of " + m_repository.string() + ": " + copied.error().message);
    return m_dir / relative;
}

common::Expected<std::string> CopyWorkspace::checkout(const std::filesystem::path& workspace,
                                                      const CheckoutRequest& request) {
    auto line = SANDGATE_TRY(m_paths.checkout(workspace, request));
    if (request.path.empty() || request.path == ".")
        return "workspace is a copy of the repository directory " + m_repository.string() + " at " +
               workspace.string();
    return line;
}

std::filesystem::path CopyWorkspace::leg_root(const std::filesystem::path& workspace) const {
    return workspace.parent_path();
}

}  // namespace jobs
