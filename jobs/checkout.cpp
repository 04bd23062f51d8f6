#include "jobs/checkout.hpp"

namespace jobs {

DirectoryWorkspace::DirectoryWorkspace(std::filesystem::path repository, std::string name)
    : m_repository(std::move(repository)), m_name(std::move(name)) {}

sandbox::Expected<std::filesystem::path> DirectoryWorkspace::workspace_for(const std::string&) {
    std::error_code ec;
    if (!std::filesystem::is_directory(m_repository, ec))
        return sandbox::fail(sandbox::ErrorKind::invalid_input,
                             "the repository directory " + m_repository.string() + " does not exist");
    return m_repository;
}

sandbox::Expected<std::string> DirectoryWorkspace::checkout(const std::filesystem::path& workspace,
                                                            const CheckoutRequest& request) {
    if (!request.repository.empty() && request.repository != m_name)
        return sandbox::fail(sandbox::ErrorKind::unavailable,
                             "actions/checkout of '" + request.repository +
                                 "': sandgate runs offline and only checks out the repository it runs in");
    if (!request.ref.empty())
        return sandbox::fail(sandbox::ErrorKind::unavailable,
                             "actions/checkout with ref '" + request.ref +
                                 "': sandgate runs offline on the repository directory as it is");
    if (request.path.empty() || request.path == ".")
        return "workspace is the repository directory " + workspace.string();
    const std::filesystem::path target = (workspace / request.path).lexically_normal();
    const auto relative = target.lexically_relative(workspace);
    if (relative.empty() || *relative.begin() == "..")
        return sandbox::fail(sandbox::ErrorKind::invalid_input,
                             "actions/checkout path '" + request.path + "' leaves the workspace");
    std::error_code ec;
    std::filesystem::create_directories(target, ec);
    if (ec) return sandbox::fail(sandbox::ErrorKind::permanent, "cannot create " + target.string() + ": " + ec.message());
    for (const auto& entry : std::filesystem::directory_iterator(m_repository, ec)) {
        // Never copy the checkout target into itself.
        if (target.string().starts_with(entry.path().string())) continue;
        std::filesystem::copy(entry.path(), target / entry.path().filename(),
                              std::filesystem::copy_options::recursive |
                                  std::filesystem::copy_options::copy_symlinks |
                                  std::filesystem::copy_options::overwrite_existing,
                              ec);
        if (ec) return sandbox::fail(sandbox::ErrorKind::permanent, "checkout copy of " + entry.path().string() + ": " + ec.message());
    }
    return "copied the repository " + m_repository.string() + " to " + target.string();
}

}  // namespace jobs
