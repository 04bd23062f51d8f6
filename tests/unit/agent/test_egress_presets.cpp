// `--allow-egress @npm` and the other presets (agent/cli/egress_presets.hpp): the public registries
// by default, a machine's configured mirror where its files or environment name one.
#include <catch2/catch.hpp>
#include <string>

#include "agent/cli/egress_presets.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

std::vector<std::string> hosts(const std::string& preset, const agent::PresetPlaces& places) {
    auto rules = agent::expand_egress_preset(preset, places);
    INFO(preset << ": " << (rules ? "" : rules.error().message));
    REQUIRE(rules);
    std::vector<std::string> out;
    for (const auto& rule : *rules) out.push_back(sandbox::describe(rule));
    return out;
}

using List = std::vector<std::string>;

}  // namespace

TEST_CASE("presets name the public registries when the machine configures none") {
    const auto dir = tests::make_temp_dir("presets");
    const agent::PresetPlaces places{dir / "home", dir / "etc", {}};
    CHECK(hosts("@npm", places) == List{"registry.npmjs.org:443"});
    CHECK(hosts("@pypi", places) == List{"pypi.org:443", "files.pythonhosted.org:443"});
    CHECK(hosts("@go", places) == List{"proxy.golang.org:443", "sum.golang.org:443"});
    CHECK(hosts("@debian", places) == List{"deb.debian.org:80", "security.debian.org:80"});
    CHECK(hosts("@crates", places) ==
          List{"crates.io:443", "index.crates.io:443", "static.crates.io:443"});
    CHECK(hosts("@github", places).front() == "github.com:443");
    auto unknown = agent::expand_egress_preset("@maven", places);
    REQUIRE_FALSE(unknown);
    CHECK(unknown.error().message.starts_with("--allow-egress '@maven': unknown preset"));
}

TEST_CASE("presets follow the machine's configuration: .npmrc, pip.conf, apt sources, GOPROXY") {
    const auto dir = tests::make_temp_dir("presets");
    tests::write_file(dir / "home/.npmrc",
                      "; mirror\nregistry = https://npm.mirror.example:8443/repo/\n");
    tests::write_file(dir / "etc/pip.conf",
                      "[global]\nindex-url = http://pypi.mirror.example/simple\n"
                      "extra-index-url = https://user@extra.example/simple\n");
    tests::write_file(dir / "etc/apt/sources.list",
                      "# comment\ndeb [arch=amd64 signed-by=/k.gpg] "
                      "http://apt.mirror.example/debian bookworm main\n");
    tests::write_file(dir / "etc/apt/sources.list.d/security.sources",
                      "Types: deb\nURIs: https://sec.mirror.example/debian-security\nSuites: "
                      "bookworm-security\n");
    tests::write_file(dir / "etc/apt/sources.list.d/local.list", "deb file:/srv/local ./\n");
    agent::PresetPlaces places{dir / "home",
                               dir / "etc",
                               {{"GOPROXY", "https://goproxy.example,direct"}, {"GOSUMDB", "off"}}};
    CHECK(hosts("@npm", places) == List{"npm.mirror.example:8443"});
    CHECK(hosts("@pypi", places) == List{"pypi.mirror.example:80", "extra.example:443"});
    CHECK(hosts("@debian", places) == List{"apt.mirror.example:80", "sec.mirror.example:443"});
    CHECK(hosts("@go", places) == List{"goproxy.example:443"});
    places.env = {{"npm_config_registry", "http://env.example/"},
                  {"PIP_INDEX_URL", "https://pip.env.example/simple"}};
    CHECK(hosts("@npm", places) == List{"env.example:80"});
    CHECK(hosts("@pypi", places) == List{"pip.env.example:443"});
    places.env = {{"npm_config_registry", "http://10.0.0.5:4873/"}};
    auto literal = agent::expand_egress_preset("@npm", places);
    REQUIRE_FALSE(literal);
    CHECK(literal.error().message.starts_with(
        "--allow-egress @npm: the configured registry host '10.0.0.5:4873'"));
    CHECK(literal.error().message.find('\n') == std::string::npos);
}
