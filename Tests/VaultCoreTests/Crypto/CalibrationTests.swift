import Testing
import VaultCore

/// The ceiling `vault-bench` prints: every core runs the whole pipeline on chunks of its own.
@Suite struct CalibrationTests {
    @Test func ceilingSpreadsTheWholePipelineOverTheCores() {
        // Per MB: 1 ms (cipher) + 0.25 ms (dispersal) + 5/3 · 1 ms (hash of the pieces).
        let perMB = 0.001 + 0.00025 + 5.0 / 3 * 0.001
        let one = Calibration.shareCeilingMBps(k: 3, n: 5, cores: 1, cipher: 1000, hash: 1000, dispersal: 4000)
        #expect(abs(one - 1 / perMB) < 1e-6)
        let two = Calibration.shareCeilingMBps(k: 3, n: 5, cores: 2, cipher: 1000, hash: 1000, dispersal: 4000)
        #expect(abs(two - 2 / perMB) < 1e-6)
    }
}
