#pragma once
// Where the action store gets actions it lacks: a git source, fetched with libgit2 into the
// store's own bare mirror (WORK/mirrors/OWNER_REPO.git, never a place a step can write),
// always anonymously (no gate or pull-request credential is ever offered for an action).
//
//   https://github.com (the default) or any http(s) base: BASE/OWNER/REPO
//   a directory or file:// URL:  BASE/OWNER/REPO.git when it exists, else BASE/OWNER/REPO
//   "none": no source (offline; only what the store holds resolves)
//
// A ref resolves as a tag (peeled to its commit), then a branch, then a full commit SHA.

#include <optional>
#include <string>
#include <string_view>

#include "common/error.hpp"
#include "jobs/actions/action_ref.hpp"
#include "jobs/actions/action_store.hpp"

namespace jobs {

inline constexpr std::string_view k_default_action_source = "https://github.com";

class ActionSource {
public:
    // invalid_input for anything but the forms above (ssh, a password in the URL, ...).
    static common::Expected<ActionSource> parse(std::string_view text);

    bool configured() const { return !m_base.empty(); }
    const std::string& describe() const { return m_text; }  // as given; "none" when not configured

    // The repository URL or path `ref` is fetched from.
    std::string repository_url(const ActionRef& ref) const;

    // Fetches ref's repository into the store's mirror (under its lock), resolves ref.ref to
    // a commit, and writes that commit's archive into the store when it is not there. Returns
    // the full SHA. unavailable when the source cannot be reached or lacks the repository;
    // invalid_input when the repository has no such ref.
    common::Expected<std::string> fetch(const ActionRef& ref, const ActionStore& store) const;

private:
    std::string m_text;
    std::string m_base;  // empty: none
    bool m_local = false;
};

}  // namespace jobs
