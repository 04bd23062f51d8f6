#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "jobs/run/log.hpp"

using namespace jobs;

namespace {
// Captures what a ConsoleLog writes, through a real FILE*.
struct Captured {
    char* buffer = nullptr;
    std::size_t size = 0;
    std::FILE* file = open_memstream(&buffer, &size);
    ~Captured() {
        if (file) std::fclose(file);
        std::free(buffer);
    }
    std::string text() {
        std::fflush(file);
        return std::string(buffer, size);
    }
};
}  // namespace

TEST_CASE("ConsoleLog prefixes every line with [job/step]") {
    Captured out;
    REQUIRE(out.file);
    ConsoleLog log(out.file);
    const StepLabel label{"build (linux)", "Compile"};
    log.status(label, StatusKind::start, "Run Compile");
    log.group_start(label, "Setup");
    log.output(label, "hello");
    log.group_end(label);
    log.debug(label, "hidden by default");
    Annotation annotation;
    annotation.level = AnnotationLevel::warning;
    annotation.message = "careful";
    annotation.file = "a.c";
    annotation.line = 3;
    log.annotation(label, annotation);
    log.status(label, StatusKind::success, "Success - Compile");
    log.status(StepLabel{"lint", ""}, StatusKind::skipped, "Job skipped");
    CHECK(out.text() ==
          "[build (linux)/Compile] ⭐ Run Compile\n"
          "[build (linux)/Compile]   ▼ Setup\n"
          "[build (linux)/Compile]   | hello\n"
          "[build (linux)/Compile]   ▲\n"
          "[build (linux)/Compile]   ⚠ warning file=a.c,line=3::careful\n"
          "[build (linux)/Compile]   ✅  Success - Compile\n"
          "[lint]   ⏭  Job skipped\n");
}

TEST_CASE("ConsoleLog shows debug lines only when asked") {
    Captured out;
    ConsoleLog log(out.file, DebugLog::shown);
    log.debug(StepLabel{"j", "s"}, "dbg");
    CHECK(out.text() == "[j/s]   🐛 dbg\n");
}

TEST_CASE("format_annotation renders every property in the runner's order") {
    Annotation annotation;
    annotation.level = AnnotationLevel::error;
    annotation.message = "m";
    annotation.file = "f";
    annotation.line = 1;
    annotation.end_line = 2;
    annotation.column = 3;
    annotation.end_column = 4;
    annotation.title = "t";
    CHECK(format_annotation(annotation) ==
          "error file=f,line=1,endLine=2,col=3,endColumn=4,title=t::m");
    annotation = Annotation{};
    annotation.level = AnnotationLevel::notice;
    annotation.message = "plain";
    CHECK(format_annotation(annotation) == "notice::plain");
}

TEST_CASE("writers on several threads never interleave within a line") {
    Captured out;
    ConsoleLog console(out.file);
    MemoryLog memory;
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            const StepLabel label{"job" + std::to_string(t), "s"};
            for (int i = 0; i < 200; ++i) {
                console.output(label, std::string(50, static_cast<char>('a' + t)));
                memory.output(label, "x");
            }
        });
    }
    for (auto& thread : threads) thread.join();
    const auto text = out.text();
    std::size_t lines = 0;
    for (std::size_t at = 0; at < text.size();) {
        const auto end = text.find('\n', at);
        REQUIRE(end != std::string::npos);
        const auto line = text.substr(at, end - at);
        const char c = line.back();
        CHECK(line == "[job" + std::to_string(c - 'a') + "/s]   | " + std::string(50, c));
        ++lines;
        at = end + 1;
    }
    CHECK(lines == 800);
    CHECK(memory.events().size() == 800);
}
