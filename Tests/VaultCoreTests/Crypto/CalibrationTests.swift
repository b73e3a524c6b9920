import Testing
import VaultCore

/// The ceiling `vault bench` prints: serial work on one core, the rest spread.
@Suite struct CalibrationTests {
    @Test func ceilingIsTheSlowerOfTheSerialPartAndTheSpreadWhole() {
        // Per MB: serial 1 ms (stream) + 0 (dispersal); pieces 5/3 · 1 ms (BLAKE2b only).
        let two = Calibration.shareCeilingMBps(k: 3, n: 5, cores: 2, stream: 1000, blake2b: 1000, dispersal: .infinity)
        #expect(abs(two - 1 / ((0.001 + 5.0 / 3 * 0.001) / 2)) < 1e-6)
        // Enough cores: only the serial part is left.
        let many = Calibration.shareCeilingMBps(k: 3, n: 5, cores: 64, stream: 1000, blake2b: 1000, dispersal: 4000)
        #expect(abs(many - 1 / (0.001 + 0.00025)) < 1e-6)
    }
}
