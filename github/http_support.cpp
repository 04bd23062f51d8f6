// The pure parts of the HTTP client: URL checks, encoding, error messages, retry advice.

#include <simdjson.h>

#include <algorithm>
#include <cctype>
#include <charconv>

#include "common/strings.hpp"
#include "github/http_client.hpp"

namespace github {
namespace {

// GitHub's waits, bounded before they become durations (a header's 10^17 seconds would
// overflow the nanoseconds of a time_point): no wait is longer than a day.
constexpr long long k_max_wait_seconds = 24 * 60 * 60;

std::optional<long long> parse_integer(const std::optional<std::string>& text) {
    if (!text) return std::nullopt;
    std::string_view view = *text;
    while (!view.empty() && view.front() == ' ') view.remove_prefix(1);
    while (!view.empty() && view.back() == ' ') view.remove_suffix(1);
    long long value = 0;
    auto [end, ec] = std::from_chars(view.data(), view.data() + view.size(), value);
    if (ec != std::errc{} || end != view.data() + view.size() || value < 0) return std::nullopt;
    return value;
}

}  // namespace

std::string_view to_string(Method method) {
    switch (method) {
        case Method::get:
            return "GET";
        case Method::post:
            return "POST";
        case Method::patch:
            return "PATCH";
    }
    return "GET";
}

std::optional<std::string> Response::header(std::string_view name) const {
    for (auto it = headers.rbegin(); it != headers.rend(); ++it) {
        if (common::ascii_iequals(it->first, name)) return it->second;
    }
    return std::nullopt;
}

RetryAdvice advise_retry(const Response& response, std::chrono::system_clock::time_point now) {
    using std::chrono::milliseconds;
    using std::chrono::seconds;
    const long status = response.status;
    if (status >= 500) return {true, std::nullopt};
    if (status != 403 && status != 429) return {};
    if (auto after = parse_integer(response.header("retry-after"))) {
        return {true, milliseconds(seconds(std::min(*after, k_max_wait_seconds)))};
    }
    auto remaining = parse_integer(response.header("x-ratelimit-remaining"));
    auto reset = parse_integer(response.header("x-ratelimit-reset"));
    if (remaining && *remaining == 0 && reset) {
        // The reset is a Unix time, bounded to the next day before it becomes a time_point.
        const long long now_s = std::chrono::duration_cast<seconds>(now.time_since_epoch()).count();
        const long long bounded = std::clamp(*reset, now_s - 1, now_s + k_max_wait_seconds);
        auto until = std::chrono::system_clock::time_point(seconds(bounded));
        auto wait = std::chrono::duration_cast<milliseconds>(until - now) + seconds(1);
        return {true, std::max(wait, milliseconds(seconds(1)))};
    }
    if (status == 429) return {true, k_rate_limit_fallback};
    // A 403 is a rate limit only when GitHub says so; otherwise it is a refusal.
    std::string message = github_error_message(response.body);
    std::ranges::transform(message, message.begin(),
                           [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (message.find("rate limit") != std::string::npos) return {true, k_rate_limit_fallback};
    return {};
}

std::optional<std::chrono::system_clock::time_point> rate_limit_until(
    const Response& response, std::chrono::system_clock::time_point now) {
    const auto advice = advise_retry(response, now);
    if (advice.wait && (response.status == 403 || response.status == 429))
        return now + *advice.wait;
    auto remaining = parse_integer(response.header("x-ratelimit-remaining"));
    auto reset = parse_integer(response.header("x-ratelimit-reset"));
    if (remaining && *remaining == 0 && reset)
        return std::chrono::system_clock::time_point(std::chrono::seconds(*reset));
    return std::nullopt;
}

std::chrono::milliseconds backoff_delay(int attempt, std::chrono::milliseconds initial,
                                        std::chrono::milliseconds cap) {
    auto delay = initial;
    for (int i = 1; i < attempt && delay < cap; ++i) delay *= 2;
    return std::min(delay, cap);
}

std::string github_error_message(std::string_view body) {
    simdjson::dom::parser parser;
    simdjson::dom::element document;
    if (parser.parse(body.data(), body.size()).get(document) == simdjson::SUCCESS &&
        document.is_object()) {
        std::string message;
        std::string_view text;
        if (document["message"].get_string().get(text) == simdjson::SUCCESS) message = text;
        simdjson::dom::array errors;
        if (document["errors"].get_array().get(errors) == simdjson::SUCCESS) {
            for (auto error : errors) {
                std::string_view detail;
                if (error.is_string()) {
                    detail = error.get_string().value_unsafe();
                } else if (error["message"].get_string().get(detail) != simdjson::SUCCESS &&
                           error["field"].get_string().get(detail) != simdjson::SUCCESS) {
                    continue;
                }
                message += message.empty() ? "" : " (";
                message += detail;
                message += ")";
            }
        }
        if (!message.empty()) return message;
    }
    std::string excerpt(body.substr(0, 200));
    for (char& c : excerpt) {
        if (c == '\n' || c == '\r' || c == '\t') c = ' ';
    }
    return excerpt.empty() ? "(empty body)" : excerpt;
}

common::Expected<std::string> normalize_api_url(std::string_view url) {
    using common::ErrorKind;
    auto bad = [&](std::string_view why) {
        return common::fail(ErrorKind::invalid_input,
                            "--api-url: " + std::string(why) + ": '" + std::string(url) + "'");
    };
    std::string_view rest;
    if (url.starts_with("https://")) {
        rest = url.substr(8);
    } else if (url.starts_with("http://")) {
        rest = url.substr(7);
    } else {
        return bad("must start with https:// or http://");
    }
    const auto host_end = rest.find('/');
    const std::string_view authority = rest.substr(0, host_end);
    if (authority.find('@') != std::string_view::npos) {
        return common::fail(ErrorKind::invalid_input,
                            "--api-url: must not carry credentials (give the token with "
                            "--token-file or an environment variable)");
    }
    if (authority.empty() || authority.front() == ':') return bad("has no host");
    if (url.find_first_of("?# \t\r\n") != std::string_view::npos) {
        return bad("must not contain a query, a fragment or whitespace");
    }
    std::string out(url);
    while (out.ends_with('/')) out.pop_back();
    return out;
}

std::string url_encode(std::string_view text) {
    static constexpr char k_hex[] = "0123456789ABCDEF";
    std::string out;
    out.reserve(text.size());
    for (unsigned char c : text) {
        if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
            out += static_cast<char>(c);
        } else {
            out += '%';
            out += k_hex[c >> 4];
            out += k_hex[c & 15];
        }
    }
    return out;
}

std::string redact(std::string text, std::string_view secret) {
    if (secret.empty()) return text;
    for (auto at = text.find(secret); at != std::string::npos; at = text.find(secret, at)) {
        text.replace(at, secret.size(), "***");
        at += 3;
    }
    return text;
}

}  // namespace github
