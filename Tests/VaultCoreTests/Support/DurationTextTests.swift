import Testing
@testable import VaultCore

/// Durations in words: exact for limits, rounded for how far off a time is.
@Suite struct DurationTextTests {
    @Test func limitsAreExact() {
        #expect(DurationText.text(7 * 86400) == "7 days")
        #expect(DurationText.text(3600) == "1 hour")
        #expect(DurationText.text(90) == "90 seconds")
        #expect(DurationText.text(863_999) == "863999 seconds")
    }

    /// A share 10 days ahead, checked a second later (a slow machine), is still said to be
    /// 10 days ahead (RelayFindingsTests.aRelayRefusesNumber0AndSharesFromTheFuture once
    /// read "863999 seconds").
    @Test func howFarOffIsRounded() {
        #expect(DurationText.rounded(863_999) == "10 days")
        #expect(DurationText.rounded(864_001) == "10 days")
        #expect(DurationText.rounded(86400 + 43199) == "1 day")
        #expect(DurationText.rounded(43200) == "12 hours")
        #expect(DurationText.rounded(3599) == "60 minutes")
        #expect(DurationText.rounded(301) == "5 minutes")
        #expect(DurationText.rounded(299) == "299 seconds")
        #expect(DurationText.rounded(1) == "1 second")
    }
}
