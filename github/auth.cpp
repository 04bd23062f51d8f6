#include "github/auth.hpp"

#include <openssl/bio.h>
#include <openssl/pem.h>
#include <simdjson.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/strings.hpp"

namespace github {
namespace {

using common::trim;

using common::ErrorKind;

struct BioDeleter {
    void operator()(BIO* bio) const { BIO_free(bio); }
};
struct MdCtxDeleter {
    void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};

bool all_digits(std::string_view text) {
    return !text.empty() &&
           std::ranges::all_of(text, [](unsigned char c) { return std::isdigit(c) != 0; });
}

bool scoped(const InstallationTokenScope& scope) {
    return !scope.repositories.empty() || !scope.permissions.empty();
}

// apps/create-installation-access-token's body for `scope`.
std::string scope_body(const InstallationTokenScope& scope) {
    nlohmann::ordered_json body = nlohmann::ordered_json::object();
    if (!scope.repositories.empty()) body["repositories"] = scope.repositories;
    if (!scope.permissions.empty()) {
        nlohmann::ordered_json permissions = nlohmann::ordered_json::object();
        for (const auto& [name, level] : scope.permissions) permissions[name] = level;
        body["permissions"] = std::move(permissions);
    }
    return body.dump();
}

// Whether the answer grants no more than was asked: GitHub adds metadata:read to every token;
// anything else beyond the request means the scope was not applied.
std::optional<std::string> scope_violation(const InstallationTokenScope& scope,
                                           simdjson::dom::element document) {
    if (!scope.repositories.empty()) {
        std::string_view selection;
        if (document["repository_selection"].get_string().get(selection) != simdjson::SUCCESS ||
            selection != "selected") {
            return "the token is not limited to the repositories asked for "
                   "(repository_selection is not \"selected\")";
        }
    }
    if (scope.permissions.empty()) return std::nullopt;
    simdjson::dom::object granted;
    if (document["permissions"].get_object().get(granted) != simdjson::SUCCESS) {
        return "the answer lacks `permissions`";
    }
    for (auto [key, value] : granted) {
        std::string_view level;
        if (value.get_string().get(level) != simdjson::SUCCESS)
            return "a permission is not a string";
        const bool asked = std::ranges::any_of(scope.permissions, [&](const auto& permission) {
            return permission.first == key && permission.second == level;
        });
        if (!asked && !(key == "metadata" && level == "read")) {
            return "the token was granted " + std::string(key) + ":" + std::string(level) +
                   ", which was not asked for";
        }
    }
    return std::nullopt;
}

}  // namespace

common::Expected<std::string> read_token_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return common::fail(ErrorKind::invalid_input,
                            "--token-file " + path.string() + ": cannot be read");
    }
    std::string content(k_max_token_file_bytes + 1, '\0');
    in.read(content.data(), static_cast<std::streamsize>(content.size()));
    content.resize(static_cast<size_t>(in.gcount()));
    if (content.size() > k_max_token_file_bytes) {
        return common::fail(ErrorKind::invalid_input,
                            "--token-file " + path.string() + ": too large for a token");
    }
    std::string_view text = trim(content);
    text = trim(text.substr(0, text.find('\n')));
    if (text.empty()) {
        return common::fail(ErrorKind::invalid_input,
                            "--token-file " + path.string() + ": holds no token");
    }
    return std::string(text);
}

common::Expected<std::string> read_token_env(std::string_view name) {
    const std::string variable(name);
    const char* value = std::getenv(variable.c_str());
    std::string_view text = trim(value ? value : "");
    if (text.empty() || text.find('\n') != std::string_view::npos) {
        return common::fail(ErrorKind::invalid_input,
                            "environment variable " + variable +
                                " is unset, empty or not one line (it should hold the token)");
    }
    return std::string(text);
}

common::Expected<PrivateKey> parse_private_key(std::string_view pem, std::string_view origin) {
    std::unique_ptr<BIO, BioDeleter> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
    if (!bio) return common::fail(ErrorKind::permanent, "out of memory reading a key");
    PrivateKey key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
    if (!key) {
        return common::fail(ErrorKind::invalid_input,
                            std::string(origin) + ": not a PEM private key");
    }
    if (EVP_PKEY_get_base_id(key.get()) != EVP_PKEY_RSA) {
        return common::fail(ErrorKind::invalid_input,
                            std::string(origin) + ": a GitHub App key must be RSA");
    }
    return key;
}

common::Expected<PrivateKey> load_private_key(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return common::fail(ErrorKind::invalid_input,
                            "--app-key " + path.string() + ": cannot be read");
    }
    std::ostringstream content;
    content << in.rdbuf();
    return parse_private_key(content.str(), "--app-key " + path.string());
}

std::string base64url(std::string_view bytes) {
    std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
    const int written = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                        reinterpret_cast<const unsigned char*>(bytes.data()),
                                        static_cast<int>(bytes.size()));
    out.resize(static_cast<size_t>(written));
    while (!out.empty() && out.back() == '=') out.pop_back();
    for (char& c : out) {
        if (c == '+') c = '-';
        if (c == '/') c = '_';
    }
    return out;
}

