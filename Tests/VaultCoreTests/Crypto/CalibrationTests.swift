import Testing
import VaultCore

/// The ceiling `vault bench` prints: the dispersal on one core, the rest spread.
@Suite struct CalibrationTests {
    @Test func ceilingIsTheSlowerOfTheSerialPartAndTheSpreadWhole() {
        // Per MB: serial 0.25 ms (dispersal); spread 1 ms (cipher) + 5/3 · 1 ms (hash).
        let two = Calibration.shareCeilingMBps(k: 3, n: 5, cores: 2, cipher: 1000, hash: 1000, dispersal: 4000)
        #expect(abs(two - 1 / ((0.00025 + 0.001 + 5.0 / 3 * 0.001) / 2)) < 1e-6)
        // Enough cores: only the serial part is left.
        let many = Calibration.shareCeilingMBps(k: 3, n: 5, cores: 64, cipher: 1000, hash: 1000, dispersal: 4000)
        #expect(abs(many - 1 / 0.00025) < 1e-6)
    }
}
