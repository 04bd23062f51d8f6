// The Dockerfile cannot be built here (no container engine runs on this machine, and Debian 12
// has no hadolint), so this checks its invariants as far as the machine allows: the runtime
// stage installs packages that exist, and together with their dependencies they provide every
// shared library the sandgate binary needs; the build stage builds the product only; the user
// has a fixed uid/gid; the labels; the HEALTHCHECK, run against a real agent; one config path
// (sandgate-agent.yaml) there, in CMD and in the systemd units; .dockerignore.
#include <catch2/catch.hpp>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "tests/support/agent_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"

namespace {

struct PipeCloser {
    void operator()(std::FILE* file) const { ::pclose(file); }
};

std::string capture(const std::string& command) {
    std::unique_ptr<std::FILE, PipeCloser> pipe(::popen(command.c_str(), "r"));
    REQUIRE(pipe);
    std::string output;
    char buffer[4096];
    while (std::size_t n = std::fread(buffer, 1, sizeof buffer, pipe.get()))
        output.append(buffer, n);
    return output;
}

std::string stage(const std::string& dockerfile, const std::string& name) {
    const auto as = dockerfile.find(" AS " + name + "\n");
    REQUIRE(as != std::string::npos);
    const auto start = dockerfile.rfind('\n', as) + 1;
    const auto end = dockerfile.find("\nFROM ", start);
    return dockerfile.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

std::set<std::string> runtime_packages(const std::string& runtime_stage) {
    std::string text = std::regex_replace(runtime_stage, std::regex("\\\\\n"), " ");
    std::smatch match;
    REQUIRE(std::regex_search(text, match, std::regex("apt-get install ([^&]*)")));
    std::set<std::string> packages;
    std::istringstream words(match[1].str());
    for (std::string word; words >> word;)
        if (!word.starts_with("-")) packages.insert(word);
    return packages;
}

std::set<std::string> with_dependencies(const std::set<std::string>& packages) {
    std::string command =
        "apt-cache depends --recurse --no-recommends --no-suggests "
        "--no-conflicts --no-breaks --no-replaces --no-enhances";
    for (const auto& p : packages) command += " " + p;
    std::set<std::string> closure;
    std::istringstream lines(capture(command + " 2>/dev/null"));
    for (std::string line; std::getline(lines, line);) {
        if (line.empty() || line[0] == ' ') {
            const auto colon = line.find(": ");
            if (colon != std::string::npos) closure.insert(line.substr(colon + 2));
        } else {
            closure.insert(line);
        }
    }
    for (auto it = closure.begin(); it != closure.end();) {
        if (it->starts_with("<"))
            it = closure.erase(it);
        else
            ++it;
    }
    for (auto name : std::set<std::string>(closure)) {  // drop ":amd64" qualifiers
        if (const auto colon = name.find(':'); colon != std::string::npos)
            closure.insert(name.substr(0, colon));
    }
    return closure;
}

// The Debian package that ships a shared library ldd resolved (merged /usr aware).
std::string package_of(const std::string& path) {
    std::string owner = capture("dpkg -S '" + path + "' 2>/dev/null");
    if (owner.empty() && path.starts_with("/lib"))
        owner = capture("dpkg -S '/usr" + path + "' 2>/dev/null");
    if (owner.empty() && path.starts_with("/usr/lib"))
        owner = capture("dpkg -S '" + path.substr(4) + "' 2>/dev/null");
    const auto colon = owner.find(':');
    return colon == std::string::npos ? std::string() : owner.substr(0, colon);
}

// The exec-form argv after `INSTRUCTION ... CMD` or `INSTRUCTION` (a JSON array on one line).
std::vector<std::string> exec_form(const std::string& dockerfile, const std::string& prefix) {
    const std::string text = std::regex_replace(dockerfile, std::regex("\\\\\n\\s*"), " ");
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
        if (!line.starts_with(prefix)) continue;
        const auto open = line.find('[');
        REQUIRE(open != std::string::npos);
        return nlohmann::json::parse(line.substr(open)).get<std::vector<std::string>>();
    }
    FAIL("no " << prefix << " line");
    return {};
}

std::string value_after(const std::vector<std::string>& argv, const std::string& flag) {
    for (std::size_t i = 0; i + 1 < argv.size(); ++i)
        if (argv[i] == flag) return argv[i + 1];
    return {};
}

int run_status(std::vector<std::string> argv) {
    auto process = tests::agent_fixture::spawn(std::move(argv), "/nonexistent");
    return process.wait();
}

const std::string k_config = "/etc/sandgate/sandgate-agent.yaml";

}  // namespace

