#pragma once
// A remote action reference, `uses: OWNER/REPO[/PATH]@REF`, as the runner splits it, and the
// lock of what a run resolved each one to. Parsing is strict: OWNER and REPO are GitHub names
// ([A-Za-z0-9._-], not `.` or `..`), PATH is relative with no `.`/`..`/empty segment, REF is
// non-empty with no whitespace, control character, `..` or leading `-`/`/`. Local (`./x`),
// `docker://` and expressions are not remote references.

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"

namespace jobs {

struct ActionRef {
    std::string owner;
    std::string repo;
    std::string path;  // inside the repository; empty: its root
    std::string ref;   // tag, branch or full SHA, as written

    std::string repository() const { return owner + "/" + repo; }  // OWNER/REPO
    std::string uses() const;                                      // OWNER/REPO[/PATH]@REF
    // The archive layout's directory name: OWNER_REPO (the official runner's).
    std::string archive_name() const { return owner + "_" + repo; }
};

// Whether `uses` is a remote action reference (not `./`, not `docker://`, has `@`).
bool is_remote_uses(std::string_view uses);

// Parses OWNER/REPO[/PATH]@REF; invalid_input naming what is wrong otherwise.
common::Expected<ActionRef> parse_action_ref(std::string_view uses);

// A full 40-hex (lowercase) commit SHA.
bool is_full_sha(std::string_view text);

// One remote `uses:` of a run and what it was resolved to before any job started.
struct LockedAction {
    std::string uses;  // as written in the workflow or composite action
    ActionRef ref;
    std::string sha;                  // the commit the ref resolved to (empty on error)
    std::filesystem::path tree;       // the unpacked read-only tree (the repository's root)
    std::filesystem::path directory;  // tree / ref.path: GITHUB_ACTION_PATH
    // Why it cannot run (one line, naming the action and how to fill the cache); empty when
    // resolved.
    std::string error;
};

// Every remote `uses:` a run reaches, in the order first met. Immutable while jobs run.
struct ActionLock {
    std::vector<LockedAction> entries;
    std::filesystem::path trees_root;  // bound read-only into each step's sandbox when non-empty

    const LockedAction* find(std::string_view uses) const;
};

}  // namespace jobs
