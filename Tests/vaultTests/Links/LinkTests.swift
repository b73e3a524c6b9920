import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import GRDB
import Testing
import VaultCore
import VaultRelayProtocol
import VaultTestSupport

/// Share links (issue 16) against a real relay process on loopback: alice creates, and
/// someone with no vault identity opens.
final class LinkWorld {
    let directory = TemporaryDirectory("vault-links")
    let relay: BackgroundProcess
    let url: String
    let alice = User("alice"), reader = User("reader")
    /// The clock of the relay and of alice's and the reader's commands.
    let clock = TestClock()

    /// A relay with `relayOptions` added to its `vault relay serve`.
    init(store: String? = nil, relayOptions: [String] = []) throws {
        relay = try BackgroundProcess(VaultBinary.path, ["relay", "serve", "--listen", "127.0.0.1:0", "--sweep-interval", "1",
                                                         "--store", store ?? "sqlite:" + directory.file("relay.db")] + relayOptions,
                                      environment: clock.environment, logPath: directory.file("relay.log"))
        for user in [alice, reader] { user.vault.environment.merge(clock.environment) { $1 } }
        _ = try relay.waitFor("fingerprint ", timeout: 60)
        let line = relay.log.split(separator: "\n").first { $0.contains("listening on ") } ?? ""
        url = String(line.split(separator: " ").last ?? "")
        try alice.initialize("alice")
        try alice.ok("relay", "add", "r1", url, "--yes")
    }

    deinit { _ = relay.stop(SIGKILL) }

    /// Creates a link and returns it.
    func create(_ arguments: [String] = [], stdin: String = "") throws -> String {
        try alice.ok(["link", "create"] + arguments, stdin: stdin).trimmingCharacters(in: .newlines)
    }

    /// A plain request to the relay, as a browser or a scanner would make it.
    func request(_ method: String, _ path: String, body: Data? = nil) async throws -> (Int, Data, HTTPURLResponse) {
        try await Self.request(url, method, path, body: body)
    }

    static func request(_ url: String, _ method: String, _ path: String, body: Data? = nil) async throws -> (Int, Data, HTTPURLResponse) {
        var request = URLRequest(url: URL(string: url + path)!)
        request.httpMethod = method
        request.httpBody = body
        let (data, response) = try await URLSession.shared.data(for: request)
        let http = response as! HTTPURLResponse
        return (http.statusCode, data, http)
    }

    /// The claim secret of `link`, as the page derives it.
    static func claimBody(_ link: String, password: String? = nil) throws -> Data {
        let address = try LinkAddress(parsing: link)
        let keys = try LinkKeys(fragment: address.fragment, password: password.map { SecureBytes(copying: Array($0.utf8)) },
                                iterations: password == nil ? 0 : LinkKeys.defaultIterations)
        return try JSONEncoder().encode(LinkAPI.Claim(claim: keys.claim.withUnsafeBytes { Base64URL.encode(Array($0)) }))
    }

    static func id(_ link: String) throws -> String { Base64URL.encode(try LinkAddress(parsing: link).id) }
}

@Suite(.serialized) struct LinkTests {
    @Test func aNoteOpensForEachViewThenIsGone() throws {
        let world = try LinkWorld()
        let link = try world.create(["--views", "2"], stdin: "the door code is 4711\n")
        #expect(link.hasPrefix(world.url + "/s/") && link.contains("#"))
        let list = try world.alice.ok("link", "list")
        #expect(list.contains("2 of 2 views left"), "\(list)")
        for left in ["1 view left", "that was the last view"] {
            let opened = try world.reader.vault.run(["link", "open", link])
            #expect(opened.status == 0, "\(opened.stderr)")
            #expect(opened.stdout == "the door code is 4711\n")
            #expect(opened.stderr.contains(left), "\(opened.stderr)")
        }
        let gone = try world.reader.fails("link", "open", link)
        #expect(gone.contains("this link has expired, was used up, or never existed"), "\(gone)")
        #expect(try world.alice.ok("link", "list").contains("gone"))
    }

