#pragma once
// github::HttpClient: the one place sandgate talks HTTP to GitHub's REST API (api.github.com,
// Enterprise Server's http(s)://HOST/api/v3, or a test server on 127.0.0.1).
//
// Contract:
// - Every request carries Accept: application/vnd.github+json, X-GitHub-Api-Version:
//   2022-11-28, a User-Agent and Authorization: Bearer <token from the TokenSource>.
// - Retries live here and nowhere else: 5xx, timeouts, connection errors and rate limits
//   (403/429 with retry-after; x-ratelimit-remaining: 0 until x-ratelimit-reset; secondary
//   rate limits without headers from one minute) are retried with capped exponential backoff,
//   at most ClientOptions::max_attempts attempts. 404, 422 and other 4xx are never retried;
//   the error carries GitHub's `message`. A 401 is retried once, at once, when the token
//   source renews the refused token (an installation token that expired early or a skewed
//   clock); a fixed token's 401 is final.
// - A token never appears in a URL, a log line or an error message (messages are redacted
//   with the token they were sent with, and a URL that would contain it is refused).
// - Thread-safe: request() may be called from several threads at once; connections, DNS and
//   TLS sessions are shared between calls.

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "common/token_provider.hpp"

namespace github {

inline constexpr std::string_view k_default_api_url = "https://api.github.com";
inline constexpr std::string_view k_api_version = "2022-11-28";
inline constexpr std::string_view k_media_type = "application/vnd.github+json";
inline constexpr std::string_view k_default_user_agent = "sandgate/0.1.0";

inline constexpr std::chrono::milliseconds k_connect_timeout{10'000};
inline constexpr std::chrono::milliseconds k_request_timeout{30'000};
inline constexpr int k_max_attempts = 6;
inline constexpr std::chrono::milliseconds k_backoff_initial{1'000};
inline constexpr std::chrono::milliseconds k_backoff_cap{60'000};
// A secondary rate limit without retry-after: wait at least this long (GitHub's advice).
inline constexpr std::chrono::milliseconds k_rate_limit_fallback{60'000};
// A rate-limit wait longer than this is not slept through: the call fails as transient so
// that the caller can journal the report and send it later.
inline constexpr std::chrono::milliseconds k_rate_limit_max_wait{15 * 60'000};
inline constexpr std::size_t k_max_response_bytes = 32 * 1024 * 1024;

enum class Method { get, post, patch };
std::string_view to_string(Method method);

struct Response {
    long status = 0;
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased, in order

    // The last value of a header (name compared case-insensitively), if present.
    std::optional<std::string> header(std::string_view name) const;
};

// Supplies the bearer token for each attempt (common/token_provider.hpp): an installation
// token may be refreshed between attempts, and one a 401 refused is renewed once.
using TokenSource = common::TokenProvider;

// A fixed token (a PAT, GITHUB_TOKEN, or a token read from a file).
using StaticToken = common::FixedToken;

// Time seams for the retry loop, so tests neither wait nor depend on the wall clock.
struct Clock {
    std::function<std::chrono::system_clock::time_point()> now;
    std::function<void(std::chrono::milliseconds)> sleep;
    static Clock system();
};

struct ClientOptions {
    std::string api_url = std::string(k_default_api_url);  // no trailing slash needed
    std::string user_agent = std::string(k_default_user_agent);
    std::chrono::milliseconds connect_timeout = k_connect_timeout;
    std::chrono::milliseconds request_timeout = k_request_timeout;
    int max_attempts = k_max_attempts;
    std::chrono::milliseconds backoff_initial = k_backoff_initial;
    std::chrono::milliseconds backoff_cap = k_backoff_cap;
    std::chrono::milliseconds rate_limit_max_wait = k_rate_limit_max_wait;
    Clock clock = Clock::system();
};

// What one response means for the retry loop (pure; exposed for tests).
struct RetryAdvice {
    bool retry = false;
    std::optional<std::chrono::milliseconds> wait;  // set: rate limited, wait this long
};
RetryAdvice advise_retry(const Response& response, std::chrono::system_clock::time_point now);

// Until when GitHub asked not to be called, from one response: Retry-After on a rate-limited
// 403/429 (advise_retry's wait), or x-ratelimit-reset when x-ratelimit-remaining is 0 (on any
// status: a 2xx that spent the last request of the window too). nullopt: no such request.
std::optional<std::chrono::system_clock::time_point> rate_limit_until(
    const Response& response, std::chrono::system_clock::time_point now);

// The delay before attempt `attempt + 1` after `attempt` failures (1-based): initial * 2^(n-1),
// capped.
std::chrono::milliseconds backoff_delay(int attempt, std::chrono::milliseconds initial,
                                        std::chrono::milliseconds cap);

// GitHub's `message` (plus the `errors[].message`/`field` details of a 422) from an error body,
// or a short excerpt of a body that is not GitHub's JSON.
std::string github_error_message(std::string_view body);

// Checks an API base URL: http or https, a host, no credentials, no query or fragment.
// Returns it without a trailing slash.
common::Expected<std::string> normalize_api_url(std::string_view url);

// Percent-encodes one path segment or query value (RFC 3986 unreserved kept).
std::string url_encode(std::string_view text);

class HttpClient {
public:
    // Fails with invalid_input on a bad api_url or user agent.
    static common::Expected<HttpClient> create(ClientOptions options,
                                               std::shared_ptr<TokenSource> tokens);

    // Sends `method path` (path begins with '/', relative to the API base, query included)
    // with an optional JSON body, retrying as described above. A 2xx is a value; anything
    // else is an error: invalid_input (422, and 400), permanent (401, 403, 404, other 4xx),
    // transient (5xx, connection errors, rate limits past their budget), timeout.
    common::Expected<Response> request(Method method, std::string_view path,
                                       std::optional<std::string> body = std::nullopt) const;

    // A conditional GET (for polling): sends If-None-Match: `etag` when it is not empty, with
    // the same headers and retries as request(). 304 Not Modified is a value (status 304, no
    // body; GitHub does not count it against the rate limit), as is any 2xx. invalid_input
    // when the etag is not one line.
    common::Expected<Response> get_if_none_match(std::string_view path,
                                                 std::string_view etag) const;

    const std::string& api_url() const;

    // The latest rate_limit_until() of the answers this client (or a copy) got, while it is
    // in the future: callers with a queue of their own (the agent's reports) wait as long
    // before their next attempt, instead of retrying at once.
    std::optional<std::chrono::system_clock::time_point> rate_limited_until() const;

private:
    struct Shared;
    explicit HttpClient(std::shared_ptr<Shared> shared) : m_shared(std::move(shared)) {}
    std::shared_ptr<Shared> m_shared;
};

// Replaces every occurrence of `secret` in `text` with "***" (no-op for an empty secret).
std::string redact(std::string text, std::string_view secret);

}  // namespace github
