#pragma once
// Remote identities for the mirror cache. A remote is a local path, a file:// URL, or an
// http(s):// URL. Credentials never live in a URL: a password in the userinfo is refused (the
// token goes through the credential callback), a bare user name is kept apart. Every string in
// RemoteUrl is safe to log.

#include <string>
#include <string_view>

#include "common/error.hpp"

namespace jobs {

enum class RemoteKind { local, https, http };

struct RemoteUrl {
    RemoteKind kind = RemoteKind::local;
    std::string fetch_url;  // what libgit2 is given: an absolute path, or the URL without userinfo
    std::string username;   // from `https://user@host/...`; empty when absent
    std::string host;       // lowercase host[:port] of an http(s) remote; empty for local
    std::string key;        // normalised identity: one mirror per key
};

// Parses `text` (a path, relative to the current directory, file://PATH, http(s)://...).
// invalid_input for ssh and scp-like remotes, other schemes, a password in the URL (the
// message shows the URL redacted), an empty string.
common::Expected<RemoteUrl> parse_remote(std::string_view text);

// The mirror directory name for a remote: "<name>-<16 hex of SHA-256(key)>", where name is
// the sanitised last path component ([A-Za-z0-9._-], at most 40 characters). Never contains
// a credential, because the key never does.
std::string mirror_dir_name(const RemoteUrl& remote);

// `text` with any userinfo replaced by "***", for error messages about unparsable input.
std::string redact_url(std::string_view text);

}  // namespace jobs