    /// A view cannot be given back, so what can fail on this machine fails before one is
    /// claimed: `-o` naming a file that exists or a directory, a password file missing.
    @Test func aMistakeHereCostsNoView() throws {
        let world = try LinkWorld()
        let link = try world.create(["--views", "1"], stdin: "only once")
        let taken = try world.reader.directory.write("taken.txt", Array("mine".utf8))
        let exists = try world.reader.fails("link", "open", link, "-o", taken)
        #expect(exists.contains("already exists"), "\(exists)")
        #expect(FileManager.default.contents(atPath: taken) == Data("mine".utf8))
        let directory = try world.reader.fails("link", "open", link, "-o", world.reader.directory.path)
        #expect(directory.hasPrefix("vault: error: "), "\(directory)")
        let forced = try world.reader.fails("link", "open", link, "-o", world.reader.directory.path, "--force")
        #expect(forced.contains("Is a directory"), "\(forced)")
        let missing = try world.reader.fails("link", "open", link, "--password-file", world.reader.directory.file("no-such-file"))
        #expect(missing.contains("no-such-file"), "\(missing)")

        let opened = try world.reader.vault.run(["link", "open", link])
        #expect(opened.status == 0 && opened.stdout == "only once", "\(opened.stderr)")
        #expect(opened.stderr.contains("that was the last view"), "\(opened.stderr)")
    }

    /// Issue 32 (L2): the link, key included, need not be on the command line, which any
    /// local user reads in /proc/PID/cmdline. Typed on the terminal (not echoed), it is not
    /// in vault's command line while vault waits at the password prompt; from standard input
    /// (`-`) it opens too. With neither, vault says how to give it.
    @Test func theLinkStaysOffTheCommandLine() throws {
        let world = try LinkWorld()
        let password = try world.alice.directory.write("pw", Array("correct horse\n".utf8))
        let link = try world.create(["--views", "2", "--password-file", password], stdin: "behind a password")
        let key = String(link[link.index(after: link.firstIndex(of: "#")!)...])
        let id = try LinkWorld.id(link)

        let session = try world.reader.vault.interactive("link", "open")
        try session.expect("Link (not shown as you type or paste it): ")
        session.send(link)
        try session.expect("Password for the link: ")
        let commandLine = try Data(contentsOf: URL(fileURLWithPath: "/proc/\(session.processID)/cmdline"))
        let arguments = String(decoding: commandLine, as: UTF8.self).split(separator: "\0").map(String.init)
        #expect(arguments.count == 3 && arguments.dropFirst().elementsEqual(["link", "open"]), "\(arguments)")
        #expect(!arguments.contains { $0.contains(key) || $0.contains(id) }, "\(arguments)")
        #expect(!session.transcript.contains(key), "the key was echoed: \(session.transcript)")
        session.send("correct horse")
        let opened = session.finish()
        #expect(opened.status == 0, "\(opened.stderr)")
        #expect(opened.stdout == "behind a password" && opened.stderr.contains("1 view left"), "\(opened.stderr)")

        let piped = try world.reader.vault.run(["link", "open", "-", "--password-file", password], stdin: Array((link + "\n").utf8))
        #expect(piped.status == 0 && piped.stdout == "behind a password", "\(piped.stderr)")
        #expect(piped.stderr.contains("that was the last view"), "\(piped.stderr)")

        // Given as an argument after all: out of vault's command line once it runs.
        let pasted = try world.create(["--password-file", password], stdin: "pasted")
        let pastedKey = String(pasted[pasted.index(after: pasted.firstIndex(of: "#")!)...])
        let given = try world.reader.vault.interactive("link", "open", pasted)
        try given.expect("Password for the link: ")
        let givenLine = try Data(contentsOf: URL(fileURLWithPath: "/proc/\(given.processID)/cmdline"))
        #expect(!String(decoding: givenLine, as: UTF8.self).contains(pastedKey), "\(givenLine)")
        given.send("correct horse")
        #expect(given.finish().status == 0)

        let nothing = try world.reader.fails("link", "open")
        #expect(nothing.contains("vault: error: no link given, and no terminal to ask for it on"), "\(nothing)")
        #expect(nothing.contains("vault: hint: give it on standard input: vault link open - < FILE"), "\(nothing)")
        #expect(try world.reader.fails("link", "open", "-").contains("standard input holds no link"))
    }

