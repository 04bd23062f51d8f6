#include "agent/daemon/mirror_upkeep.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace agent {

std::string repository_url(const AgentConfig& config, const std::string& repository) {
    const bool owner_name = repository.find("://") == std::string::npos &&
                            repository.front() != '/' && repository.front() != '.' &&
                            std::count(repository.begin(), repository.end(), '/') == 1;
    if (!owner_name) return repository;
    if (!config.clone_url.empty()) {
        std::string url = config.clone_url;
        url.replace(url.find("{repository}"), std::string_view("{repository}").size(), repository);
        return url;
    }
    std::string web = config.api_url;
    if (web == "https://api.github.com" || web == "https://api.github.com/")
        web = "https://github.com";
    else if (auto at = web.find("/api/v3"); at != std::string::npos)
        web.erase(at);
    return web + "/" + repository;
}
std::optional<std::set<std::string>> served_mirror_scopes(const AgentConfig& config) {
    if (config.repositories.empty()) return std::nullopt;
    std::set<std::string> scopes;
    for (const auto& repository : config.repositories) {
        if (auto name = jobs::mirror_scope_name(repository_url(config, repository)))
            scopes.insert(std::move(*name));
        else
            spdlog::warn("mirror gc: github.repositories: {}", name.error().message);
    }
    return scopes;
}

jobs::MirrorGcReport collect_agent_mirrors(const AgentConfig& config,
                                           const std::vector<std::string>& running_repositories,
                                           jobs::TrashRemoval removal) {
    jobs::MirrorGcPolicy policy;
    policy.max_idle = config.mirror_max_idle;
    policy.served = served_mirror_scopes(config);
    for (const auto& repository : running_repositories)
        if (auto name = jobs::mirror_scope_name(repository_url(config, repository)))
            policy.in_use.insert(std::move(*name));
    auto report =
        jobs::collect_mirrors(config.state_dir, policy, std::chrono::system_clock::now(), removal);
    if (!report) {
        spdlog::warn("mirror gc: {}", report.error().message);
        return {};
    }
    spdlog::info("mirror gc: {} removed, {} kept, {} busy, {} failed", report->removed.size(),
                 report->kept, report->busy.size(), report->failed.size());
    return std::move(*report);
}

MirrorUpkeep::~MirrorUpkeep() {
    if (m_remover.joinable()) m_remover.join();
}

jobs::MirrorGcReport MirrorUpkeep::collect(const std::vector<std::string>& running_repositories) {
    if (m_remover.joinable()) m_remover.join();  // never two removals of one trash at once
    auto report =
        collect_agent_mirrors(m_config, running_repositories, jobs::TrashRemoval::deferred);
    m_remover = std::thread([state_dir = m_config.state_dir] {
        if (auto emptied = jobs::empty_mirror_trash(state_dir); !emptied)
            spdlog::warn("mirror gc: trash: {}", emptied.error().message);
    });
    return report;
}

}  // namespace agent
