#pragma once
// The container arm of the wrap: `--sandbox container --image IMAGE` through podman or docker.
//
//   RUNTIME run --rm -i --read-only --network none --cap-drop ALL
//           --security-opt no-new-privileges --name sandgate-<unique> --pids-limit N
//           [--memory BYTES] --tmpfs /tmp:rw,nosuid,nodev,size=N,mode=1777
//           -v CWD:CWD:rw -v SCRATCH:SCRATCH:rw [-v RO:RO:ro] [-v RW:RW:rw] -w CWD
//           -e NAME ... IMAGE ARGV...
//
// The environment is passed by name only (`-e NAME`): the runtime client itself is started with
// exactly the sanitized environment and copies each value from it, so values never appear in
// the host's process list. Nothing from HOME is mounted. After a timeout the named container is
// force-removed (`RUNTIME rm -f NAME`, plan.on_timeout_argv) besides killing the client.

#include <filesystem>
#include <optional>

#include "sandbox/wrap/wrap.hpp"

namespace sandbox {

// The runtime: policy.container_runtime when set (must be executable), else podman, else
// docker on PATH; unavailable otherwise.
Expected<std::filesystem::path> find_container_runtime(const Policy& policy);

Expected<WrapPlan> plan_container(const RunRequest& request);

}  // namespace sandbox
