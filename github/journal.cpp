#include "github/journal.hpp"

#include <fcntl.h>
#include <openssl/evp.h>
#include <simdjson.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/fd.hpp"

namespace github {
namespace {

using common::ErrorKind;
using nlohmann::ordered_json;

constexpr std::string_view k_suffix = ".json";

std::string sha256_hex(std::string_view data) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr);
    static constexpr char k_hex[] = "0123456789abcdef";
    std::string out;
    for (unsigned int i = 0; i < length; ++i) {
        out += k_hex[digest[i] >> 4];
        out += k_hex[digest[i] & 15];
    }
    return out;
}

std::string read_whole(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream content;
    if (in) content << in.rdbuf();
    return content.str();
}

std::optional<std::uint64_t> start_time_of(int pid) {
    const std::string stat = read_whole("/proc/" + std::to_string(pid) + "/stat");
    // The command name (field 2) may hold spaces and parentheses: count from the last ')'.
    const auto close = stat.rfind(')');
    if (close == std::string::npos) return std::nullopt;
    std::istringstream fields(stat.substr(close + 2));
    std::string field;
    for (int index = 3; fields >> field; ++index) {
        if (index == 22) {
            std::uint64_t ticks = 0;
            const auto [end, ec] =
                std::from_chars(field.data(), field.data() + field.size(), ticks);
            if (ec != std::errc() || end != field.data() + field.size()) return std::nullopt;
            return ticks;
        }
    }
    return std::nullopt;
}

std::uint64_t next_sequence() {
    static std::atomic<std::uint64_t> counter{0};
    const auto now = std::chrono::duration_cast<std::chrono::microseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    return static_cast<std::uint64_t>(now) * 1000 + (counter++ % 1000);
}

std::string entry_json(const JournalEntry& entry) {
    ordered_json out = {
        {"version", 1},
        {"sequence", entry.sequence},
        {"kind", entry.kind == JournalKind::status ? "status" : "check_run"},
        {"phase", entry.phase == JournalPhase::finishing ? "finishing" : "started"},
        {"api_url", entry.api_url},
        {"owner", entry.owner},
        {"repo", entry.repo},
        {"check_name", entry.check_name},
        {"details_url", entry.details_url ? ordered_json(*entry.details_url) : ordered_json()},
        {"check_run_id", entry.check_run_id ? ordered_json(*entry.check_run_id) : ordered_json()},
        {"annotations_sent", entry.annotations_sent},
        {"owner_pid", entry.owner_process.pid},
        {"owner_start_time", entry.owner_process.start_time},
        {"report", "@REPORT@"}};
    std::string text = out.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
    // The report is already JSON emitted by to_json(); splice it in as an object.
    const std::string placeholder = "\"@REPORT@\"";
    text.replace(text.rfind(placeholder), placeholder.size(), to_json(entry.report));
    return text;
}

common::Expected<JournalEntry> parse_entry(const std::string& text) {
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    if (parser.parse(text).get(root) != simdjson::SUCCESS || !root.is_object()) {
        return common::fail(ErrorKind::invalid_input, "not JSON");
    }
    JournalEntry entry;
    std::string_view kind, phase, api_url, owner, repo, name;
    std::uint64_t sequence = 0;
    if (root["kind"].get(kind) || root["phase"].get(phase) || root["api_url"].get(api_url) ||
        root["owner"].get(owner) || root["repo"].get(repo) || root["check_name"].get(name) ||
        root["sequence"].get(sequence)) {
        return common::fail(ErrorKind::invalid_input, "missing fields");
    }
    entry.kind = kind == "status" ? JournalKind::status : JournalKind::check_run;
    entry.phase = phase == "finishing" ? JournalPhase::finishing : JournalPhase::started;
    entry.api_url = api_url;
    entry.owner = owner;
    entry.repo = repo;
    entry.check_name = name;
    entry.sequence = sequence;
    std::string_view details;
    if (root["details_url"].get(details) == simdjson::SUCCESS)
        entry.details_url = std::string(details);
    std::int64_t run_id = 0;
    if (root["check_run_id"].get(run_id) == simdjson::SUCCESS) entry.check_run_id = run_id;
    std::uint64_t count = 0;
    if (root["annotations_sent"].get(count) == simdjson::SUCCESS) entry.annotations_sent = count;
    std::int64_t pid = 0;
    if (root["owner_pid"].get(pid) == simdjson::SUCCESS)
        entry.owner_process.pid = static_cast<int>(pid);
    std::uint64_t start = 0;
    if (root["owner_start_time"].get(start) == simdjson::SUCCESS)
        entry.owner_process.start_time = start;
    simdjson::dom::element report;
    if (root["report"].get(report) != simdjson::SUCCESS) {
        return common::fail(ErrorKind::invalid_input, "no report");
    }
    auto parsed = SANDGATE_TRY(job_report_from_json(simdjson::minify(report)));
    entry.report = std::move(parsed);
    return entry;
}

