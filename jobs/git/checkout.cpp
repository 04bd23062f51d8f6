#include "jobs/git/checkout.hpp"

#include "sandbox/access/safe_access.hpp"

namespace jobs {

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
    SANDGATE_TRY(root->remove(into, "actions/checkout path '" + request.path + "'"));
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

}  // namespace jobs
