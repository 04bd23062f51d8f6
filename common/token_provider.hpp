#pragma once
// A credential that may change while it is in use: an installation token expires after an hour
// and is minted again, a fixed token (a PAT, SANDGATE_GIT_TOKEN) never changes. The layer that
// sends a token (jobs/ for git fetches, github/ for the REST client) asks for it at each use
// and reports a refusal; the layer that knows how to mint one (github/) implements this.
// Nothing here knows of GitHub.
//
// Contract for implementations: thread-safe; token() hands out the cached token while it is
// good and mints a new one otherwise, concurrent callers waiting for one minting. When an
// early refresh fails and the cached token has not expired (nor been refused), that token is
// handed out with a warning instead of the error. Otherwise a failed minting is an error value
// whose kind says whether trying later may help (transient, timeout), whether the facility is
// missing (unavailable), or not (permanent, invalid_input), and whose message never holds a
// token.

#include <string>
#include <string_view>
#include <utility>

#include "common/error.hpp"

namespace common {

// What a refusal means for the next token() call.
enum class Renewal {
    none,    // the same token again: a refusal is final (a fixed token)
    minted,  // the refused token is dropped: the next call hands out another one
};

class TokenProvider {
public:
    virtual ~TokenProvider() = default;
    // The token to send now (one line, never empty), or why none can be had.
    virtual Expected<std::string> token() = 0;
    // A server refused `token` (HTTP 401: expired early, revoked, a clock skewed). Whether
    // asking again can help; only the refused token itself is dropped, never a newer one.
    virtual Renewal refused(std::string_view /*token*/) { return Renewal::none; }
};

// A token that never changes.
class FixedToken final : public TokenProvider {
public:
    explicit FixedToken(std::string token) : m_token(std::move(token)) {}
    Expected<std::string> token() override { return m_token; }

private:
    std::string m_token;
};

}  // namespace common
