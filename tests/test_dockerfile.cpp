// The Dockerfile cannot be built here (no container engine runs on this machine), so this
// checks its build steps as far as the machine allows: the runtime stage installs packages
// that exist, and together with their dependencies they provide every shared library the
// sandgate binary needs; the build stage uses the project's own install script and target.
#include <catch2/catch.hpp>
#include <cstdio>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>

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

}  // namespace

TEST_CASE("the Dockerfile's runtime stage provides every library the binary links") {
    SKIP_UNDER_WRAP("needs the host's dpkg and apt databases, which the wrap does not bind");
    const std::string dockerfile = tests::read_file(SANDGATE_SOURCE_DIR "/Dockerfile");
    const auto listed = runtime_packages(stage(dockerfile, "runtime"));
    CHECK(listed.count("bubblewrap") == 1);
    CHECK(listed.count("libpq5") ==
          1);  // dlopen'ed by a pool's agent (agent/pg.hpp): no ldd sees it
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

TEST_CASE("the Dockerfile's build stage uses the project's install script and target") {
    const std::string dockerfile = tests::read_file(SANDGATE_SOURCE_DIR "/Dockerfile");
    const std::string build = stage(dockerfile, "build");
    CHECK(build.find("FROM debian:12 AS build") != std::string::npos);
    CHECK(build.find("./scripts/install-deps.sh") != std::string::npos);
    CHECK(build.find("--target sandgate") != std::string::npos);
    // The launcher and the binaries it starts, side by side.
    CHECK(dockerfile.find(
              "COPY --from=build /build/sandgate /build/sandgate-full /build/sandgate-broker "
              "/build/sandgate-agent /usr/local/bin/") != std::string::npos);
    CHECK(dockerfile.find("strip /build/sandgate /build/sandgate-full /build/sandgate-broker "
                          "/build/sandgate-agent") != std::string::npos);
    CHECK(dockerfile.find("USER sandgate") != std::string::npos);
}