    /// Issue 32: `link create` with several relays pinned and none chosen names them; `link
    /// list` has a header, as the other lists do.
    @Test func severalRelaysAreNamedAndTheListHasAHeader() throws {
        let world = try LinkWorld()
        try world.alice.ok("relay", "add", "backup", world.url, "--yes")
        let which = try world.alice.fails("link", "create", stdin: "x")
        #expect(which.contains("vault: error: 2 relays are pinned (backup, r1); say which"), "\(which)")
        #expect(which.contains("vault: hint: give --relay NAME"), "\(which)")
        let link = try world.create(["--relay", "r1", "--views", "3"], stdin: "listed")
        let lines = try world.alice.ok("link", "list").split(separator: "\n")
        try #require(lines.count == 2, "\(lines)")
        #expect(lines[0].hasPrefix("ID ") && lines[0].contains("  RELAY  TYPE  SIZE  ") && lines[0].hasSuffix("VIEWS"), "\(lines)")
        #expect(lines[1].hasPrefix(try LinkWorld.id(link) + "  r1 ") && lines[1].hasSuffix("3 of 3 views left"), "\(lines)")
        #expect(try world.alice.ok("link", "list").contains("note"))
    }

    @Test(arguments: [0, 1, 65535, 65536, 65537, 10_000_000])
    func aFileOfEverySizeEdgeOpensWhole(size: Int) throws {
        let world = try LinkWorld()
        let file = world.alice.directory.file("plan.bin")
        let content = SecureRandom().bytes(size)
        try Data(content).write(to: URL(fileURLWithPath: file))
        let link = try world.create([file])
        let out = world.reader.directory.file("got")
        let opened = try world.reader.vault.run(["link", "open", link, "-o", out])
        #expect(opened.status == 0, "\(opened.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: out)) == Data(content))
        #expect(opened.stderr.contains("opened file plan.bin"), "\(opened.stderr)")
    }

    @Test func aWrongPasswordUsesNoViewAndTheRightOneOpens() throws {
        let world = try LinkWorld()
        let right = try world.alice.directory.write("pw", Array("correct horse\n".utf8))
        let wrong = try world.alice.directory.write("bad", Array("wrong horse\n".utf8))
        let link = try world.create(["--password-file", right], stdin: "behind a password")
        let refused = try world.reader.fails("link", "open", link, "--password-file", wrong)
        #expect(refused.contains("the password is wrong (no view was used)"), "\(refused)")
        // Without a terminal or a file, it says what it needs.
        #expect(try world.reader.fails("link", "open", link).contains("password"))
        // A link cut short is refused before any claim, while the link still lives: cut
        // mid-salt (a length no fragment has), or cut to exactly a key's 43 characters,
        // which only the relay's "needs a password" can tell from a password-less link.
        let fragment = link[link.index(after: link.firstIndex(of: "#")!)...]
        #expect(fragment.count == 64)
        for cut in [String(link.dropLast(10)), String(link.dropLast(fragment.count - 43))] {
            let incomplete = try world.reader.fails("link", "open", cut)
            #expect(incomplete.contains("incomplete or damaged"), "\(incomplete)")
        }
        let opened = try world.reader.vault.run(["link", "open", link, "--password-file", right])
        #expect(opened.stdout == "behind a password", "\(opened.stderr)")
    }

