// The egress presets (see egress_presets.hpp).
#include "agent/cli/egress_presets.hpp"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <sstream>

#include "sandbox/wrap/probe.hpp"

namespace agent {
namespace {

using Rules = std::vector<sandbox::EgressRule>;

std::string_view trimmed(std::string_view text) {
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t' || text.front() == '\r'))
        text.remove_prefix(1);
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r'))
        text.remove_suffix(1);
    return text;
}

const std::string* env_value(const PresetPlaces& places, std::string_view name) {
    for (const auto& [key, value] : places.env)
        if (key == name && !value.empty()) return &value;
    return nullptr;
}

// The values of `key = value` lines (ini and npmrc alike; comments start with # or ;).
std::vector<std::string> values_of(const std::filesystem::path& file, std::string_view key) {
    std::vector<std::string> out;
    std::istringstream lines(sandbox::read_small_file(file).value_or(""));
    for (std::string line; std::getline(lines, line);) {
        const std::string_view text = trimmed(line);
        if (text.empty() || text.front() == '#' || text.front() == ';') continue;
        const auto equals = text.find('=');
        if (equals == std::string_view::npos || trimmed(text.substr(0, equals)) != key) continue;
        std::istringstream words{std::string(trimmed(text.substr(equals + 1)))};
        for (std::string word; words >> word;) out.push_back(word);
    }
    return out;
}

common::Expected<void> add(Rules& rules, std::string_view preset, const std::string& host_port) {
    auto rule = sandbox::parse_egress_rule(host_port);
    if (!rule)
        return common::fail(
            common::ErrorKind::invalid_input,
            "--allow-egress " + std::string(preset) + ": the configured registry host '" +
                sandbox::printable(host_port) + "' cannot be allowed (" +
                rule.error().message.substr(rule.error().message.find(": ") + 2) + ")");
    const bool known = std::any_of(rules.begin(), rules.end(), [&](const sandbox::EgressRule& r) {
        return r.host == rule->host && r.port == rule->port;
    });
    if (!known) rules.push_back(*rule);
    return {};
}

// scheme://[user@]host[:port]/... -> "host:port" (80 for http, 443 otherwise).
common::Expected<void> add_url(Rules& rules, std::string_view preset, std::string_view url) {
    const auto scheme_end = url.find("://");
    if (scheme_end == std::string_view::npos)
        return common::fail(common::ErrorKind::invalid_input,
                            "--allow-egress " + std::string(preset) +
                                ": the configured registry '" + sandbox::printable(url) +
                                "' is not a URL");
    const std::string_view scheme = url.substr(0, scheme_end);
    std::string_view authority = url.substr(scheme_end + 3);
    authority = authority.substr(0, authority.find_first_of("/?#"));
    if (const auto at = authority.rfind('@'); at != std::string_view::npos)
        authority.remove_prefix(at + 1);
    std::string host_port(authority);
    if (host_port.find(':') == std::string::npos) host_port += scheme == "http" ? ":80" : ":443";
    return add(rules, preset, host_port);
}

common::Expected<void> add_urls(Rules& rules, std::string_view preset,
                                const std::vector<std::string>& urls) {
    for (const auto& url : urls)
        if (auto ok = add_url(rules, preset, url); !ok) return ok;
    return {};
}

common::Expected<Rules> npm(const PresetPlaces& places) {
    Rules rules;
    std::vector<std::string> registry;
    if (const auto* value = env_value(places, "npm_config_registry")) registry = {*value};
    if (registry.empty()) registry = values_of(places.home / ".npmrc", "registry");
    if (registry.empty()) registry = values_of(places.etc / "npmrc", "registry");
    if (registry.empty()) registry = {"https://registry.npmjs.org/"};
    SANDGATE_CHECK(add_urls(rules, "@npm", {registry.back()}));
    return rules;
}

common::Expected<Rules> pypi(const PresetPlaces& places) {
    std::vector<std::string> urls;
    if (const auto* value = env_value(places, "PIP_INDEX_URL")) urls.push_back(*value);
    if (const auto* value = env_value(places, "PIP_EXTRA_INDEX_URL")) {
        std::istringstream words(*value);
        for (std::string word; words >> word;) urls.push_back(word);
    }
    for (const auto& file : {places.home / ".config/pip/pip.conf", places.home / ".pip/pip.conf",
                             places.etc / "pip.conf"}) {
        if (!urls.empty()) break;
        for (const char* key : {"index-url", "extra-index-url"})
            for (auto& url : values_of(file, key)) urls.push_back(std::move(url));
    }
    Rules rules;
    if (urls.empty()) {
        for (const char* host : {"pypi.org", "files.pythonhosted.org"})
            SANDGATE_CHECK(add(rules, "@pypi", host));
        return rules;
    }
    SANDGATE_CHECK(add_urls(rules, "@pypi", urls));
    return rules;
}

common::Expected<Rules> go(const PresetPlaces& places) {
    Rules rules;
    const auto* proxy = env_value(places, "GOPROXY");
    std::string list = proxy ? *proxy : "https://proxy.golang.org,direct";
    std::replace(list.begin(), list.end(), '|', ',');
    std::istringstream items(list);
    for (std::string item; std::getline(items, item, ',');) {
        const std::string_view url = trimmed(item);
        if (url.empty() || url == "direct" || url == "off") continue;
        SANDGATE_CHECK(add_url(rules, "@go", url));
    }
    const auto* sumdb = env_value(places, "GOSUMDB");
    std::string sum = sumdb ? *sumdb : "sum.golang.org";
    if (sum != "off") {
        sum = sum.substr(
            sum.rfind(' ') == std::string::npos ? 0 : sum.rfind(' ') + 1);  // "name+key url"
        if (sum.find("://") != std::string::npos) {
            SANDGATE_CHECK(add_url(rules, "@go", sum));
        } else if (auto ok = add(rules, "@go", sum.substr(0, sum.find('+'))); !ok) {
            return std::unexpected(ok.error());
        }
    }
    return rules;
}

// `deb [options] URI suite...` lines and deb822 `URIs:` fields.
common::Expected<Rules> debian(const PresetPlaces& places) {
    std::vector<std::filesystem::path> files = {places.etc / "apt/sources.list"};
    std::error_code ec;
    // trusted path: the agent's own /etc (never a tree a step could write)
    for (const auto& entry :
         std::filesystem::directory_iterator(places.etc / "apt/sources.list.d", ec)) {
        const auto ext = entry.path().extension();
        if (ext == ".list" || ext == ".sources") files.push_back(entry.path());
    }
    std::sort(files.begin() + 1, files.end());
    std::vector<std::string> urls;
    for (const auto& file : files) {
        std::istringstream lines(sandbox::read_small_file(file).value_or(""));
        for (std::string line; std::getline(lines, line);) {
            std::string_view text = trimmed(line);
            if (text.starts_with("URIs:")) {
                std::istringstream words{std::string(text.substr(5))};
                for (std::string word; words >> word;) urls.push_back(word);
            } else if (text.starts_with("deb ") || text.starts_with("deb-src ")) {
                std::istringstream words{std::string(text)};
                std::string word;
                words >> word;  // deb
                while (words >> word && word.starts_with('[')) {
                    while (word.find(']') == std::string::npos && words >> word) {
                    }
                }
                if (word.find("://") != std::string::npos) urls.push_back(word);
            }
        }
    }
    std::erase_if(urls, [](const std::string& url) {
        return !url.starts_with("http://") && !url.starts_with("https://");
    });
    if (urls.empty())
        urls = {"http://deb.debian.org/debian", "http://security.debian.org/debian-security"};
    Rules rules;
    SANDGATE_CHECK(add_urls(rules, "@debian", urls));
    return rules;
}

Rules fixed(std::initializer_list<const char*> hosts) {
    Rules rules;
    for (const char* host : hosts) rules.push_back(*sandbox::parse_egress_rule(host));
    return rules;
}

}  // namespace

PresetPlaces machine_places() {
    PresetPlaces places;
    const char* home = std::getenv("HOME");
    places.home = home != nullptr ? home : "/nonexistent";
    places.env = sandbox::current_environment();
    return places;
}

common::Expected<void> add_egress_values(const std::vector<std::string>& allow,
                                         const std::vector<std::string>& ranges,
                                         sandbox::Policy& policy) {
    std::optional<PresetPlaces> places;  // read once, and only for a preset
    for (const auto& text : allow) {
        if (text.starts_with('@')) {
            if (!places) places = machine_places();
            auto rules = SANDGATE_TRY(expand_egress_preset(text, *places));
            policy.egress.insert(policy.egress.end(), rules.begin(), rules.end());
            continue;
        }
        auto rule = SANDGATE_TRY(sandbox::parse_egress_rule(text));
        policy.egress.push_back(std::move(rule));
    }
    for (const auto& text : ranges) {
        auto range = SANDGATE_TRY(sandbox::parse_egress_range(text));
        policy.egress_ranges.push_back(std::move(range));
    }
    return {};
}

common::Expected<std::vector<sandbox::EgressRule>> expand_egress_preset(
    std::string_view name, const PresetPlaces& places) {
    if (name == "@npm") return npm(places);
    if (name == "@pypi") return pypi(places);
    if (name == "@go") return go(places);
    if (name == "@debian") return debian(places);
    if (name == "@crates") return fixed({"crates.io", "index.crates.io", "static.crates.io"});
    if (name == "@github")
        return fixed({"github.com", "api.github.com", "codeload.github.com",
                      "raw.githubusercontent.com", "objects.githubusercontent.com",
                      "release-assets.githubusercontent.com",
                      "github-cloud.githubusercontent.com"});
    return common::fail(
        common::ErrorKind::invalid_input,
        "--allow-egress '" + sandbox::printable(name) +
            "': unknown preset (expected @npm, @pypi, @crates, @go, @debian or @github)");
}

}  // namespace agent
