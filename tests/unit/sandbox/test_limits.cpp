// Resource limits (sandbox/process/limits.cpp): what the plan decides, and how the wrap's plan
// carries the limits to the wrapper (rlimits, a v1 cgroup to join, or the run's cgroup2 leaf's
// files).
#include <sys/resource.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>

#include "sandbox/process/limits.hpp"
#include "sandbox/wrap/wrap.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"
#include "tests/support/wrap_spawn.hpp"

using tests::request_in;

TEST_CASE("limits: explicit values are planned and zero is refused") {
    sandbox::Policy policy;
    policy.tmp_size_bytes = 1 << 20;
    policy.pids = 64;
    policy.memory_bytes = 256ull << 20;
    auto limits = sandbox::plan_limits(policy);
    REQUIRE(limits);
    CHECK(limits->tmp_size == (1u << 20));
    CHECK(limits->pids == 64u);
    CHECK(limits->memory == (256ull << 20));
    CHECK(limits->memory_by != sandbox::LimitMechanism::none);
    policy.tmp_size_bytes = 0;
    auto zero = sandbox::plan_limits(policy);
    REQUIRE_FALSE(zero);
    CHECK(zero.error().kind == common::ErrorKind::invalid_input);
}

TEST_CASE("limits reach the wrapper through the process core: no launcher, the plan carries them") {
    SKIP_UNDER_WRAP("nested user namespaces are disabled inside the wrap, so no plan can be made");
    const auto dir = tests::make_temp_dir("wrap");
    auto request = request_in(dir, {"true"});
    request.policy.pids = 64;
    auto limits = sandbox::plan_limits(request.policy);
    if (!limits) {  // root without any pids cgroup: refused, and the plan fails closed the same way
        CHECK(limits.error().kind == common::ErrorKind::unavailable);
        CHECK_FALSE(sandbox::plan_wrap(request));
        return;
    }
    auto plan = sandbox::plan_wrap(request);
    REQUIRE(plan);
    // bwrap itself is what gets spawned: no shell, no second exec hop.
    CHECK(std::filesystem::path(plan->argv.front()).filename() == "bwrap");
    CHECK(std::find(plan->argv.begin(), plan->argv.end(), "/bin/sh") == plan->argv.end());
    switch (limits->pids_by) {
        case sandbox::LimitMechanism::rlimit:
            REQUIRE(plan->rlimits.size() == 1);
            CHECK(plan->rlimits.front().resource == static_cast<int>(RLIMIT_NPROC));
            CHECK(plan->rlimits.front().value == 64u);
            break;
        case sandbox::LimitMechanism::cgroup1:
            CHECK(plan->join_cgroups.size() == 1);
            CHECK(plan->rlimits.empty());
            break;
        case sandbox::LimitMechanism::cgroup2:
            CHECK(std::find(plan->cgroup2_limits.begin(), plan->cgroup2_limits.end(),
                            std::pair<std::string, std::string>{"pids.max", "64"}) !=
                  plan->cgroup2_limits.end());
            break;
        case sandbox::LimitMechanism::none:
            FAIL("an explicit --pids was planned unenforced");
    }
}