TEST_CASE("the Dockerfile's runtime stage provides every library the binary links") {
    SKIP_UNDER_WRAP("needs the host's dpkg and apt databases, which the wrap does not bind");
    const std::string dockerfile = tests::read_file(SANDGATE_SOURCE_DIR "/Dockerfile");
    const auto listed = runtime_packages(stage(dockerfile, "runtime"));
    CHECK(listed.count("bubblewrap") == 1);
    CHECK(listed.count("libpq5") ==
          1);  // dlopen'ed by a pool's agent (agent/store/pg.hpp): no ldd sees it
    const auto available = with_dependencies(listed);
    for (const auto& p : listed) {
        INFO("runtime package " << p << " must exist in Debian 12");
        CHECK(available.count(p) == 1);
    }

    // Every executable: the launcher (linked statically where libseccomp.a exists: then it
    // needs no library at all) and the full binary, the broker and the agent beside it.
    const std::string launcher = SANDGATE_BINARY;
    for (const std::string& binary :
         {launcher, launcher + "-full", launcher + "-broker", launcher + "-agent"}) {
        std::istringstream ldd(capture("ldd '" + binary + "'"));
        int libraries = 0;
        for (std::string line; std::getline(ldd, line);) {
            std::smatch match;
            if (!std::regex_search(line, match, std::regex("=> (/\\S+)"))) continue;
            ++libraries;
            const std::string package = package_of(match[1].str());
            INFO(binary << ": library " << match[1].str() << " comes from package '" << package
                        << "'");
            REQUIRE_FALSE(package.empty());
            CHECK(available.count(package) == 1);
        }
        if (binary != launcher) CHECK(libraries > 3);
    }
}

TEST_CASE("the Dockerfile's build stage builds the product only") {
    const std::string dockerfile = tests::read_file(SANDGATE_SOURCE_DIR "/Dockerfile");
    const std::string build = stage(dockerfile, "build");
    CHECK(build.find("FROM debian:12 AS build") != std::string::npos);
    CHECK(build.find("./scripts/install-deps.sh --product") != std::string::npos);
    CHECK(build.find("SANDGATE_BUILD_DIR=/build ./scripts/build-product.sh") != std::string::npos);
    const std::string product = tests::read_file(SANDGATE_SOURCE_DIR "/scripts/build-product.sh");
    CHECK(product.find("-DSANDGATE_BUILD_TESTS=OFF") != std::string::npos);
    CHECK(product.find("--target sandgate") != std::string::npos);
    CHECK(product.find("install-deps.sh\" --product") != std::string::npos);
    // The launcher and the binaries it starts, side by side.
    CHECK(dockerfile.find(
              "COPY --from=build /build/sandgate /build/sandgate-full /build/sandgate-broker "
              "/build/sandgate-agent /usr/local/bin/") != std::string::npos);
    CHECK(dockerfile.find("strip /build/sandgate /build/sandgate-full /build/sandgate-broker "
                          "/build/sandgate-agent") != std::string::npos);
    // The build context leaves out build trees and git metadata.
    const std::string ignore = tests::read_file(SANDGATE_SOURCE_DIR "/.dockerignore");
    CHECK(ignore.find("\n.git\n") != std::string::npos);
    CHECK(ignore.find("\nbuild*/\n") != std::string::npos);
}

