#include "agent/daemon/secret_file_token.hpp"

#include <memory>

#include "agent/daemon/agent_config.hpp"  // read_secret_file

namespace agent {

common::Expected<std::shared_ptr<SecretFileToken>> SecretFileToken::open(
    std::filesystem::path path) {
    auto token = SANDGATE_TRY(read_secret_file(path));
    return std::shared_ptr<SecretFileToken>(new SecretFileToken(std::move(path), std::move(token)));
}

common::Expected<std::string> SecretFileToken::token() {
    std::lock_guard lock(m_mutex);
    return m_token;
}

common::Renewal SecretFileToken::refused(std::string_view token) {
    std::lock_guard lock(m_mutex);
    if (token != m_token) return common::Renewal::minted;  // another caller read a newer one
    auto fresh = read_secret_file(m_path);
    if (!fresh || *fresh == m_token) return common::Renewal::none;
    m_token = std::move(*fresh);
    return common::Renewal::minted;
}

}  // namespace agent
