import Foundation
import VaultCore

/// Asks holders for their pieces of a secret, all at once, over the peer protocol.
public enum PieceGathering {
    /// One holder to ask.
    public struct Holder: Sendable {
        public let peer: Peer
        public let index: Int
        public let address: PeerAddress
        /// Advanced by every byte of the piece as it arrives.
        public let progress: ProgressMeter?

        public init(peer: Peer, index: Int, address: PeerAddress, progress: ProgressMeter? = nil) {
            self.peer = peer
            self.index = index
            self.address = address
            self.progress = progress
        }
    }

    /// What happened with one holder.
    public enum Event: Sendable {
        /// The holder's person must consent first: request `id`, `seconds` left to answer.
        case waiting(Peer, id: String, seconds: Int)
        case received(Peer)
        case failed(Peer, Error)
        case timedOut
        /// `enough` said yes; `waiting` holders had not answered.
        case enough(waiting: Int)
    }

    /// Asks every holder concurrently; returns the pieces received, as files in `directory`
    /// (their key shares sealed to this identity) that are removed when released. Stops when every holder has
    /// answered, when `enough` says the pieces received suffice (it is asked after each),
    /// or after `timeout` seconds (extended, while a holder waits for its person's consent,
    /// to the end of that wait, unless `strict`: the person asked for that bound).
    public static func gather(
        _ secret: StoredSecret, from holders: [Holder], identity: Identity, directory: String, timeout: Int, strict: Bool = false,
        enough: ([OutputFile]) -> Bool = { _ in false },
        report: @escaping @Sendable (Event) -> Void = { _ in }
    ) async -> [OutputFile] {
        guard !holders.isEmpty else { return [] }
        var received: [OutputFile] = []
        let deadline = Deadline(Date().addingTimeInterval(TimeInterval(timeout)))
        await withTaskGroup(of: (Peer, Result<HandedOver, Error>)?.self) { group in
            for holder in holders {
                group.addTask {
                    do {
                        let file = try VaultHome(directory: directory).transientFile("vpiece")
                        try await PeerClient.requestPiece(of: secret, from: holder.peer, holderIndex: holder.index,
                                                          at: holder.address, identity: identity, into: file,
                                                          progress: holder.progress) { id, seconds in
                            if !strict { deadline.extend(to: Date().addingTimeInterval(NetLimits.approvalSeconds + 5)) }
                            report(.waiting(holder.peer, id: id, seconds: seconds))
                        }
                        return (holder.peer, .success(HandedOver(file: file)))
                    } catch {
                        return (holder.peer, .failure(error))
                    }
                }
            }
            group.addTask {
                while let left = deadline.remaining(), left > 0 {
                    try? await Task.sleep(nanoseconds: UInt64(min(left, 1) * 1e9))
                    if Task.isCancelled { break }
                }
                return nil
            }
            var waiting = holders.count
            gathering: while waiting > 0, let next = await group.next() {
                guard let (peer, result) = next else {
                    report(.timedOut)
                    break
                }
                waiting -= 1
                switch result {
                case .success(let handedOver):
                    report(.received(peer))
                    received.append(handedOver.file)
                    if waiting > 0 && enough(received) {
                        report(.enough(waiting: waiting))
                        break gathering
                    }
                case .failure(let error):
                    report(.failed(peer, error))
                }
            }
            group.cancelAll()
        }
        return received
    }

    /// A piece file on its way from the child task that wrote it to the gatherer. The child
    /// returns it and never touches it again, so one task at a time owns the file.
    private struct HandedOver: @unchecked Sendable {
        let file: OutputFile
    }

    /// When gathering gives up; a holder waiting for consent moves it later.
    private final class Deadline: @unchecked Sendable {
        private var at: Date
        private let lock = NSLock()

        init(_ at: Date) { self.at = at }

        func extend(to later: Date) { lock.withLock { at = max(at, later) } }

        /// Seconds left, or nil once passed.
        func remaining() -> TimeInterval? {
            let left = lock.withLock { at.timeIntervalSinceNow }
            return left > 0 ? left : nil
        }
    }
}
