#pragma once
// Pieces of the bwrap arm's plan (internal to wrap_bwrap.cpp): the run's scratch, what the
// plan owns for the run, the policy's mounts on top of the system layout, and the layout
// turned into bwrap options.

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sandbox/process/limits.hpp"
#include "sandbox/process/run.hpp"
#include "sandbox/wrap/mounts.hpp"
#include "sandbox/wrap/wrap.hpp"

namespace sandbox {

// Where the run's scratch (HOME, TMPDIR, XDG_*, toolchain homes) lives:
// - kept: `--scratch DIR`, on the host, bound, left in place;
// - host: a per-run temp root on the host, bound and removed afterwards (only with
//   --toolchain-cache, whose seeding copies from the cache on the host side);
// - in_wrap: directories in the wrap's private size-limited /tmp tmpfs, made by bwrap itself:
//   nothing to create on the host, and gone with the mount namespace (no removal pass).
enum class ScratchPlace { kept, host, in_wrap };

struct Scratch {
    std::filesystem::path root;
    ScratchPlace place = ScratchPlace::in_wrap;
};

// Decides the scratch; creates the directory of a kept or host one (not its contents).
Expected<Scratch> make_scratch(const Policy& policy);

// Removes the per-run scratch root after the run (links are removed, never followed), and
// whatever the limits created.
class BwrapResources : public WrapResources {
public:
    std::optional<std::filesystem::path> owned_scratch;
    std::unique_ptr<LimitResources> limits;
    ~BwrapResources() override;
};

// The policy's own binds and masks (working directory, scratch, --read-only, --writable,
// binds, the toolchain cache, the tool cache, the agent's private files, --hide), appended to
// `entries`. invalid_input names the flag of a path that is refused.
Expected<void> add_policy_mounts(const RunRequest& request, const std::filesystem::path& cwd,
                                 const Scratch& scratch, std::vector<MountEntry>& entries);

// Where the portal of a run under a host identity of its own is mounted (SpawnSpec::portal):
// /tmp/.sandgate-portal, made once (root's, mode 0755). Only a mount point: each run mounts a
// tmpfs of its own over it in a mount namespace of its own. unavailable when the path is
// something else than root's own directory (another user planted it: sandgate will not mount
// over it).
Expected<std::string> portal_directory();

// Gives each writable tree of the run (its working directory, --writable, the scratch) to the
// sandbox's host identity (SafeDir::chown_tree: links themselves, never their targets), except
// the agent's private paths masked inside them.
struct BwrapStartTrees {
    const std::vector<std::filesystem::path>& writable;
    const std::vector<MountEntry>& masks;
    const Owner& owner;
};
Expected<void> give_trees(const BwrapStartTrees& trees);

// The ordered layout as bwrap options, appended to `args`. A file entry (data, host_file,
// private_file) names the fd its contents come from (MountEntry::fd); one without is left out.
void mount_options(const std::vector<MountEntry>& entries, std::vector<std::string>& args);

}  // namespace sandbox
