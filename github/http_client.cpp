// libcurl transport and the single retry loop of the GitHub client.

#include "github/http_client.hpp"

#include <spdlog/spdlog.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "github/curl_handles.hpp"

namespace github {
namespace {

using common::ErrorKind;

struct Capture {
    Response* response;
    bool overflow = false;
};

size_t on_body(char* data, size_t size, size_t count, void* user) {
    auto* capture = static_cast<Capture*>(user);
    const size_t bytes = size * count;
    if (capture->response->body.size() + bytes > k_max_response_bytes) {
        capture->overflow = true;
        return 0;  // aborts the transfer with CURLE_WRITE_ERROR
    }
    capture->response->body.append(data, bytes);
    return bytes;
}

size_t on_header(char* data, size_t size, size_t count, void* user) {
    auto* capture = static_cast<Capture*>(user);
    std::string_view line(data, size * count);
    if (line.starts_with("HTTP/")) {  // a new response (after a redirect): start over
        capture->response->headers.clear();
        return line.size();
    }
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) return line.size();
    std::string name(line.substr(0, colon));
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) {
        value.remove_prefix(1);
    }
    while (!value.empty() &&
           (value.back() == '\r' || value.back() == '\n' || value.back() == ' ')) {
        value.remove_suffix(1);
    }
    capture->response->headers.emplace_back(std::move(name), std::string(value));
    return line.size();
}

// One outcome of one attempt, before the retry loop judges it.
struct Attempt {
    std::optional<Response> response;  // set when an HTTP answer came back
    CURLcode code = CURLE_OK;
    std::string curl_error;
};

}  // namespace

Clock Clock::system() {
    return Clock{[] { return std::chrono::system_clock::now(); },
                 [](std::chrono::milliseconds delay) { std::this_thread::sleep_for(delay); }};
}

struct HttpClient::Shared {
    ClientOptions options;
    std::shared_ptr<TokenSource> tokens;
    ShareHandle share;
    std::array<std::mutex, CURL_LOCK_DATA_LAST> locks;
    // rate_limited_until(), as milliseconds since the epoch (0: none seen).
    mutable std::atomic<std::int64_t> rate_limited_ms{0};

    void note_rate_limit(const Response& response) const {
        const auto until = rate_limit_until(response, options.clock.now());
        if (!until) return;
        const auto ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(until->time_since_epoch())
                .count();
        auto seen = rate_limited_ms.load();
        while (ms > seen && !rate_limited_ms.compare_exchange_weak(seen, ms)) {
        }
    }

    static void lock(CURL*, curl_lock_data data, curl_lock_access, void* user) {
        static_cast<Shared*>(user)->locks[static_cast<size_t>(data)].lock();
    }
    static void unlock(CURL*, curl_lock_data data, void* user) {
        static_cast<Shared*>(user)->locks[static_cast<size_t>(data)].unlock();
    }

    Attempt send_once(Method method, const std::string& url, const std::optional<std::string>& body,
                      const std::string& token, std::string_view etag) const;
    common::Expected<Response> run(Method method, std::string_view path,
                                   const std::optional<std::string>& body,
                                   std::string_view etag = {}) const;
};

common::Expected<HttpClient> HttpClient::create(ClientOptions options,
                                                std::shared_ptr<TokenSource> tokens) {
    curl_global_once();
    auto url = SANDGATE_TRY(normalize_api_url(options.api_url));
    if (options.user_agent.empty() ||
        options.user_agent.find_first_of("\r\n") != std::string::npos) {
        return common::fail(ErrorKind::invalid_input, "user agent must be one non-empty line");
    }
    if (!tokens) return common::fail(ErrorKind::invalid_input, "no token source");
    options.api_url = url;
    options.max_attempts = std::max(options.max_attempts, 1);
    auto shared = std::make_shared<Shared>();
    shared->options = std::move(options);
    shared->tokens = std::move(tokens);
    shared->share.reset(curl_share_init());
    if (shared->share) {
        CURLSH* share = shared->share.get();
        curl_share_setopt(share, CURLSHOPT_LOCKFUNC, &Shared::lock);
        curl_share_setopt(share, CURLSHOPT_UNLOCKFUNC, &Shared::unlock);
        curl_share_setopt(share, CURLSHOPT_USERDATA, shared.get());
        curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
        curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
        curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    }
    return HttpClient(std::move(shared));
}

