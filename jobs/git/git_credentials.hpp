#pragma once
// Which remote may receive the gate's git token. A pull request controls its `.gitmodules`, so
// every URL the fetch layer is asked to reach is suspect: the token goes only to a URL that
// designates the gated repository itself, and every other URL (other repositories on the same
// host included) is fetched anonymously.
//
// Two URLs designate the same repository when they have the same scheme, the same host and
// port (a default port written out counts as absent), and the same path once a trailing `.git`
// and trailing slashes are dropped. Hosts compare case-insensitively; paths compare exactly,
// except on github.com, where owner and name are case-insensitive as GitHub treats them. The
// comparison is on the text as written, so anything the server might normalise differently
// (percent-escapes such as `%2e%2e`, `..` or `.` segments, doubled slashes, a query) makes the
// paths differ and the token is withheld: the decision fails closed. A user name in the URL
// does not change the repository it designates.

#include <string>
#include <string_view>

#include "jobs/git/git_url.hpp"

namespace jobs {

enum class TokenDecision { send, withhold };

// send only when both are http(s) remotes and `target` designates `gated` (see above).
TokenDecision token_decision(const RemoteUrl& gated, const RemoteUrl& target);

// As above for a URL as text (what libgit2's credential callback is given); a URL that does not
// parse (a password in it, another scheme, no host) is withheld.
TokenDecision token_decision(const RemoteUrl& gated, std::string_view target_url);

// The message appended to a fetch error when the token was withheld from `target`.
std::string withheld_note(const RemoteUrl& gated);

}  // namespace jobs