    @Test func aWrongKeyAndADamagedLinkShowNothing() async throws {
        let world = try LinkWorld()
        let link = try world.create([], stdin: "keep me")
        var wrongKey = Array(link)
        let last = wrongKey.count - 5
        wrongKey[last] = wrongKey[last] == "A" ? "B" : "A"
        let refused = try world.reader.fails("link", "open", String(wrongKey))
        #expect(refused.contains("the link's key is wrong (no view was used)"), "\(refused)")
        // The relay's copy damaged: the reader is told, and sees none of it.
        try await DatabaseQueue.beside(world.directory.file("relay.db")).write { db in
            try db.execute(sql: "UPDATE link_chunks SET bytes = substr(bytes, 1, 20) || zeroblob(1) || substr(bytes, 22)")
        }
        let damaged = try world.reader.fails("link", "open", link)
        #expect(damaged.contains("the key is wrong or the content was damaged"), "\(damaged)")
        // An id of 22 characters whose last one no 16 bytes encode ('B' has bits past them).
        let hash = link.firstIndex(of: "#")!
        let badID = String(link[..<link.index(before: hash)]) + "B" + String(link[hash...])
        let refusedID = try world.reader.fails("link", "open", badID)
        #expect(refusedID.contains("its id is damaged or cut short"), "\(refusedID)")
    }

