#include "jobs/git/git_fetch.hpp"

#include <filesystem>

#include "jobs/git/git_handles.hpp"

namespace jobs {
namespace {

using common::ErrorKind;

struct CredentialState {
    const RemoteUrl* remote = nullptr;
    const RemoteUrl* gated = nullptr;
    const GitToken* token = nullptr;  // null: anonymous
    std::string secret;               // what was (or will be) offered
    int calls = 0;
    std::optional<common::Error> minting;  // a renewal that failed
};

// The second call means the remote refused what the first offered: ask the provider for a new
// token once (an installation token that expired early); a fixed token fails the fetch there.
int renew_after_refusal(CredentialState& state) {
    const bool renewable =
        state.calls == 2 && state.token->refused(state.secret) == common::Renewal::minted;
    if (!renewable) {
        git_error_set_str(GIT_ERROR_NET, "authentication failed: the remote refused the token");
        return GIT_EUSER;
    }
    auto fresh = state.token->secret();
    if (!fresh) {
        state.minting = fresh.error();
        git_error_set_str(GIT_ERROR_NET, "authentication failed and no new token could be had");
        return GIT_EUSER;
    }
    state.secret = std::move(*fresh);
    return 0;
}

// `url` is the remote's own URL (libgit2 passes it even after a redirect); checked again here
// so that no path to the token bypasses the decision.
int credential_callback(git_credential** out, const char* url, const char*,
                        unsigned int allowed_types, void* payload) {
    auto* state = static_cast<CredentialState*>(payload);
    if (state->token == nullptr) return GIT_PASSTHROUGH;  // anonymous: libgit2 reports the 401
    if ((allowed_types & GIT_CREDENTIAL_USERPASS_PLAINTEXT) == 0) return GIT_PASSTHROUGH;
    if (url == nullptr || token_decision(*state->gated, url) != TokenDecision::send)
        return GIT_PASSTHROUGH;
    if (++state->calls > 1)
        if (int rc = renew_after_refusal(*state); rc != 0) return rc;
    const std::string& user =
        state->remote->username.empty() ? state->token->username : state->remote->username;
    return git_credential_userpass_plaintext_new(out, user.c_str(), state->secret.c_str());
}

std::string full_ref(const std::string& ref) {
    if (ref.starts_with("refs/")) return ref;
    if (ref.starts_with("pull/")) return "refs/" + ref;
    return "refs/heads/" + ref;
}

// Points the repository's HEAD at the remote's default branch, as `git clone --mirror` does
// (paths filters diff a new branch from its merge base with it: jobs/git/changed_paths.hpp). The
// remote's HEAD stays known after git_remote_fetch disconnects. Best effort: a remote without
// one (empty, detached) leaves HEAD as it was.
void adopt_remote_head(git_repository* repository, git_remote* remote) {
    GitBuf branch;
    if (git_remote_default_branch(branch.get(), remote) != 0 ||
        !branch.view().starts_with("refs/heads/"))
        return;
    const std::string target(branch.view());
    git_reference* raw = nullptr;
    const int rc = git_reference_symbolic_create(&raw, repository, "HEAD", target.c_str(), 1,
                                                 "sandgate: the remote's HEAD");
    const GitReference owned(rc == 0 ? raw : nullptr);
}

}  // namespace

GitToken::GitToken(std::string secret)
    : m_provider(std::make_shared<common::FixedToken>(std::move(secret))) {}

GitToken::GitToken(std::shared_ptr<common::TokenProvider> provider)
    : m_provider(std::move(provider)) {}

common::Expected<std::string> GitToken::secret() const {
    if (!m_provider) return common::fail(ErrorKind::invalid_input, "no git token provider");
    return m_provider->token();
}

common::Renewal GitToken::refused(std::string_view secret) const {
    return m_provider ? m_provider->refused(secret) : common::Renewal::none;
}

std::vector<std::string> mirror_refspecs(const std::string& ref) {
    std::vector<std::string> specs = {"+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*",
                                      "+refs/pull/*/head:refs/pull/*/head"};
    if (!ref.empty()) {
        const std::string full = full_ref(ref);
        const bool covered = full.starts_with("refs/heads/") || full.starts_with("refs/tags/") ||
                             (full.starts_with("refs/pull/") && full.ends_with("/head"));
        if (!covered) specs.push_back("+" + full + ":" + full);
    }
    return specs;
}

common::Expected<void> fetch_refspecs(git_repository* repository, const RemoteUrl& remote,
                                      const std::vector<std::string>& refspecs,
                                      const std::optional<GitToken>& token,
                                      const RemoteUrl& gated) {
    ensure_libgit2();
    if (remote.kind == RemoteKind::local && !std::filesystem::exists(remote.fetch_url))
        return common::fail(ErrorKind::unavailable,
                            "remote " + remote.fetch_url + " is unreachable: no such path");
    git_remote* raw = nullptr;
    if (int rc = git_remote_create_anonymous(&raw, repository, remote.fetch_url.c_str()); rc != 0)
        return git_fail(ErrorKind::unavailable, "remote " + remote.fetch_url, rc);
    GitRemote handle(raw);
    const bool offered = token && token_decision(gated, remote) == TokenDecision::send;
    CredentialState state{&remote, &gated, offered ? &*token : nullptr, "", 0, std::nullopt};
    if (offered) {
        auto secret = token->secret();
        if (!secret)
            return common::fail(secret.error().kind, "cannot fetch from " + remote.fetch_url +
                                                         ": git token: " + secret.error().message);
        state.secret = std::move(*secret);
    }
    git_fetch_options options = GIT_FETCH_OPTIONS_INIT;
    options.callbacks.credentials = credential_callback;
    options.callbacks.payload = &state;
    options.prune = GIT_FETCH_PRUNE;
    options.update_fetchhead = 0;
    options.download_tags = GIT_REMOTE_DOWNLOAD_TAGS_NONE;
    // Same-host redirects only, at every stage (GitHub's renamed repositories still work).
    options.follow_redirects = GIT_REMOTE_REDIRECT_NONE;
    std::vector<char*> specs;
    for (const auto& spec : refspecs) specs.push_back(const_cast<char*>(spec.c_str()));
    const git_strarray array{specs.data(), specs.size()};
    if (int rc = git_remote_fetch(handle.get(), &array, &options, nullptr); rc != 0) {
        if (state.minting)
            return common::fail(
                state.minting->kind,
                "cannot fetch from " + remote.fetch_url +
                    ": the remote refused the git token and no new one could be had: " +
                    state.minting->message);
        return common::fail(ErrorKind::unavailable,
                            git_error_text("cannot fetch from " + remote.fetch_url, rc) +
                                (token && !offered ? withheld_note(gated) : ""));
    }
    adopt_remote_head(repository, handle.get());
    return {};
}

common::Expected<void> set_tls_ca_file(const std::string& file) {
    ensure_libgit2();
    if (int rc = git_libgit2_opts(GIT_OPT_SET_SSL_CERT_LOCATIONS, file.c_str(), nullptr); rc != 0)
        return git_fail(ErrorKind::invalid_input, "CA file " + file, rc);
    return {};
}

}  // namespace jobs
