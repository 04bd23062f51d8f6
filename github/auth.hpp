#pragma once
// Credentials for the GitHub client: a token from a file or an environment variable (never
// from argv, where any local user can read it), or a GitHub App (an RS256 JWT signed with the
// App's PEM key, exchanged for an installation token that is refreshed before it expires).
//
// Nothing here logs a token or puts one in an error message.

#include <openssl/evp.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "github/http_client.hpp"
#include "github/job_report.hpp"  // parse_github_time

namespace github {

inline constexpr std::chrono::seconds k_jwt_backdate{60};      // iat: clock drift allowance
inline constexpr std::chrono::seconds k_jwt_lifetime{9 * 60};  // exp - now; GitHub's max is 10 min
inline constexpr std::chrono::seconds k_jwt_reuse{5 * 60};     // a JWT is reused this long
inline constexpr std::chrono::seconds k_token_refresh_margin{5 * 60};  // refresh this early
// While a refresh fails and the cached token is still valid: how long until the next try.
inline constexpr std::chrono::seconds k_token_retry_interval{30};
inline constexpr std::size_t k_max_token_file_bytes = 64 * 1024;

// The first line of `path`, surrounding whitespace trimmed. invalid_input naming the file when
// it is missing, unreadable, empty or too large.
common::Expected<std::string> read_token_file(const std::filesystem::path& path);

// The value of environment variable `name`, trimmed. invalid_input naming the variable when
// it is unset or empty.
common::Expected<std::string> read_token_env(std::string_view name);

struct PkeyDeleter {
    void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
using PrivateKey = std::unique_ptr<EVP_PKEY, PkeyDeleter>;

// Loads an RSA private key in PEM (PKCS#1 "RSA PRIVATE KEY", as GitHub hands it out, or
// PKCS#8). invalid_input naming the file on any problem; the key's bytes are never echoed.
common::Expected<PrivateKey> load_private_key(const std::filesystem::path& path);
common::Expected<PrivateKey> parse_private_key(std::string_view pem, std::string_view origin);

// base64url without padding (RFC 7515 section 2).
std::string base64url(std::string_view bytes);

// A GitHub App JWT: header {"alg":"RS256","typ":"JWT"}, claims {"iat": now-60, "exp": now+540,
// "iss": app_id}, signed RS256 with `key`.
common::Expected<std::string> make_app_jwt(std::string_view app_id, EVP_PKEY* key,
                                           std::chrono::system_clock::time_point now);

struct AppCredentials {
    std::string app_id;  // digits (or the App's client ID)
    std::filesystem::path key_file;
    std::string installation_id;  // digits
};

// Bearer tokens for /app/ endpoints: JWTs, cached for k_jwt_reuse. Thread-safe.
class AppJwtSource final : public TokenSource {
public:
    AppJwtSource(std::string app_id, PrivateKey key, Clock clock);
    common::Expected<std::string> token() override;

private:
    std::string m_app_id;
    PrivateKey m_key;
    Clock m_clock;
    std::mutex m_mutex;
    std::string m_jwt;
    std::chrono::system_clock::time_point m_made{};
};

// What an installation token may reach, as apps/create-installation-access-token's body
// takes it: repository names (without the owner) and permission -> level ("read", "write").
// Empty: the installation's every repository and the App's every permission.
struct InstallationTokenScope {
    std::vector<std::string> repositories;
    std::vector<std::pair<std::string, std::string>> permissions;
};

// The narrowest token that can fetch `repository` (a name, without the owner): that one
// repository, contents:read. For git fetches; REST reporting needs an unscoped source.
InstallationTokenScope git_read_scope(std::string_view repository);

// Installation tokens: POST /app/installations/{id}/access_tokens with a JWT, the answer
// cached until k_token_refresh_margin before its expires_at (GitHub's field, read against
// the source's clock), then minted again. Thread-safe: concurrent callers wait for one
// exchange rather than starting several. A failed exchange caches nothing. While the cached
// token is still valid (under k_token_refresh_margin left, not yet expired) a failed refresh
// hands out the cached token with a warning (spdlog) and is tried again on the first call
// k_token_retry_interval later; once it is expired, or after a server refused it (refused()
// drops it), the failure is the error: naming the installation, its kind the client's
// (transient for 5xx and connection errors after the retries, permanent for 401/403/404,
// invalid_input for 422), and the next call tries again. As a common::TokenProvider it is
// also what git fetches ask (jobs/git/git_fetch.hpp).
class InstallationTokenSource final : public TokenSource {
public:
    // `options` are those of the client that will use the tokens (API URL, timeouts, clock).
    // With a non-empty `scope` every token is asked for with it (the JSON body), and an answer
    // granting a permission beyond it (GitHub's implicit metadata:read aside) or another
    // repository selection than "selected" is refused (permanent): the source fails closed.
    static common::Expected<std::shared_ptr<InstallationTokenSource>> create(
        const ClientOptions& options, const AppCredentials& credentials,
        InstallationTokenScope scope = {});

    common::Expected<std::string> token() override;
    common::Renewal refused(std::string_view token) override;

private:
    common::Expected<std::string> mint_locked();

    InstallationTokenSource(HttpClient app_client, std::string installation_id, Clock clock,
                            InstallationTokenScope scope)
        : m_app_client(std::move(app_client)),
          m_installation_id(std::move(installation_id)),
          m_clock(std::move(clock)),
          m_scope(std::move(scope)) {}

    HttpClient m_app_client;
    std::string m_installation_id;
    Clock m_clock;
    InstallationTokenScope m_scope;
    std::mutex m_mutex;
    std::string m_token;
    std::chrono::system_clock::time_point m_expires_at{};
    std::optional<std::chrono::system_clock::time_point> m_failed_at;  // the last failed refresh
};

}  // namespace github