    /// Previewers and scanners GET the page and the status, and never consume a view; the
    /// page comes with its locks on.
    @Test func fetchesWithoutTheKeyConsumeNothing() async throws {
        let world = try LinkWorld()
        let link = try world.create([], stdin: "for your eyes")
        let id = try LinkWorld.id(link)
        for _ in 0..<20 {
            let (status, page, response) = try await world.request("GET", "/s/" + id)
            #expect(status == 200)
            #expect(String(decoding: page, as: UTF8.self).contains("/assets/link.js"))
            #expect(response.value(forHTTPHeaderField: "Content-Security-Policy")?.contains("default-src 'none'") == true)
            #expect(response.value(forHTTPHeaderField: "Referrer-Policy") == "no-referrer")
            #expect(response.value(forHTTPHeaderField: "Cache-Control") == "no-store")
            let (state, body, _) = try await world.request("GET", "/links/\(id)/status")
            let answer = try JSONDecoder().decode(LinkAPI.Status.self, from: body)
            #expect(state == 200 && !answer.password && answer.iterations == nil && answer.views == 1, "\(String(decoding: body, as: UTF8.self))")
        }
        // Claims without the key: refused, and no view spent.
        for _ in 0..<3 {
            let (claim, _, _) = try await world.request("POST", "/links/\(id)/claim", body: Data(#"{"claim":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}"#.utf8))
            #expect(claim == 403)
        }
        let opened = try world.reader.vault.run(["link", "open", link])
        #expect(opened.stdout == "for your eyes", "\(opened.stderr)")
    }

    /// Fifty claims of a one-view link at once: exactly one gets it.
    @Test func concurrentClaimsOfTheLastViewGiveOneSuccess() async throws {
        let world = try LinkWorld()
        try await Self.race(world)
    }

    /// Fifty claims of one fresh one-view link, sent round-robin to `urls` (processes of
    /// one relay), all at once.
    static func race(_ world: LinkWorld, urls: [String]? = nil) async throws {
        let link = try world.create([], stdin: "only once")
        let id = try LinkWorld.id(link)
        let body = try LinkWorld.claimBody(link)
        let targets = urls ?? [world.url]
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for claim in 0..<50 {
                let url = targets[claim % targets.count]
                group.addTask { try await LinkWorld.request(url, "POST", "/links/\(id)/claim", body: body).0 }
            }
            var all: [Int] = []
            for try await status in group { all.append(status) }
            return all
        }
        #expect(statuses.filter { $0 == 200 }.count == 1, "\(statuses)")
        // The rest find it gone (404), or find the link's attempts spent (429): every claim
        // spends one before its key is compared and gets it back after (M1), so more than
        // the burst of them at that point at once, as on a loaded machine, are refused so.
        #expect(statuses.allSatisfy { $0 == 200 || $0 == 404 || $0 == 429 }, "\(statuses)")
        let after = try await world.request("GET", "/links/\(id)/status").0
        #expect(after == 404)
    }

    @Test func aLinkPastItsTimeIsGoneAndRmDeletesOne() async throws {
        let world = try LinkWorld()
        let short = try world.create(["--expires", "1s"], stdin: "brief")
        world.clock.advance(by: 2)
        #expect(try world.reader.fails("link", "open", short).contains("expired, was used up, or never existed"))
        let link = try world.create([], stdin: "take it back")
        // After "--": an id may start with "-".
        try world.alice.ok("link", "rm", "--yes", "--", try LinkWorld.id(link))
        #expect(try world.reader.fails("link", "open", link).contains("expired, was used up, or never existed"))
        #expect(try world.alice.fails("link", "rm", "--yes", "--", try LinkWorld.id(link)).contains("no link of yours"))
    }

    /// An independent implementation of the format (Tests/Interop/link_reference.py, with
    /// Python's `cryptography`) opens what vault stored, and vault opens what it made.
    @Test func theReferenceImplementationAgrees() async throws {
        let world = try LinkWorld()
        let link = try world.create([], stdin: "read by python")
        let address = try LinkAddress(parsing: link)
        let (status, blob, _) = try await world.request("POST", "/links/\(Base64URL.encode(address.id))/claim", body: try LinkWorld.claimBody(link))
        #expect(status == 200)
        // As `--fragment=…`: a base64url fragment may start with "-", which argparse would take for an option.
        let fragment = String(link.split(separator: "#").last!)
        let decoded = try ProcessRunner.run("/usr/bin/python3", [LinkInterop.script, "decode", "--fragment=" + fragment], stdin: Array(blob))
        #expect(decoded.status == 0, "\(decoded.stderr)")
        #expect(decoded.stdout == "read by python")

        let encoded = try ProcessRunner.run("/usr/bin/python3", [LinkInterop.script, "encode", "--type", "file", "--name", "from python.txt"],
                                            stdin: Array("made by python".utf8))
        #expect(encoded.status == 0, "\(encoded.stderr)")
        let made = try JSONSerialization.jsonObject(with: Data(encoded.stdoutBytes)) as! [String: Any]
        let bytes = Data(base64Encoded: made["blob_b64"] as! String)!
        var request = URLRequest(url: URL(string: world.url + "/links")!)
        request.httpMethod = "POST"
        request.httpBody = bytes
        for (name, value) in [("Vault-Link-TTL", "600"), ("Vault-Link-Views", "1"), ("Vault-Link-Iterations", "0"),
                              ("Vault-Link-Claim-Hash", made["claim_hash"] as! String),
                              ("Vault-Link-Delete-Hash", Base64URL.encode(sha256([1, 2, 3])))] {
            request.setValue(value, forHTTPHeaderField: name)
        }
        let (answer, response) = try await URLSession.shared.data(for: request)
        #expect((response as! HTTPURLResponse).statusCode == 201)
        let created = try JSONDecoder().decode(LinkAPI.Created.self, from: answer)
        let out = world.reader.directory.file("py.txt")
        let opened = try world.reader.vault.run(["link", "open", "\(world.url)/s/\(created.id)#\(made["fragment"] as! String)", "-o", out])
        #expect(opened.status == 0, "\(opened.stderr)")
        #expect(try String(contentsOfFile: out, encoding: .utf8) == "made by python")
        #expect(opened.stderr.contains("opened file from python.txt"), "\(opened.stderr)")
    }
}

enum LinkInterop {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
    static let script = root.appendingPathComponent("Tests/Interop/link_reference.py").path
    static let browser = root.appendingPathComponent("Tests/Interop/browser.py").path
}
