// StreamCapture and MarkerCounter against a naive model, under every way of cutting the
// stream into chunks.
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "sandbox/process/capture.hpp"

namespace {

// Lines containing the marker, counted on the whole text at once.
std::uint64_t naive_markers(const std::string& text, const std::string& marker) {
    std::uint64_t count = 0;
    std::size_t start = 0;
    while (start < text.size()) {
        std::size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        if (text.substr(start, end - start).find(marker) != std::string::npos) ++count;
        start = end + 1;
    }
    return count;
}

std::uint64_t count_in_chunks(const std::string& text, const std::vector<std::size_t>& cuts) {
    sandbox::MarkerCounter counter;
    std::size_t from = 0;
    for (std::size_t cut : cuts) {
        counter.feed(std::string_view(text).substr(from, cut - from));
        from = cut;
    }
    counter.feed(std::string_view(text).substr(from));
    return counter.count();
}

}  // namespace

TEST_CASE("markers: every single cut and every byte-by-byte feed agree with the model") {
    const std::string m = "SKIP-UNDER-WRAP";
    const std::vector<std::string> texts = {
        m,
        m + "\n",
        "x" + m + m + "\n" + m + "\n\n" + m,
        "SKIP-UNDER-WRA\nP" + m + "\n",
        "SKIP-SKIP-UNDER-WRAP-WRAP\n",
        "\n\n" + m + " " + m + "\nno\n" + m.substr(0, 7) + "\n" + m.substr(7) + "\n",
        "SSKIP-UNDER-WRAPP\nSKIP-UNDER-WRAP",
    };
    for (const auto& text : texts) {
        INFO(text);
        const auto expected = naive_markers(text, m);
        for (std::size_t cut = 0; cut <= text.size(); ++cut)
            CHECK(count_in_chunks(text, {cut}) == expected);
        for (std::size_t a = 0; a <= text.size(); ++a)
            for (std::size_t b = a; b <= text.size(); b += 3)
                CHECK(count_in_chunks(text, {a, b}) == expected);
        std::vector<std::size_t> every;
        for (std::size_t i = 1; i < text.size(); ++i) every.push_back(i);
        CHECK(count_in_chunks(text, every) == expected);
    }
}

TEST_CASE("markers and capture: random text, random chunking") {
    std::mt19937 rng(12345);
    const std::vector<std::string> pieces = {
        "SKIP-UNDER-WRAP", "SKIP-", "UNDER-", "WRAP", "\n", "x", "S"};
    for (int round = 0; round < 200; ++round) {
        std::string text;
        const int length = std::uniform_int_distribution<int>(0, 300)(rng);
        for (int i = 0; i < length; ++i) text += pieces[rng() % pieces.size()];
        std::vector<std::size_t> cuts;
        for (std::size_t at = 0; at < text.size();) {
            at += std::uniform_int_distribution<std::size_t>(1, 40)(rng);
            if (at < text.size()) cuts.push_back(at);
        }
        CHECK(count_in_chunks(text, cuts) == naive_markers(text, "SKIP-UNDER-WRAP"));

        const std::size_t limit = std::uniform_int_distribution<std::size_t>(0, 200)(rng);
        sandbox::StreamCapture capture(limit);
        std::size_t from = 0;
        for (std::size_t cut : cuts) {
            capture.feed(std::string_view(text).substr(from, cut - from));
            from = cut;
        }
        capture.feed(std::string_view(text).substr(from));
        const auto result = capture.result();
        CHECK(result.bytes == text.size());
        CHECK(result.head == text.substr(0, std::min(limit, text.size())));
        CHECK(result.tail == (text.size() > limit ? text.substr(limit) : std::string()));
        CHECK_FALSE(result.truncated);  // all of it fits head + 64 KiB tail
        CHECK(capture.markers() == naive_markers(text, "SKIP-UNDER-WRAP"));
    }
}

TEST_CASE("capture: the tail ring keeps exactly the last 64 KiB across wrap-arounds") {
    const std::size_t limit = 10;
    sandbox::StreamCapture capture(limit);
    std::string all;
    std::mt19937 rng(7);
    for (int i = 0; i < 500; ++i) {
        std::string chunk(std::uniform_int_distribution<std::size_t>(1, 5000)(rng), '\0');
        for (auto& c : chunk) c = static_cast<char>('a' + rng() % 26);
        if (i == 250)
            chunk.assign(sandbox::k_tail_bytes + 17, 'Z');  // one chunk larger than the ring
        all += chunk;
        capture.feed(chunk);
    }
    const auto result = capture.result();
    CHECK(result.bytes == all.size());
    CHECK(result.head == all.substr(0, limit));
    CHECK(result.tail == all.substr(all.size() - sandbox::k_tail_bytes));
    CHECK(result.truncated);
}

TEST_CASE("capture: a stream of exactly the head plus the tail is complete, one more byte is not") {
    const std::size_t limit = 100;
    sandbox::StreamCapture exact(limit);
    exact.feed(std::string(limit + sandbox::k_tail_bytes, 'q'));
    CHECK_FALSE(exact.result().truncated);
    CHECK(exact.result().tail.size() == sandbox::k_tail_bytes);
    sandbox::StreamCapture over(limit);
    over.feed(std::string(limit + sandbox::k_tail_bytes + 1, 'q'));
    CHECK(over.result().truncated);
    CHECK(over.result().tail.size() == sandbox::k_tail_bytes);
}

