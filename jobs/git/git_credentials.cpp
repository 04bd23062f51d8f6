#include "jobs/git/git_credentials.hpp"

#include <algorithm>
#include <cctype>

namespace jobs {
namespace {

struct Identity {
    RemoteKind kind = RemoteKind::local;
    std::string host;  // lowercase, without the port
    std::string port;  // empty for the scheme's default port
    std::string path;  // as written, trailing slashes and one trailing ".git" dropped
};

std::string lower(std::string_view text) {
    std::string out(text);
    std::ranges::transform(out, out.begin(),
                           [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
}

Identity identity_of(const RemoteUrl& remote) {
    Identity id;
    id.kind = remote.kind;
    if (remote.kind == RemoteKind::local) return id;
    // remote.host is "host", "host:port" or "[v6]:port"; a colon inside brackets is no port.
    const std::string& authority = remote.host;
    const auto bracket = authority.rfind(']');
    const auto colon = authority.rfind(':');
    const bool has_port =
        colon != std::string::npos && (bracket == std::string::npos || colon > bracket);
    id.host = lower(has_port ? authority.substr(0, colon) : authority);
    id.port = has_port ? authority.substr(colon + 1) : "";
    const std::string_view default_port = remote.kind == RemoteKind::https ? "443" : "80";
    if (id.port == default_port) id.port.clear();
    // fetch_url is scheme + remote.host + path, as parse_remote builds it.
    const auto scheme_end = remote.fetch_url.find("://");
    std::string path = scheme_end == std::string::npos
                           ? ""
                           : remote.fetch_url.substr(scheme_end + 3 + authority.size());
    while (!path.empty() && path.back() == '/') path.pop_back();
    if (path.ends_with(".git")) path.resize(path.size() - 4);
    id.path = std::move(path);
    return id;
}

}  // namespace

TokenDecision token_decision(const RemoteUrl& gated, const RemoteUrl& target) {
    const Identity want = identity_of(gated);
    const Identity got = identity_of(target);
    if (want.kind == RemoteKind::local || got.kind != want.kind) return TokenDecision::withhold;
    if (got.host.empty() || got.host != want.host || got.port != want.port)
        return TokenDecision::withhold;
    if (want.path.empty()) return TokenDecision::withhold;  // a bare host designates no repository
    // GitHub treats owner and repository names case-insensitively; other servers may not.
    const bool same_path =
        want.host == "github.com" ? lower(got.path) == lower(want.path) : got.path == want.path;
    return same_path ? TokenDecision::send : TokenDecision::withhold;
}

TokenDecision token_decision(const RemoteUrl& gated, std::string_view target_url) {
    auto target = parse_remote(target_url);
    if (!target) return TokenDecision::withhold;
    return token_decision(gated, *target);
}

std::string withheld_note(const RemoteUrl& gated) {
    return " (fetched without credentials: the git token is only sent to the gated repository " +
           gated.fetch_url + ")";
}

}  // namespace jobs
