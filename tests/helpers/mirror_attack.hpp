#pragma once
// Threat row 3 for the mirror cache (../shared/docs/sandbox-threats.md): the lines of a step
// script that try every read of another repository's mirror a step could think of (list the
// mirrors, list its scope, open its HEAD and its packs by absolute path, git log through it,
// cat-file its commit through the step's own worktree), each printing "LEAK <how>" when it
// worked, then "attack-done". The word is split in the script, so the script's own text (a
// log may echo it) never holds it: only a read that worked prints it.

#include <filesystem>
#include <string>

namespace tests {

// `mirrors`: the state's mirrors directory; `scope` and `gitdir`: the other repository's
// mirror scope and bare mirror; `sha`: a commit of it holding s.txt.
inline std::string mirror_attack_lines(const std::filesystem::path& mirrors,
                                       const std::filesystem::path& scope,
                                       const std::filesystem::path& gitdir,
                                       const std::string& sha) {
    auto leak = [](const std::string& how) { return " && echo \"LE\"\"AK " + how + "\"\n"; };
    std::string script = "ls -a '" + mirrors.string() + "' 2>/dev/null | grep -q '" +
                         scope.filename().string() + "'" + leak("listed");
    script += "ls '" + scope.string() + "' >/dev/null 2>&1" + leak("scope");
    script += "cat '" + (gitdir / "HEAD").string() + "' 2>/dev/null" + leak("head");
    for (const auto& entry : std::filesystem::directory_iterator(gitdir / "objects/pack"))
        script += "head -c 4 '" + entry.path().string() + "' >/dev/null 2>&1" + leak("pack");
    script += "git --git-dir='" + gitdir.string() + "' log --format=%s 2>/dev/null" + leak("log");
    script += "git cat-file -p " + sha + ":s.txt 2>/dev/null" + leak("object");
    script += "echo \"attack\"\"-done\"\n";
    return script;
}

// `lines` indented by `spaces`, for a YAML block scalar.
inline std::string indent_lines(const std::string& lines, std::size_t spaces) {
    std::string out;
    for (std::size_t at = 0; at < lines.size();) {
        std::size_t next = lines.find('\n', at);
        if (next == std::string::npos) next = lines.size() - 1;
        out += std::string(spaces, ' ') + lines.substr(at, next - at + 1);
        at = next + 1;
    }
    return out;
}

}  // namespace tests
