#pragma once
// One libgit2 fetch into a mirror. The remote is anonymous (nothing is written to the
// mirror's config), and a token reaches libgit2 only through the credential callback: never
// a URL, a config entry, a file or a log line. The token is offered only when the remote
// designates the gated repository (jobs/git/git_credentials.hpp): any other remote, such as a
// submodule a pull request names, is fetched anonymously. The callback answers only once (a
// rejected token fails the fetch instead of looping), and redirects to another host are not
// followed at all: libgit2 hands the callback the remote's original URL even after a
// redirect, so the callback alone could not tell where the token would go.

#include <git2.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "common/token_provider.hpp"
#include "jobs/git/git_credentials.hpp"
#include "jobs/git/git_url.hpp"

namespace jobs {

// A credential for http(s) remotes, held in memory only: a fixed token (SANDGATE_GIT_TOKEN,
// never refreshed) or a provider asked at each fetch that offers it (an installation token,
// minted again before it expires: common/token_provider.hpp). Copies share the provider.
class GitToken {
public:
    GitToken(std::string secret);  // a fixed token NOLINT(google-explicit-constructor)
    explicit GitToken(std::shared_ptr<common::TokenProvider> provider);

    // The token to offer now; the provider's error (its kind kept) when none can be had.
    common::Expected<std::string> secret() const;
    // The remote refused `secret`: whether asking again gives another one.
    common::Renewal refused(std::string_view secret) const;

    std::string username = "x-access-token";  // GitHub's convention for app/installation tokens

private:
    std::shared_ptr<common::TokenProvider> m_provider;
};

// The refspecs a mirror follows: branches (gh-readonly-queue/* included), tags and
// refs/pull/*/head, plus `ref` (a full ref, or a branch name, or pull/N/head) when given.
std::vector<std::string> mirror_refspecs(const std::string& ref);

// Fetches `refspecs` from `remote` into `repository`, offering `token` only when
// token_decision(gated, remote) says send; the token is asked for once per fetch, and when the
// remote refuses it and the provider renews it (an installation token expired early), the new
// one is offered once more. ErrorKind::unavailable when the remote cannot be reached, refuses
// the credentials or the path does not exist; the provider's own error (kind kept, e.g.
// transient for GitHub's 5xx) when no token can be had, before anything is sent. The message
// names the remote (its safe URL) and never the token, and says so when a token was withheld.
common::Expected<void> fetch_refspecs(git_repository* repository, const RemoteUrl& remote,
                                      const std::vector<std::string>& refspecs,
                                      const std::optional<GitToken>& token, const RemoteUrl& gated);

// Trusts the CA certificates in `file` (PEM) for https remotes, in addition to none else:
// libgit2's setting is process-wide. For tests and for agents behind a private CA.
common::Expected<void> set_tls_ca_file(const std::string& file);

}  // namespace jobs