const std::string& HttpClient::api_url() const {
    return m_shared->options.api_url;
}

std::optional<std::chrono::system_clock::time_point> HttpClient::rate_limited_until() const {
    const auto ms = m_shared->rate_limited_ms.load();
    const auto until = std::chrono::system_clock::time_point(std::chrono::milliseconds(ms));
    if (ms == 0 || until <= m_shared->options.clock.now()) return std::nullopt;
    return until;
}

common::Expected<Response> HttpClient::request(Method method, std::string_view path,
                                               std::optional<std::string> body) const {
    if (!path.starts_with('/') || path.find_first_of(" \r\n") != std::string_view::npos) {
        return common::fail(ErrorKind::invalid_input,
                            "request path must start with '/' and hold no whitespace");
    }
    return m_shared->run(method, path, body);
}

common::Expected<Response> HttpClient::get_if_none_match(std::string_view path,
                                                         std::string_view etag) const {
    if (etag.find_first_of("\r\n") != std::string_view::npos) {
        return common::fail(ErrorKind::invalid_input, "an ETag must be one line");
    }
    if (!path.starts_with('/') || path.find_first_of(" \r\n") != std::string_view::npos) {
        return common::fail(ErrorKind::invalid_input,
                            "request path must start with '/' and hold no whitespace");
    }
    return m_shared->run(Method::get, path, std::nullopt, etag);
}

Attempt HttpClient::Shared::send_once(Method method, const std::string& url,
                                      const std::optional<std::string>& body,
                                      const std::string& token, std::string_view etag) const {
    Attempt result;
    EasyHandle easy = make_easy_handle();
    HeaderList headers;
    const bool headers_ok =
        append_header(headers, "Accept: " + std::string(k_media_type)) &&
        append_header(headers, "X-GitHub-Api-Version: " + std::string(k_api_version)) &&
        append_header(headers, "Authorization: Bearer " + token) &&
        append_header(headers, "Expect:") &&
        (!body || append_header(headers, "Content-Type: application/json; charset=utf-8")) &&
        (etag.empty() || append_header(headers, "If-None-Match: " + std::string(etag)));
    if (!easy || !headers_ok) {
        result.code = CURLE_OUT_OF_MEMORY;
        result.curl_error = "cannot set up the request";
        return result;
    }
    Response response;
    Capture capture{&response};
    std::array<char, CURL_ERROR_SIZE> error_buffer{};
    CURL* handle = easy.get();
    curl_easy_setopt(handle, CURLOPT_URL, url.c_str());
    curl_easy_setopt(handle, CURLOPT_HTTPHEADER, headers.get());
    curl_easy_setopt(handle, CURLOPT_USERAGENT, options.user_agent.c_str());
    curl_easy_setopt(handle, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(options.connect_timeout.count()));
    curl_easy_setopt(handle, CURLOPT_TIMEOUT_MS,
                     static_cast<long>(options.request_timeout.count()));
    curl_easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(handle, CURLOPT_PROTOCOLS_STR, "http,https");
    // Renamed repositories answer with a redirect. curl drops the Authorization header when
    // a redirect leaves the original host, so a token never travels to a third party.
    curl_easy_setopt(handle, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(handle, CURLOPT_MAXREDIRS, 3L);
    curl_easy_setopt(handle, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, &on_body);
    curl_easy_setopt(handle, CURLOPT_WRITEDATA, &capture);
    curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, &on_header);
    curl_easy_setopt(handle, CURLOPT_HEADERDATA, &capture);
    curl_easy_setopt(handle, CURLOPT_ERRORBUFFER, error_buffer.data());
    if (share) curl_easy_setopt(handle, CURLOPT_SHARE, share.get());
    // OpenSSL's variable for a private CA (Enterprise Server behind one, or a test server):
    // libcurl's built-in bundle path would otherwise win over it.
    if (const char* ca_file = std::getenv("SSL_CERT_FILE"); ca_file != nullptr && *ca_file != '\0')
        curl_easy_setopt(handle, CURLOPT_CAINFO, ca_file);
    if (method == Method::post) curl_easy_setopt(handle, CURLOPT_POST, 1L);
    if (method == Method::patch) curl_easy_setopt(handle, CURLOPT_CUSTOMREQUEST, "PATCH");
    if (body) {
        curl_easy_setopt(handle, CURLOPT_POSTFIELDS, body->data());
        curl_easy_setopt(handle, CURLOPT_POSTFIELDSIZE_LARGE,
                         static_cast<curl_off_t>(body->size()));
    } else if (method != Method::get) {
        curl_easy_setopt(handle, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(handle, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(0));
    }
    result.code = curl_easy_perform(handle);
    if (result.code == CURLE_OK) {
        curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &response.status);
        result.response = std::move(response);
    } else {
        result.curl_error = error_buffer[0] != '\0' ? std::string(error_buffer.data())
                                                    : curl_easy_strerror(result.code);
        if (capture.overflow) result.curl_error = "response larger than the limit";
    }
    return result;
}

