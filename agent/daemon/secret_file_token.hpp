#pragma once
// The agent's GitHub token, from its secret file (github.token_file: a regular file, mode
// 0600, never argv). Each GitHub round is a fresh process that reads the file at its start;
// within a round the file is read again when GitHub refuses the token (401), so that a token
// the file's owner replaced meanwhile (a refresher writing an installation token before the
// hour is up) is sent again at once, as the gate's minted tokens are
// (common/token_provider.hpp). Nothing here logs or echoes the token.

#include <filesystem>
#include <mutex>
#include <string>
#include <string_view>

#include "common/token_provider.hpp"

namespace agent {

class SecretFileToken final : public common::TokenProvider {
public:
    // Reads the file once: invalid_input naming it when it is missing, not 0600 or empty.
    static common::Expected<std::shared_ptr<SecretFileToken>> open(std::filesystem::path path);

    common::Expected<std::string> token() override;
    // minted when the file now holds another token (read again here); none otherwise (also
    // when it cannot be read: the refusal then stands).
    common::Renewal refused(std::string_view token) override;

private:
    SecretFileToken(std::filesystem::path path, std::string token)
        : m_path(std::move(path)), m_token(std::move(token)) {}

    std::filesystem::path m_path;
    std::mutex m_mutex;
    std::string m_token;
};

}  // namespace agent