common::Expected<void> fsync_directory(const std::filesystem::path& directory) {
    common::Fd fd(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd || ::fsync(fd.get()) != 0) {
        return common::fail(ErrorKind::permanent,
                            common::errno_message("fsync " + directory.string()));
    }
    return {};
}

}  // namespace

ProcessIdentity ProcessIdentity::self() {
    const int pid = static_cast<int>(::getpid());
    return {pid, start_time_of(pid).value_or(0)};
}

bool ProcessIdentity::alive() const {
    if (pid <= 0) return false;
    auto start = start_time_of(pid);
    return start && *start == start_time;
}

std::string JournalEntry::key() const {
    return sha256_hex(api_url + "\n" + owner + "/" + repo + "\n" +
                      (kind == JournalKind::status ? "status" : "check_run") + "\n" + report.sha +
                      "\n" + report.job_key + "\n" + check_name);
}

common::Expected<Journal> Journal::open(std::filesystem::path directory) {
    std::error_code error;
    std::filesystem::create_directories(directory, error);
    if (error || !std::filesystem::is_directory(directory)) {
        return common::fail(ErrorKind::unavailable, "report journal " + directory.string() +
                                                        ": cannot create: " + error.message());
    }
    ::chmod(directory.c_str(), 0700);
    return Journal(std::move(directory));
}

common::Expected<void> Journal::put(JournalEntry entry) const {
    entry.sequence = entry.sequence == 0 ? next_sequence() : entry.sequence;
    const std::string text = entry_json(entry);
    const std::string key = entry.key();
    const auto target = m_directory / (key + std::string(k_suffix));
    const auto temp = m_directory / (".tmp-" + key + "-" + std::to_string(::getpid()) + "-" +
                                     std::to_string(next_sequence()));
    {
        common::Fd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
        if (!fd)
            return common::fail(ErrorKind::permanent,
                                common::errno_message("create " + temp.string()));
        size_t written = 0;
        while (written < text.size()) {
            const ssize_t n = ::write(fd.get(), text.data() + written, text.size() - written);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                const int saved = errno;
                ::unlink(temp.c_str());
                return common::fail(ErrorKind::permanent,
                                    common::errno_message("write " + temp.string(), saved));
            }
            written += static_cast<size_t>(n);
        }
        if (::fsync(fd.get()) != 0) {
            const int saved = errno;
            ::unlink(temp.c_str());
            return common::fail(ErrorKind::permanent,
                                common::errno_message("fsync " + temp.string(), saved));
        }
    }
    if (::rename(temp.c_str(), target.c_str()) != 0) {
        const int saved = errno;
        ::unlink(temp.c_str());
        return common::fail(ErrorKind::permanent,
                            common::errno_message("rename " + target.string(), saved));
    }
    return fsync_directory(m_directory);
}

common::Expected<void> Journal::remove(const std::string& key) const {
    const auto target = m_directory / (key + std::string(k_suffix));
    if (::unlink(target.c_str()) != 0 && errno != ENOENT) {
        return common::fail(ErrorKind::permanent,
                            common::errno_message("remove " + target.string()));
    }
    return fsync_directory(m_directory);
}

common::Expected<std::vector<JournalEntry>> Journal::entries() const {
    std::vector<JournalEntry> out;
    std::error_code error;
    for (const auto& item : std::filesystem::directory_iterator(m_directory, error)) {
        const auto path = item.path();
        const std::string name = path.filename().string();
        if (name.starts_with(".") || !name.ends_with(k_suffix)) continue;
        auto entry = parse_entry(read_whole(path));
        if (!entry) {
            spdlog::warn("report journal: {} is unreadable ({}); kept as {}.bad", path.string(),
                         entry.error().message, name);
            std::filesystem::rename(path, path.string() + ".bad", error);
            continue;
        }
        out.push_back(std::move(*entry));
    }
    if (error) {
        return common::fail(ErrorKind::permanent,
                            "report journal " + m_directory.string() + ": " + error.message());
    }
    std::ranges::sort(out, {}, &JournalEntry::sequence);
    return out;
}

}  // namespace github
