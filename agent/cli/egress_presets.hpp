#pragma once
// `--allow-egress @npm` and the other presets: the hosts of an ecosystem's registry, taken from
// this machine's own configuration where it names one (so that an internal mirror is what gets
// allowed), the public registry's otherwise. Read on the trusted side from the agent's own
// files (never from anything a step wrote):
//   @npm     npm_config_registry, then `registry=` in ~/.npmrc, then ETC/npmrc; else
//            registry.npmjs.org
//   @pypi    PIP_INDEX_URL / PIP_EXTRA_INDEX_URL, then `index-url` / `extra-index-url` in
//            ~/.config/pip/pip.conf, ~/.pip/pip.conf, ETC/pip.conf; else pypi.org and
//            files.pythonhosted.org
//   @go      GOPROXY's URLs (direct and off skipped) and GOSUMDB's host; else
//            proxy.golang.org and sum.golang.org
//   @debian  the URIs of ETC/apt/sources.list, sources.list.d/*.list and *.sources (port 80
//            for http, 443 for https); else deb.debian.org:80 and security.debian.org:80
//   @crates  crates.io, index.crates.io, static.crates.io
//   @github  github.com, api.github.com, codeload.github.com and the githubusercontent.com
//            hosts that serve raw files, release assets and LFS objects

#include <filesystem>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "sandbox/egress/egress_rule.hpp"
#include "sandbox/process/run.hpp"

namespace agent {

// Where a preset's configuration is read: the agent's HOME, the /etc it reads and its
// environment.
struct PresetPlaces {
    std::filesystem::path home;
    std::filesystem::path etc = "/etc";
    sandbox::Environment env;
};

// This process's HOME, /etc and environment.
PresetPlaces machine_places();

// The rules `name` ("@npm") expands to. invalid_input naming `name` for an unknown preset, or a
// configured registry whose host the proxy could not serve (an IP literal, a malformed URL).
common::Expected<std::vector<sandbox::EgressRule>> expand_egress_preset(std::string_view name,
                                                                        const PresetPlaces& places);

// Appends the rules of `allow` (HOST[:PORT] or a preset, expanded from this machine's
// configuration: expand_egress_preset) and the ranges of `ranges` (CIDR) to `policy`, as
// --allow-egress and --allow-egress-range read them; invalid_input naming the first bad one.
// Shared by the flags (agent/policy_options) and the agent's job.allow_egress.
common::Expected<void> add_egress_values(const std::vector<std::string>& allow,
                                         const std::vector<std::string>& ranges,
                                         sandbox::Policy& policy);

}  // namespace agent
