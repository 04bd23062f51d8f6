#include "jobs/git/changed_paths.hpp"

#include <git2.h>

#include <algorithm>
#include <optional>

#include "jobs/git/git_handles.hpp"

namespace jobs {
namespace {

using common::ErrorKind;

// GitHub: "If you push more than 1,000 commits ... the workflow will always run."
constexpr std::size_t k_max_push_commits = 1000;

bool all_zeros(std::string_view sha) {
    return !sha.empty() && sha.find_first_not_of('0') == std::string_view::npos;
}

std::string text_at(const Value* value, std::string_view key) {
    const Value* field = value != nullptr ? value->get(key) : nullptr;
    return field != nullptr && field->is_string() ? field->as_string() : std::string();
}

common::Expected<GitRepository> open_repository(const std::filesystem::path& path) {
    ensure_libgit2();
    git_repository* raw = nullptr;
    // Flags 0: a work tree's subdirectory finds its repository, as git does.
    if (const int rc = git_repository_open_ext(&raw, path.c_str(), 0, nullptr); rc != 0)
        return git_fail(ErrorKind::unavailable, "open the repository " + path.string(), rc);
    return GitRepository(raw);
}

common::Expected<GitCommit> lookup_commit(git_repository* repository, const git_oid& oid) {
    git_commit* raw = nullptr;
    const int rc = git_commit_lookup(&raw, repository, &oid);
    if (rc == GIT_ENOTFOUND)
        return common::fail(ErrorKind::unavailable,
                            "commit " + oid_hex(oid) + " is not in the repository");
    if (rc != 0) return git_fail(ErrorKind::permanent, "read commit " + oid_hex(oid), rc);
    return GitCommit(raw);
}

common::Expected<GitTree> commit_tree(git_commit* commit) {
    git_tree* raw = nullptr;
    if (const int rc = git_commit_tree(&raw, commit); rc != 0)
        return git_fail(ErrorKind::unavailable,
                        "read the tree of " + oid_hex(*git_commit_id(commit)), rc);
    return GitTree(raw);
}

// The paths of one diff entry: a rename both, a deletion its old path, the rest their new one.
void add_delta_paths(const git_diff_delta& delta, std::vector<std::string>& out) {
    if (delta.status == GIT_DELTA_RENAMED) {
        out.emplace_back(delta.old_file.path);
        out.emplace_back(delta.new_file.path);
    } else if (delta.status == GIT_DELTA_DELETED) {
        out.emplace_back(delta.old_file.path);
    } else {
        out.emplace_back(delta.new_file.path);
    }
}

// `from` null: every file of `to` is added.
common::Expected<ChangedFiles> diff_oids(git_repository* repository, const git_oid* from,
                                         const git_oid& to) {
    auto to_commit = SANDGATE_TRY(lookup_commit(repository, to));
    auto to_tree = SANDGATE_TRY(commit_tree(to_commit.get()));
    GitTree from_tree;
    if (from != nullptr) {
        auto from_commit = SANDGATE_TRY(lookup_commit(repository, *from));
        auto tree = SANDGATE_TRY(commit_tree(from_commit.get()));
        from_tree = std::move(tree);
    }
    git_diff_options options = GIT_DIFF_OPTIONS_INIT;
    git_diff* raw = nullptr;
    if (const int rc =
            git_diff_tree_to_tree(&raw, repository, from_tree.get(), to_tree.get(), &options);
        rc != 0)
        return git_fail(ErrorKind::permanent, "diff " + oid_hex(to), rc);
    GitDiff diff(raw);
    git_diff_find_options find = GIT_DIFF_FIND_OPTIONS_INIT;
    find.flags = GIT_DIFF_FIND_RENAMES;
    if (const int rc = git_diff_find_similar(diff.get(), &find); rc != 0)
        return git_fail(ErrorKind::permanent, "find renames up to " + oid_hex(to), rc);
    ChangedFiles changed;
    changed.files = git_diff_num_deltas(diff.get());
    const std::size_t kept = std::min(changed.files, k_paths_diff_limit);
    for (std::size_t i = 0; i < kept; ++i)
        add_delta_paths(*git_diff_get_delta(diff.get(), i), changed.paths);
    return changed;
}

// The merge base of `a` and `b`; nullopt when they share no history.
common::Expected<std::optional<git_oid>> merge_base(git_repository* repository, const git_oid& a,
                                                    const git_oid& b) {
    git_oid base;
    const int rc = git_merge_base(&base, repository, &a, &b);
    if (rc == GIT_ENOTFOUND) return std::optional<git_oid>();
    if (rc != 0)
        return git_fail(ErrorKind::permanent, "merge base of " + oid_hex(a) + " and " + oid_hex(b),
                        rc);
    return std::optional<git_oid>(base);
}

// The tip of `branch` ("main" or "refs/heads/main"): the branch itself (a mirror), else its
// remote-tracking branch (a clone); nullopt when neither exists.
std::optional<git_oid> branch_tip(git_repository* repository, std::string_view branch) {
    if (branch.starts_with("refs/heads/")) branch.remove_prefix(11);
    if (branch.empty()) return std::nullopt;
    for (const std::string prefix : {"refs/heads/", "refs/remotes/origin/"}) {
        git_oid oid;
        if (git_reference_name_to_id(&oid, repository, (prefix + std::string(branch)).c_str()) == 0)
            return oid;
    }
    return std::nullopt;
}

// The tip of the default branch, when one can be found (see the header).
std::optional<git_oid> default_branch_tip(git_repository* repository, const Value& payload) {
    const Value* repo = payload.get("repository");
    std::string name = text_at(repo, "default_branch");
    if (name.empty()) name = text_at(repo, "master_branch");
    if (auto tip = branch_tip(repository, name)) return tip;
    std::vector<std::string> candidates{"refs/remotes/origin/HEAD"};
    if (git_repository_is_bare(repository)) candidates.emplace_back("HEAD");
    for (const auto& ref : candidates) {
        git_oid oid;
        if (git_reference_name_to_id(&oid, repository, ref.c_str()) == 0) return oid;
    }
    return std::nullopt;
}

// GitHub does not diff a push of more than 1,000 commits: counts before..after up to that.
common::Expected<std::size_t> count_commits(git_repository* repository, const git_oid& before,
                                            const git_oid& after) {
    git_revwalk* raw = nullptr;
    if (const int rc = git_revwalk_new(&raw, repository); rc != 0)
        return git_fail(ErrorKind::permanent, "revwalk", rc);
    GitRevwalk walk(raw);
    if (const int rc = git_revwalk_push(walk.get(), &after); rc != 0)
        return git_fail(ErrorKind::unavailable, "walk from " + oid_hex(after), rc);
    if (const int rc = git_revwalk_hide(walk.get(), &before); rc != 0)
        return git_fail(ErrorKind::unavailable, "walk to " + oid_hex(before), rc);
    std::size_t count = 0;
    git_oid oid;
    while (count <= k_max_push_commits && git_revwalk_next(&oid, walk.get()) == 0) ++count;
    return count;
}

// `base` is a commit of the repository (pull_request_base looked it up).
common::Expected<ChangedFiles> pull_request_files(git_repository* repository, const git_oid& base,
                                                  const git_oid& head) {
    (void)SANDGATE_TRY(lookup_commit(repository, head));
    auto fork_point = SANDGATE_TRY(merge_base(repository, base, head));
    return diff_oids(repository, fork_point ? &*fork_point : &base, head);
}

common::Expected<ChangedFiles> push_files(git_repository* repository, const Value& payload,
                                          std::string_view before, const git_oid& after) {
    if (!all_zeros(before)) {
        auto from = SANDGATE_TRY(parse_sha(before));
        for (const git_oid* oid : {static_cast<const git_oid*>(&from), &after})
            (void)SANDGATE_TRY(lookup_commit(repository, *oid));
        auto commits = SANDGATE_TRY(count_commits(repository, from, after));
        if (commits > k_max_push_commits)
            return common::fail(ErrorKind::unavailable,
                                "more than 1000 commits pushed: GitHub does not diff them "
                                "and runs the workflow");
        return diff_oids(repository, &from, after);
    }
    // A new branch: from its merge base with the default branch, else every file.
    (void)SANDGATE_TRY(lookup_commit(repository, after));
    std::optional<git_oid> fork_point;
    if (const auto tip = default_branch_tip(repository, payload)) {
        auto base = SANDGATE_TRY(merge_base(repository, *tip, after));
        fork_point = base;
    }
    return diff_oids(repository, fork_point ? &*fork_point : nullptr, after);
}

// The commit a pull request is diffed from: base.sha when the repository has it, else the tip
// of base.ref (a base SHA not given, or gone from the remote after a force-push). Either way a
// commit the repository holds: the error otherwise.
common::Expected<git_oid> pull_request_base(git_repository* repository, const std::string& sha,
                                            const std::string& branch) {
    if (!sha.empty()) {
        auto base = SANDGATE_TRY(parse_sha(sha));
        auto commit = lookup_commit(repository, base);
        if (commit) return base;
        if (commit.error().kind != ErrorKind::unavailable || branch.empty())
            return std::unexpected(commit.error());
    }
    if (auto tip = branch_tip(repository, branch)) {
        (void)SANDGATE_TRY(lookup_commit(repository, *tip));
        return *tip;
    }
    const std::string missing =
        sha.empty() ? "no base SHA" : "commit " + sha + " is not in the repository";
    return common::fail(ErrorKind::unavailable, missing + ", nor the base branch '" + branch + "'");
}

common::Expected<ChangedFiles> compute(const std::filesystem::path& path,
                                       std::string_view event_name, const Value& payload,
                                       const std::string& from, const std::string& to) {
    const bool pull = event_name.starts_with("pull_request");
    const Value* pull_request = payload.get("pull_request");
    const std::string base_ref =
        pull ? text_at(pull_request != nullptr ? pull_request->get("base") : nullptr, "ref") : "";
    if (to.empty() || (from.empty() && base_ref.empty()))
        return common::fail(ErrorKind::invalid_input,
                            pull ? "the payload has no pull_request.base.sha (nor base.ref) and "
                                   "pull_request.head.sha"
                                 : "the payload has no 'before' and 'after' SHAs");
    if (event_name == "push" && all_zeros(to)) return ChangedFiles{};  // a deleted branch
    auto head = SANDGATE_TRY(parse_sha(to));
    auto repository = SANDGATE_TRY(open_repository(path));
    if (event_name == "push") return push_files(repository.get(), payload, from, head);
    auto base = SANDGATE_TRY(pull_request_base(repository.get(), from, base_ref));
    return pull_request_files(repository.get(), base, head);
}

}  // namespace

common::Expected<ChangedFiles> diff_commits(const std::filesystem::path& repository,
                                            std::string_view from, std::string_view to) {
    auto head = SANDGATE_TRY(parse_sha(to));
    std::optional<git_oid> base;
    if (!from.empty()) {
        auto parsed = SANDGATE_TRY(parse_sha(from));
        base = parsed;
    }
    auto repo = SANDGATE_TRY(open_repository(repository));
    return diff_oids(repo.get(), base ? &*base : nullptr, head);
}

common::Expected<ChangedFiles> event_changed_files(const std::filesystem::path& repository,
                                                   std::string_view event_name,
                                                   const Value& payload) {
    std::string from;
    std::string to;
    if (event_name == "pull_request" || event_name == "pull_request_target") {
        const Value* pull = payload.get("pull_request");
        from = text_at(pull != nullptr ? pull->get("base") : nullptr, "sha");
        to = text_at(pull != nullptr ? pull->get("head") : nullptr, "sha");
    } else if (event_name == "push") {
        from = text_at(&payload, "before");
        to = text_at(&payload, "after");
    } else {
        return common::fail(ErrorKind::invalid_input,
                            std::string(event_name) + " has no paths filters");
    }
    auto changed = compute(repository, event_name, payload, from, to);
    if (!changed) {
        const std::string range = (from.empty() ? "?" : from) + ".." + (to.empty() ? "?" : to);
        return common::fail(changed.error().kind,
                            std::string(event_name) + " " + range + ": " + changed.error().message);
    }
    return changed;
}

EventSelection select_for_event(std::vector<Workflow> workflows, std::string_view event_name,
                                const Value& payload, const std::filesystem::path& repository) {
    EventSelection selection;
    const Value* ref = payload.get("ref");
    const bool tag_push =
        ref != nullptr && ref->is_string() && ref->as_string().starts_with("refs/tags/");
    std::optional<common::Expected<ChangedFiles>> changed;  // computed on first need
    for (auto& workflow : workflows) {
        if (!event_matches(workflow, event_name, payload)) continue;
        if (has_paths_filter(workflow, event_name) && !tag_push) {
            if (!changed) changed = event_changed_files(repository, event_name, payload);
            if (!*changed) {
                selection.warnings.push_back(
                    workflow.file + ": the paths filter of '" + std::string(event_name) +
                    "' is not applied, the workflow runs: " + changed->error().message);
            } else if (!event_matches(workflow, event_name, payload, &**changed)) {
                continue;
            }
        }
        selection.workflows.push_back(std::move(workflow));
    }
    return selection;
}

}  // namespace jobs
