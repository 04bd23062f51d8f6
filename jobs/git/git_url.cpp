#include "jobs/git/git_url.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <filesystem>

#include "common/sha256.hpp"

namespace jobs {
namespace {

using common::ErrorKind;

std::string lower(std::string_view text) {
    std::string out(text);
    std::ranges::transform(out, out.begin(),
                           [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
}

bool starts_with_ci(std::string_view text, std::string_view prefix) {
    return text.size() >= prefix.size() && lower(text.substr(0, prefix.size())) == prefix;
}

// An scp-like "user@host:path" or "host:path" (a colon before any slash).
bool looks_scp_like(std::string_view text) {
    const auto colon = text.find(':');
    const auto slash = text.find('/');
    return colon != std::string_view::npos && colon > 0 &&
           (slash == std::string_view::npos || colon < slash);
}

common::Expected<RemoteUrl> parse_local(std::string_view text) {
    std::error_code ec;
    std::filesystem::path path = std::filesystem::absolute(std::filesystem::path(text), ec);
    if (ec)
        return common::fail(ErrorKind::invalid_input,
                            "bad remote path '" + std::string(text) + "'");
    path = std::filesystem::weakly_canonical(path, ec);
    if (ec)
        return common::fail(ErrorKind::invalid_input,
                            "bad remote path '" + std::string(text) + "'");
    std::string normal = path.string();
    while (normal.size() > 1 && normal.back() == '/') normal.pop_back();
    RemoteUrl remote;
    remote.kind = RemoteKind::local;
    remote.fetch_url = normal;
    remote.key = "file://" + normal;
    return remote;
}

common::Expected<RemoteUrl> parse_http(std::string_view text, RemoteKind kind) {
    const std::size_t scheme_end = text.find("://") + 3;
    const std::string_view rest = text.substr(scheme_end);
    const std::size_t path_start = std::min(rest.find('/'), rest.size());
    std::string_view authority = rest.substr(0, path_start);
    const std::string_view path = rest.substr(path_start);
    RemoteUrl remote;
    remote.kind = kind;
    if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
        const std::string_view userinfo = authority.substr(0, at);
        if (userinfo.find(':') != std::string_view::npos)
            return common::fail(ErrorKind::invalid_input,
                                "remote '" + redact_url(text) +
                                    "' carries a password; credentials in URLs are refused "
                                    "(pass the token through SANDGATE_GIT_TOKEN)");
        remote.username = std::string(userinfo);
        authority = authority.substr(at + 1);
    }
    if (authority.empty())
        return common::fail(ErrorKind::invalid_input,
                            "remote '" + redact_url(text) + "' has no host");
    remote.host = lower(authority);
    const std::string scheme = kind == RemoteKind::https ? "https://" : "http://";
    remote.fetch_url = scheme + remote.host + std::string(path);
    std::string key_path(path);
    while (!key_path.empty() && key_path.back() == '/') key_path.pop_back();
    if (key_path.ends_with(".git")) key_path.resize(key_path.size() - 4);
    remote.key = scheme + remote.host + key_path;
    return remote;
}

}  // namespace

common::Expected<RemoteUrl> parse_remote(std::string_view text) {
    if (text.empty()) return common::fail(ErrorKind::invalid_input, "the remote is empty");
    if (starts_with_ci(text, "https://")) return parse_http(text, RemoteKind::https);
    if (starts_with_ci(text, "http://")) return parse_http(text, RemoteKind::http);
    if (starts_with_ci(text, "file://")) {
        const std::string_view path = text.substr(7);
        if (!path.starts_with('/'))
            return common::fail(ErrorKind::invalid_input, "remote '" + std::string(text) +
                                                              "' is not an absolute file:// URL");
        return parse_local(path);
    }
    if (text.find("://") != std::string_view::npos ||
        (!text.starts_with('/') && !text.starts_with('.') && looks_scp_like(text)))
        return common::fail(ErrorKind::invalid_input,
                            "remote '" + redact_url(text) +
                                "' is not supported: use https://, file:// or a local path");
    return parse_local(text);
}

std::string mirror_dir_name(const RemoteUrl& remote) {
    std::string_view last = remote.key;
    while (last.ends_with('/')) last.remove_suffix(1);
    last = last.substr(last.rfind('/') + 1);
    if (last.ends_with(".git")) last.remove_suffix(4);
    std::string name;
    for (const char c : last) {
        if (name.size() >= 40) break;
        const bool safe =
            std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
        name += safe ? c : '_';
    }
    while (!name.empty() && name.front() == '.') name.erase(0, 1);  // no hidden or ".." names
    if (name.empty()) name = "repo";
    return name + "-" + common::sha256_hex(remote.key).substr(0, 16);
}

std::string redact_url(std::string_view text) {
    const auto scheme = text.find("://");
    if (scheme == std::string_view::npos) return std::string(text);
    const std::string_view rest = text.substr(scheme + 3);
    const auto at = rest.substr(0, rest.find('/')).rfind('@');
    if (at == std::string_view::npos) return std::string(text);
    return std::string(text.substr(0, scheme + 3)) + "***@" + std::string(rest.substr(at + 1));
}

}  // namespace jobs