TEST_CASE("markers: found after the search falls back from its anchor byte to memmem") {
    // 'K' is the byte MarkerCounter seeks first; a stream dense with it makes the search
    // switch to memmem mid-chunk. Markers before, at and after that switch all count.
    const std::string m = "SKIP-UNDER-WRAP";
    for (const std::size_t noise : {0UL, 15UL, 16UL, 17UL, 100UL, 1000UL, 5000UL}) {
        std::string text = "a " + m + "\n";
        text += std::string(noise, 'K');
        text += m + "\n" + std::string(noise / 2, 'K') + "SKIP-UNDER-WRAKP SKIP-UNDER-" + "\n";
        text += std::string(noise, 'K') + "x" + m + "KKK" + m + "\n";
        text += std::string(noise + 1, 'S') + "KIP-UNDER-WRAP";  // the last line, no newline
        INFO("noise " << noise);
        const auto expected = naive_markers(text, m);
        CHECK(expected == 4);
        CHECK(count_in_chunks(text, {}) == expected);
        for (std::size_t cut = 0; cut <= text.size(); cut += 7)
            CHECK(count_in_chunks(text, {cut}) == expected);
    }
}

TEST_CASE("markers: a large stream of mixed output fed in pipe-sized reads") {
    std::mt19937 rng(99);
    const std::vector<std::string> pieces = {
        "SKIP-UNDER-WRAP",      "KKKKKKKK",   "ok\n",  "\n",
        std::string(300, '\0'), "SKIP-UNDER", "-WRAP", "some ordinary build output line\n"};
    std::string text;
    while (text.size() < 3 * 1024 * 1024) text += pieces[rng() % pieces.size()];
    std::vector<std::size_t> cuts;
    for (std::size_t at = 0;;) {
        at += std::uniform_int_distribution<std::size_t>(1, 256 * 1024)(rng);
        if (at >= text.size()) break;
        cuts.push_back(at);
    }
    CHECK(count_in_chunks(text, cuts) == naive_markers(text, "SKIP-UNDER-WRAP"));
}

namespace {

// Feeds `text` the way run() does: read_buffer(), then commit() of a random part of it.
sandbox::StreamResult read_through(sandbox::StreamCapture& capture, const std::string& text,
                                   std::mt19937& rng, std::uint64_t* markers) {
    std::size_t from = 0;
    while (from < text.size()) {
        const std::span<char> buffer = capture.read_buffer();
        REQUIRE_FALSE(buffer.empty());
        REQUIRE(buffer.size() <= sandbox::k_capture_ring_bytes);
        std::size_t n = std::min(buffer.size(), text.size() - from);
        if (rng() % 2 == 0) n = std::uniform_int_distribution<std::size_t>(1, n)(rng);
        std::memcpy(buffer.data(), text.data() + from, n);
        const std::string_view chunk = capture.commit(n);
        REQUIRE(chunk == std::string_view(text).substr(from, n));
        from += n;
    }
    *markers = capture.markers();
    return capture.result();
}

}  // namespace

TEST_CASE("capture: reading straight into the head and ring keeps exact bytes, tail and markers") {
    const std::string m = "SKIP-UNDER-WRAP";
    const std::size_t ring = sandbox::k_capture_ring_bytes;
    std::mt19937 rng(2024);
    for (const std::size_t limit : {0UL, 1UL, 100UL, 262144UL}) {
        for (int round = 0; round < 6; ++round) {
            std::string text(limit + static_cast<std::size_t>(round) * ring / 2 + 3 * ring + 11,
                             'x');
            for (std::size_t i = 0; i < text.size(); i += 97) text[i] = '\n';
            // Markers across the head/ring boundary and across every wrap of the ring (reads
            // never cross the ring's end, so a wrap always splits what is read).
            const auto plant = [&](std::size_t at) {
                if (at + m.size() <= text.size()) text.replace(at, m.size(), m);
            };
            if (limit >= 7) plant(limit - 7);
            for (std::size_t wrap = limit + ring; wrap < text.size(); wrap += ring) plant(wrap - 7);
            plant(text.size() - 3 - m.size());
            INFO("limit " << limit << " round " << round);
            sandbox::StreamCapture capture(limit);
            std::uint64_t markers = 0;
            const auto result = read_through(capture, text, rng, &markers);
            CHECK(result.bytes == text.size());
            CHECK(result.head == text.substr(0, limit));
            CHECK(result.tail == text.substr(text.size() - sandbox::k_tail_bytes));
            CHECK(result.truncated);
            CHECK(markers == naive_markers(text, m));
            CHECK(markers >= 3);
        }
    }
}

TEST_CASE("capture: a short stream read straight in is whole, with nothing truncated") {
    std::mt19937 rng(5);
    for (const std::size_t size : {0UL, 1UL, 99UL, 100UL, 101UL, 100UL + sandbox::k_tail_bytes,
                                   101UL + sandbox::k_tail_bytes}) {
        std::string text(size, 'a');
        for (std::size_t i = 0; i < text.size(); ++i) text[i] = static_cast<char>('a' + i % 26);
        sandbox::StreamCapture capture(100);
        std::uint64_t markers = 0;
        const auto result = read_through(capture, text, rng, &markers);
        INFO("size " << size);
        CHECK(result.head == text.substr(0, std::min<std::size_t>(100, size)));
        if (size <= 100 + sandbox::k_tail_bytes) CHECK(result.head + result.tail == text);
        CHECK(result.truncated == (size > 100 + sandbox::k_tail_bytes));
        CHECK(result.tail.size() ==
              std::min<std::size_t>(size > 100 ? size - 100 : 0, sandbox::k_tail_bytes));
    }
}
