import Testing
@testable import VaultCore

@Suite struct PCRSelectionTests {
    @Test func parsesListsOfPCRs() throws {
        #expect(try PCRSelection(parsing: "7").mask == 1 << 7)
        #expect(try PCRSelection(parsing: "0, 2,7").indices == [0, 2, 7])
        #expect(try PCRSelection(parsing: "23,7,7").description == "7 and 23")
        #expect(try PCRSelection(parsing: "0,2,7").description == "0, 2 and 7")
        for bad in ["", "24", "-1", "7,", "seven", "٧", "0x7", "1,,2"] {
            #expect(throws: VaultError.self, "\(bad)") { try PCRSelection(parsing: bad) }
        }
    }

    @Test func takesOnlyTheTPMsItKnows() throws {
        #expect(try TPMSelection("device").tcti == "device:/dev/tpmrm0")
        #expect(try TPMSelection("swtpm:host=127.0.0.1,port=2321").tcti == "swtpm:host=127.0.0.1,port=2321")
        #expect(try TPMSelection.fromEnvironment([:]) == .defaultDevice)
        for bad in ["cmd:tpm2_send", "libtpms", "", "pcap:device"] {
            #expect(throws: VaultError.self) { try TPMSelection(bad) }
        }
    }
}