common::Expected<Response> HttpClient::Shared::run(Method method, std::string_view path,
                                                   const std::optional<std::string>& body,
                                                   std::string_view etag) const {
    const std::string url = options.api_url + std::string(path);
    const std::string what = std::string(to_string(method)) + " " + std::string(path);
    common::Error last{ErrorKind::transient, what + ": not attempted"};
    bool renewed = false;  // a refused token was renewed once already
    for (int attempt = 1; attempt <= options.max_attempts; ++attempt) {
        auto token = tokens->token();  // per attempt: it may have been refreshed
        if (!token) return std::unexpected(token.error());
        if (token->empty() || token->find_first_of("\r\n") != std::string::npos) {
            return common::fail(ErrorKind::invalid_input,
                                "the GitHub token is empty or not "
                                "one line");
        }
        if (url.find(*token) != std::string::npos) {
            return common::fail(ErrorKind::invalid_input,
                                "refusing a request whose URL would contain the token");
        }
        Attempt outcome = send_once(method, url, body, *token, etag);
        std::optional<std::chrono::milliseconds> wait;
        if (!outcome.response) {
            const bool timed_out = outcome.code == CURLE_OPERATION_TIMEDOUT;
            last = {timed_out ? ErrorKind::timeout : ErrorKind::transient,
                    redact(what + ": " + outcome.curl_error, *token)};
        } else {
            Response& response = *outcome.response;
            spdlog::debug("github: {} -> {} (attempt {})", what, response.status, attempt);
            note_rate_limit(response);
            if (response.status >= 200 && response.status < 300) return std::move(response);
            if (response.status == 304 && !etag.empty()) return std::move(response);
            const std::string message =
                redact(what + ": GitHub answered " + std::to_string(response.status) + ": " +
                           github_error_message(response.body),
                       *token);
            // An expired or revoked installation token: renewed once, sent again at once.
            if (response.status == 401 && !renewed &&
                tokens->refused(*token) == common::Renewal::minted) {
                renewed = true;
                spdlog::info("github: {}: the token was refused; sending again with a new one",
                             what);
                --attempt;
                continue;
            }
            RetryAdvice advice = advise_retry(response, options.clock.now());
            if (!advice.retry) {
                const bool bad_request = response.status == 422 || response.status == 400;
                return common::fail(bad_request ? ErrorKind::invalid_input : ErrorKind::permanent,
                                    message);
            }
            last = {ErrorKind::transient, message};
            wait = advice.wait;
            if (wait && *wait > options.rate_limit_max_wait) {
                last.message += " (rate limited for longer than the wait budget)";
                return std::unexpected(last);
            }
        }
        if (attempt == options.max_attempts) break;
        const auto delay =
            std::max(wait.value_or(std::chrono::milliseconds(0)),
                     backoff_delay(attempt, options.backoff_initial, options.backoff_cap));
        spdlog::info("github: {} (attempt {} of {}); retrying in {} ms", last.message, attempt,
                     options.max_attempts, delay.count());
        options.clock.sleep(delay);
    }
    last.message += " (gave up after " + std::to_string(options.max_attempts) + " attempts)";
    return std::unexpected(last);
}

}  // namespace github