TEST_CASE("the Dockerfile's user has a fixed uid and gid, the image its OCI labels") {
    const std::string dockerfile = tests::read_file(SANDGATE_SOURCE_DIR "/Dockerfile");
    const std::string runtime = stage(dockerfile, "runtime");
    const std::string joined = std::regex_replace(runtime, std::regex("\\\\\n\\s*"), " ");
    CHECK(joined.find("groupadd --system --gid 10001 sandgate") != std::string::npos);
    CHECK(joined.find("useradd --system --uid 10001 --gid 10001 ") != std::string::npos);
    // Numeric, so that a runAsNonRoot check can see it is not root.
    CHECK(runtime.find("\nUSER 10001:10001\n") != std::string::npos);
    for (const char* label :
         {"title", "description", "source", "documentation", "version", "revision", "base.name"}) {
        INFO("label org.opencontainers.image." << label);
        CHECK(joined.find(std::string("org.opencontainers.image.") + label + "=\"") !=
              std::string::npos);
    }
}

TEST_CASE("one configuration path: CMD, HEALTHCHECK and the systemd units") {
    const std::string dockerfile = tests::read_file(SANDGATE_SOURCE_DIR "/Dockerfile");
    CHECK(exec_form(dockerfile, "CMD") == std::vector<std::string>{"agent", "--config", k_config});
    CHECK(value_after(exec_form(dockerfile, "HEALTHCHECK"), "--config") == k_config);
    const std::string unit =
        tests::read_file(SANDGATE_SOURCE_DIR "/contrib/systemd/sandgate-agent.service");
    CHECK(unit.find("ExecStart=/usr/local/bin/sandgate agent --config " + k_config + "\n") !=
          std::string::npos);
    const std::string pool =
        tests::read_file(SANDGATE_SOURCE_DIR "/contrib/systemd/sandgate-agent@.service");
    CHECK(pool.find("--config /etc/sandgate/%i/sandgate-agent.yaml\n") != std::string::npos);
    for (const std::string& text :
         {dockerfile, unit, pool, tests::read_file(SANDGATE_SOURCE_DIR "/README.md")}) {
        CHECK(text.find("/agent.yml") == std::string::npos);
        CHECK(text.find("/agent.yaml") == std::string::npos);
        CHECK(text.find("/sandgate-agent.yml") == std::string::npos);
    }
}

TEST_CASE("a config of another spelling beside the missing one: one line naming it, exit 3") {
    const auto dir = tests::make_temp_dir("spelling");
    for (const char* other : {"agent.yml", "agent.yaml", "sandgate-agent.yml"}) {
        std::filesystem::remove_all(dir / "etc");
        std::filesystem::create_directories(dir / "etc");
        tests::write_file(dir / "etc" / other, "agent:\n  max_jobs: 1\n");
        const auto err = dir / "err";
        auto agent = tests::agent_fixture::spawn(
            {SANDGATE_BINARY, "agent", "--config", (dir / "etc/sandgate-agent.yaml").string()}, dir,
            {}, err);
        CHECK(agent.wait() == 3);
        CHECK(tests::read_file(err) ==
              "sandgate agent: " + (dir / "etc/sandgate-agent.yaml").string() + ": no such file; " +
                  (dir / "etc" / other).string() +
                  " beside it is not read: the configuration file is "
                  "named sandgate-agent.yaml\n");
    }
}

TEST_CASE("the HEALTHCHECK asks a real agent's /healthz: 0 while it serves, 3 before and after") {
    const std::string dockerfile = tests::read_file(SANDGATE_SOURCE_DIR "/Dockerfile");
    auto health = exec_form(dockerfile, "HEALTHCHECK");
    REQUIRE(health.size() == 5);
    CHECK(health[0] == "/usr/local/bin/sandgate");
    CHECK(dockerfile.find("HEALTHCHECK --interval=30s --timeout=10s --start-period=30s "
                          "--retries=3") != std::string::npos);
    tests::agent_fixture::Agent agent;
    CHECK(health[1] == "jobs");
    CHECK(health[4] == "health");
    health[0] = SANDGATE_BINARY;
    health[3] = agent.config.string();
    CHECK(run_status(health) == 3);  // nothing listens yet
    {
        auto daemon = agent.start(agent.dir / "agent.log");
        agent.wait_ready();
        CHECK(run_status(health) == 0);
        ::kill(daemon.pid, SIGTERM);
        CHECK(daemon.wait() == 0);
    }
    CHECK(run_status(health) == 3);
}