common::Expected<std::string> make_app_jwt(std::string_view app_id, EVP_PKEY* key,
                                           std::chrono::system_clock::time_point now) {
    if (trim(app_id).empty()) return common::fail(ErrorKind::invalid_input, "--app-id is empty");
    if (key == nullptr) return common::fail(ErrorKind::invalid_input, "no App key");
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch());
    nlohmann::ordered_json header = {{"alg", "RS256"}, {"typ", "JWT"}};
    nlohmann::ordered_json claims = {{"iat", (seconds - k_jwt_backdate).count()},
                                     {"exp", (seconds + k_jwt_lifetime).count()},
                                     {"iss", std::string(app_id)}};
    const std::string signing_input = base64url(header.dump()) + "." + base64url(claims.dump());
    std::unique_ptr<EVP_MD_CTX, MdCtxDeleter> ctx(EVP_MD_CTX_new());
    size_t length = 0;
    if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key) != 1 ||
        EVP_DigestSign(ctx.get(), nullptr, &length,
                       reinterpret_cast<const unsigned char*>(signing_input.data()),
                       signing_input.size()) != 1) {
        return common::fail(ErrorKind::permanent, "cannot sign the App JWT (RS256)");
    }
    std::string signature(length, '\0');
    if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(signature.data()), &length,
                       reinterpret_cast<const unsigned char*>(signing_input.data()),
                       signing_input.size()) != 1) {
        return common::fail(ErrorKind::permanent, "cannot sign the App JWT (RS256)");
    }
    signature.resize(length);
    return signing_input + "." + base64url(signature);
}

AppJwtSource::AppJwtSource(std::string app_id, PrivateKey key, Clock clock)
    : m_app_id(std::move(app_id)), m_key(std::move(key)), m_clock(std::move(clock)) {}

common::Expected<std::string> AppJwtSource::token() {
    std::lock_guard lock(m_mutex);
    const auto now = m_clock.now();
    if (!m_jwt.empty() && now >= m_made && now - m_made < k_jwt_reuse) return m_jwt;
    auto jwt = make_app_jwt(m_app_id, m_key.get(), now);
    if (!jwt) return jwt;
    m_jwt = *jwt;
    m_made = now;
    return m_jwt;
}

InstallationTokenScope git_read_scope(std::string_view repository) {
    return {{std::string(repository)}, {{"contents", "read"}}};
}

common::Expected<std::shared_ptr<InstallationTokenSource>> InstallationTokenSource::create(
    const ClientOptions& options, const AppCredentials& credentials, InstallationTokenScope scope) {
    if (!all_digits(credentials.installation_id)) {
        return common::fail(ErrorKind::invalid_input, "--installation-id must be a number, got '" +
                                                          credentials.installation_id + "'");
    }
    auto key = SANDGATE_TRY(load_private_key(credentials.key_file));
    auto jwt = std::make_shared<AppJwtSource>(credentials.app_id, std::move(key), options.clock);
    (void)SANDGATE_TRY(jwt->token());
    auto client = SANDGATE_TRY(HttpClient::create(options, jwt));
    return std::shared_ptr<InstallationTokenSource>(new InstallationTokenSource(
        std::move(client), credentials.installation_id, options.clock, std::move(scope)));
}

common::Expected<std::string> InstallationTokenSource::token() {
    std::lock_guard lock(m_mutex);
    const auto now = m_clock.now();
    if (!m_token.empty() && now + k_token_refresh_margin < m_expires_at) return m_token;
    const bool still_valid = !m_token.empty() && now < m_expires_at;
    // A minting that failed a moment ago is not tried again on every call meanwhile.
    if (still_valid && m_failed_at && now >= *m_failed_at &&
        now - *m_failed_at < k_token_retry_interval)
        return m_token;
    auto minted = mint_locked();
    if (minted || !still_valid) return minted;
    m_failed_at = now;
    const auto left = std::chrono::duration_cast<std::chrono::seconds>(m_expires_at - now).count();
    spdlog::warn("github: {}; the cached token, valid for {} s more, is used meanwhile",
                 minted.error().message, left);
    return m_token;
}

common::Renewal InstallationTokenSource::refused(std::string_view token) {
    std::lock_guard lock(m_mutex);
    // Another caller may have replaced it already: the newer token is kept.
    if (m_token == token) {
        m_token.clear();
        m_expires_at = {};
    }
    return common::Renewal::minted;
}

// Under m_mutex: one exchange at a time, the others wait for its answer.
common::Expected<std::string> InstallationTokenSource::mint_locked() {
    auto response = m_app_client.request(
        Method::post, "/app/installations/" + m_installation_id + "/access_tokens",
        scoped(m_scope) ? std::optional<std::string>(scope_body(m_scope)) : std::nullopt);
    if (!response) {
        return common::fail(response.error().kind, "installation token for installation " +
                                                       m_installation_id + ": " +
                                                       response.error().message);
    }
    simdjson::dom::parser parser;
    simdjson::dom::element document;
    std::string_view token;
    std::string_view expires_at;
    if (parser.parse(response->body).get(document) != simdjson::SUCCESS ||
        document["token"].get_string().get(token) != simdjson::SUCCESS ||
        document["expires_at"].get_string().get(expires_at) != simdjson::SUCCESS || token.empty()) {
        return common::fail(ErrorKind::permanent,
                            "installation token answer lacks `token` or `expires_at`");
    }
    if (auto violation = scope_violation(m_scope, document)) {
        return common::fail(ErrorKind::permanent, "installation token for installation " +
                                                      m_installation_id + ": " + *violation);
    }
    auto expiry = parse_github_time(expires_at);
    if (!expiry) {
        return common::fail(ErrorKind::permanent, "installation token answer: bad `expires_at` '" +
                                                      std::string(expires_at) + "'");
    }
    m_token = std::string(token);
    m_expires_at = *expiry;
    m_failed_at.reset();
    return m_token;
}

}  // namespace github
