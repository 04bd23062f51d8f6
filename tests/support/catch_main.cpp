// The one Catch2 main shared by every test executable, plus the listener that removes a
// test's temp dirs when it passed and keeps (and names) them when it failed.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include "tests/support/temp_dir.hpp"

namespace {

class TempDirListener : public Catch::TestEventListenerBase {
public:
    using TestEventListenerBase::TestEventListenerBase;
    void testCaseEnded(const Catch::TestCaseStats& stats) override {
        tests::finish_temp_dirs(stats.totals.assertions.failed == 0 ? tests::Outcome::passed
                                                                    : tests::Outcome::failed);
        TestEventListenerBase::testCaseEnded(stats);
    }
};

}  // namespace

CATCH_REGISTER_LISTENER(TempDirListener)
