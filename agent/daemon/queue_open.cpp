#include "agent/daemon/queue_open.hpp"

#include <cstdlib>

namespace agent {

common::Expected<PostgresOptions> postgres_options(const AgentConfig& config) {
    PostgresOptions options;
    options.url = config.queue_url;
    options.application_name = "sandgate " + config.id;
    if (config.queue_password_file) {
        auto password = read_secret_file(*config.queue_password_file);
        if (!password) return std::unexpected(password.error());
        options.password = std::move(*password);
    }
    return options;
}

common::Expected<std::unique_ptr<JobQueue>> open_agent_queue(const AgentConfig& config) {
    if (config.queue_url.empty()) return open_sqlite_queue(default_queue_path(config.state_dir));
    auto options = SANDGATE_TRY(postgres_options(config));
    return open_postgres_queue(options);
}

common::Expected<QueueStore> open_agent_store(const AgentConfig& config) {
    if (config.queue_url.empty()) return open_sqlite_store(default_queue_path(config.state_dir));
    auto options = SANDGATE_TRY(postgres_options(config));
    return open_postgres_store(options);
}

common::Expected<std::unique_ptr<JobQueue>> open_job_process_queue(
    const std::filesystem::path& state_dir) {
    const char* url = std::getenv(k_queue_url_variable);
    if (url == nullptr || *url == '\0') return open_sqlite_queue(default_queue_path(state_dir));
    PostgresOptions options;
    options.url = url;
    options.application_name = "sandgate job";
    if (const char* file = std::getenv(k_queue_password_file_variable); file && *file) {
        auto password = read_secret_file(file);
        if (!password) return std::unexpected(password.error());
        options.password = std::move(*password);
    }
    return open_postgres_queue(options);
}

}  // namespace agent
