#include "jobs/git/git_handles.hpp"

#include <mutex>

namespace jobs {

void ensure_libgit2() {
    static std::once_flag once;
    std::call_once(once, [] {
        git_libgit2_init();
        // The repositories opened here are sandgate's own (its mirrors, the worktrees it leases
        // and gives to the sandbox's host identity, a `-C` directory it was pointed at): the
        // owner check would refuse the worktrees after their first step, and protects nothing
        // the trusted side relies on (libgit2 runs no hooks or fsmonitor).
        git_libgit2_opts(GIT_OPT_SET_OWNER_VALIDATION, 0);
    });
}

std::string git_error_text(std::string_view what, int code) {
    std::string text(what);
    text += ": ";
    if (const git_error* error = git_error_last(); error != nullptr && error->message != nullptr)
        text += error->message;
    else
        text += "libgit2 error " + std::to_string(code);
    return text;
}

std::unexpected<common::Error> git_fail(common::ErrorKind kind, std::string_view what, int code) {
    return common::fail(kind, git_error_text(what, code));
}

common::Expected<git_oid> parse_sha(std::string_view sha) {
    const bool hex = sha.size() == GIT_OID_HEXSZ &&
                     sha.find_first_not_of("0123456789abcdefABCDEF") == std::string_view::npos;
    if (!hex)
        return common::fail(
            common::ErrorKind::invalid_input,
            "'" + std::string(sha.substr(0, 64)) + "' is not a full 40-hex commit SHA");
    git_oid oid;
    if (git_oid_fromstrn(&oid, sha.data(), sha.size()) != 0)
        return common::fail(common::ErrorKind::invalid_input,
                            "'" + std::string(sha) + "' is not a commit SHA");
    return oid;
}

std::string oid_hex(const git_oid& oid) {
    char text[GIT_OID_HEXSZ + 1];
    git_oid_tostr(text, sizeof text, &oid);
    return text;
}

}  // namespace jobs
