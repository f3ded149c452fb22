import CProcessControl
import Foundation
import KeychainCrypto
import KeychainSystem
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The process at the other end of a connection, as the kernel knows it: its credentials from the
/// moment it connected, and a pidfd that keeps naming that process (never a later one given the same
/// pid). Facts read from `/proc/<pid>` count only if the pidfd's process is still alive after they
/// were read: while it lives, the pid cannot have been handed to another process.
final class PeerProcess: @unchecked Sendable {
    // Immutable after init; the descriptor is closed once, in deinit.
    let pid: Int32
    let uid: uid_t
    let gid: gid_t
    /// Names this process among all processes since boot (uid, pid and start time): where its
    /// authentication contexts live, so that a context identifier from another process names nothing.
    let contextScope: String
    private let pidfd: Int32
    /// `/proc/<pid>`, opened once: every later read goes through it, so none can reach another
    /// process that is later given the same pid (the directory of an ended process answers ESRCH).
    private let procDirectory: Int32

    /// Why a peer was not identified; the daemon closes such connections.
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// Takes the peer's credentials and a pidfd for it. `acceptedAt` (CLOCK_BOOTTIME, as
    /// `BootClock.now`) serves the fallback for kernels without SO_PEERPIDFD: a process that started
    /// after the connection was accepted cannot be the one that connected.
    init(socket: Int32, acceptedAt: UInt64) throws(Failure) {
        var pid: Int32 = 0
        var uid: UInt32 = 0
        var gid: UInt32 = 0
        guard process_control_peer_credentials(socket, &pid, &uid, &gid) == 0, pid > 0 else {
            throw Failure(description: "the kernel gave no credentials for the peer (errno \(errno))")
        }
        self.pid = pid
        self.uid = uid
        self.gid = gid
        var descriptor = process_control_peer_pidfd(socket)
        if descriptor < 0 {
            descriptor = process_control_pidfd_open(pid)
            guard descriptor >= 0 else { throw Failure(description: "process \(pid) ended before it was identified") }
            if let started = Self.startTicks(pid: pid), started > BootClock.ticks(acceptedAt) {
                close(descriptor)
                throw Failure(description: "pid \(pid) now names a process that started after the connection")
            }
        }
        let directory = open("/proc/\(pid)", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        // The executable's file too: a program the process execs into starts with no contexts.
        var executable = stat()
        let file =
            directory >= 0 && fstatat(directory, "exe", &executable, 0) == 0
            ? "\(executable.st_dev):\(executable.st_ino)" : "?"
        contextScope = "\(uid):\(pid):\(Self.startTicks(pid: pid) ?? 0):\(file)"
        // Opened after the pidfd: if the pidfd's process is alive now, the directory is that process's.
        guard directory >= 0, process_control_pidfd_alive(descriptor) == 0 else {
            if directory >= 0 { close(directory) }
            close(descriptor)
            throw Failure(description: "process \(pid) ended before it was identified")
        }
        pidfd = descriptor
        procDirectory = directory
    }

    /// The process a message bus names as the sender of a message (the bus read its credentials when it
    /// connected), taken by a pidfd at once. The bus gives a pid, not a handle: if that process ended
    /// and its pid went to another before the pidfd was opened, this is the other process; the Secret
    /// Service narrows that window (docs/security.md) but cannot close it on a bus without ProcessFD.
    init(busPeer pid: Int32, uid: uid_t) throws(Failure) {
        guard pid > 0 else { throw Failure(description: "the bus gave no process for the caller") }
        let descriptor = process_control_pidfd_open(pid)
        guard descriptor >= 0 else { throw Failure(description: "process \(pid) ended before it was identified") }
        let directory = open("/proc/\(pid)", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        var info = stat()
        // The directory's owner is the process's effective uid: it must be the uid the bus recorded.
        guard directory >= 0, fstat(directory, &info) == 0, info.st_uid == uid,
            process_control_pidfd_alive(descriptor) == 0
        else {
            if directory >= 0 { close(directory) }
            close(descriptor)
            throw Failure(description: "process \(pid) is not the bus's caller any more")
        }
        var executable = stat()
        let file =
            fstatat(directory, "exe", &executable, 0) == 0 ? "\(executable.st_dev):\(executable.st_ino)" : "?"
        self.pid = pid
        self.uid = uid
        gid = info.st_gid
        contextScope = "\(uid):\(pid):\(Self.startTicks(pid: pid) ?? 0):\(file)"
        pidfd = descriptor
        procDirectory = directory
    }

    deinit {
        close(procDirectory)
        close(pidfd)
    }

    /// The terminal session the process runs in (its session id and controlling terminal, from `stat`),
    /// which a tool's approval is kept for, as `sudo` keeps one per terminal; nil without a terminal.
    var terminalSession: String? {
        guard let text = read("stat").map(Array.init), let session = ProcText.statNumber(6, in: text),
            let terminal = ProcText.statNumber(7, in: text)
        else { return nil }
        // The session leader's start time too, as sudo keeps it: a later session given the same leader
        // pid and terminal number is another session, and inherits no approval.
        guard terminal != 0, let leader = Int32(exactly: session), leader > 0,
            let started = Self.startTicks(pid: leader), isAlive
        else { return nil }
        return "\(uid):\(session):\(started):\(terminal)"
    }

    /// The pseudo-terminal the process runs in (`/dev/pts/N`, from its `tty_nr`), when it has one and
    /// it belongs to the process's user: where a prompt for this person can ask when no graphical
    /// session can show one (a user on SSH).
    var controllingTerminal: String? {
        guard let text = read("stat").map(Array.init), let field = ProcText.statNumber(7, in: text),
            let number = Int(exactly: field), number > 0
        else { return nil }
        let major = (number >> 8) & 0xfff
        let minor = (number & 0xff) | ((number >> 12) & 0xfff00)
        // Unix98 pseudo-terminal slaves have majors 136 to 143.
        guard (136...143).contains(major) else { return nil }
        let path = "/dev/pts/\((major - 136) * 256 + minor)"
        var info = stat()
        // The node must be that terminal (the same device number, encoded alike for these) and the user's.
        guard stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFCHR, info.st_uid == uid,
            Int(info.st_rdev) == number, isAlive
        else { return nil }
        return path
    }

    /// Whether the process that connected is still running.
    var isAlive: Bool { process_control_pidfd_alive(pidfd) == 0 }

    /// The file the process runs now (its `/proc/<pid>/exe`), opened; nil when it ended.
    func openExecutable() -> Int32? {
        let descriptor = openat(procDirectory, "exe", O_RDONLY | O_CLOEXEC)
        return descriptor >= 0 ? descriptor : nil
    }

    /// The path of the running executable, as the kernel names it.
    func executablePath() -> String? {
        var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = buffer.withUnsafeMutableBufferPointer { pointer in
            pointer.baseAddress.map { base in
                base.withMemoryRebound(to: CChar.self, capacity: pointer.count) {
                    readlinkat(procDirectory, "exe", $0, pointer.count - 1)
                }
            } ?? -1
        }
        guard length > 0 else { return nil }
        return String(validating: buffer[..<length], as: UTF8.self)
    }

    /// The identity of the running executable's file (device, inode, size, times), cheap enough to
    /// compare before every request: a process that ran `exec` since the last one has another.
    func executableKey() -> ExecutableKey? {
        var info = stat()
        guard fstatat(procDirectory, "exe", &info, 0) == 0 else { return nil }
        return ExecutableKey(info)
    }

    /// Variables that make the dynamic loader run code the executable does not contain: a registered
    /// program started with them is not that program any more.
    static let injectingVariables = ["LD_PRELOAD=", "LD_AUDIT=", "LD_LIBRARY_PATH="]

    /// What the environment check found.
    enum EnvironmentCheck: Equatable {
        case clean
        /// A loader variable is set (its name).
        case injecting(String)
        /// The environment could not be read: the process is not trusted (fail closed).
        case unreadable
    }

    /// Whether a loader variable is set in the process's environment.
    func environmentCheck() -> EnvironmentCheck {
        guard let environment = readEnvironment() else { return .unreadable }
        // Entries are looked at in place: an environment may be large, and every caller's is read.
        return environment.withUnsafeBytes { bytes -> EnvironmentCheck in
            var start = 0
            while start < bytes.count {
                let end = bytes[start...].firstIndex(of: 0) ?? bytes.count
                let entry = bytes[start..<end]
                for (index, prefix) in Self.injectingPrefixes.enumerated()
                where entry.count > prefix.count && entry.starts(with: prefix) {
                    return .injecting(String(Self.injectingVariables[index].dropLast()))
                }
                start = end + 1
            }
            return .clean
        }
    }

    private static let injectingPrefixes = injectingVariables.map { Array($0.utf8) }

    /// The environment block, whole. The kernel's `environ` file reads the process's memory between the
    /// bounds its `stat` gives, and stops without an error where that memory cannot be read (the process
    /// may take every access away from it): so what it gives counts only if it is as long as those
    /// bounds say. That file is the
    /// process's own (mode 0400) and shows as root's while the process is not dumpable, so a daemon of
    /// another user may not open it without a DAC override; the same bytes are then copied from the
    /// process's memory, which CAP_SYS_PTRACE allows.
    private func readEnvironment() -> Data? {
        guard let (start, length) = environmentBounds() else { return nil }
        if let contents = read("environ"), contents.count == length { return contents }
        var contents = Data(count: length)
        if contents.isEmpty { return contents }
        let copied = contents.withUnsafeMutableBytes { buffer in
            process_control_read_memory(pid, buffer.baseAddress, start, UInt(buffer.count))
        }
        return copied == contents.count ? contents : nil
    }

    /// Where the environment lies in the process's memory (`env_start`, `env_end` in `stat`, shown only
    /// to those who may look into the process).
    private func environmentBounds() -> (start: UInt, length: Int)? {
        guard let text = read("stat").map(Array.init), let first = ProcText.statNumber(50, in: text),
            let last = ProcText.statNumber(51, in: text), let start = UInt(exactly: first),
            let finish = UInt(exactly: last), start > 0, finish >= start, finish - start <= Self.environmentLimit
        else { return nil }
        return (start, Int(finish - start))
    }

    /// An environment larger than this is not read, and not trusted (the kernel's limit for the
    /// arguments and environment together is a quarter of the stack limit; 8 MiB covers the usual).
    private static let environmentLimit: UInt = 8 << 20

    /// Whether the process is in this daemon's user namespace.
    var sharesUserNamespace: Bool {
        var theirs = stat()
        guard fstatat(procDirectory, "ns/user", &theirs, 0) == 0 else { return false }
        return theirs.st_ino == Self.ownUserNamespace.inode && theirs.st_dev == Self.ownUserNamespace.device
    }

    /// The Flatpak app id of a sandboxed process: the `name` of the `[Application]` group of the
    /// `/.flatpak-info` Flatpak puts in every sandbox's root (read through `/proc/<pid>/root`), when
    /// the process runs in a user namespace of its own, as a Flatpak sandbox does. Nil for any other
    /// process, and when the process ended while it was read.
    var flatpakAppID: String? {
        guard !sharesUserNamespace, let info = flatpakInfo(), let text = String(data: info, encoding: .utf8) else {
            return nil
        }
        var group = ""
        for line in text.split(separator: "\n") {
            if line.hasPrefix("[") {
                group = String(line)
            } else if group == "[Application]", line.hasPrefix("name=") {
                let name = String(line.dropFirst(5))
                return isAlive ? name : nil
            }
        }
        return nil
    }

    /// The sandbox's `/.flatpak-info`, which its process controls: opened without following a link and
    /// without waiting (a FIFO there would hold the caller), taken only when it is a regular file, and
    /// read to 64 KiB at most (a link to /dev/zero would otherwise never end).
    private func flatpakInfo() -> Data? {
        let limit = 64 * 1024
        let descriptor = openat(procDirectory, "root/.flatpak-info", O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_size <= limit else {
            return nil
        }
        var buffer = [UInt8](repeating: 0, count: limit + 1)
        var count = 0
        while count <= limit {
            let read = buffer.withUnsafeMutableBytes { raw -> Int in
                guard let base = raw.baseAddress else { return -1 }
                return Glibc.read(descriptor, base + count, raw.count - count)
            }
            if read < 0, errno == EINTR { continue }
            guard read > 0 else { break }
            count += read
        }
        return count <= limit ? Data(buffer[..<count]) : nil
    }

    private static let ownUserNamespace: (inode: ino_t, device: dev_t) = {
        var own = stat()
        guard stat("/proc/self/ns/user", &own) == 0 else { return (0, 0) }
        return (own.st_ino, own.st_dev)
    }()

    /// Whether other processes of its user may attach to it, read its memory or take its descriptors.
    /// The kernel shows the `/proc` files of a process that is not dumpable as root's; looking one up
    /// afresh reflects the process's setting now.
    var isDumpable: Bool {
        var info = stat()
        guard fstatat(procDirectory, "status", &info, 0) == 0 else { return true }
        return info.st_uid != 0
    }

    /// The first file the process has mapped as code, other than its executable, that is not a regular
    /// file owned by root and writable by no one else, or that is no longer the file at its path
    /// (replaced, or deleted: a memfd too). Nil when all its code is the system's.
    func foreignCode(executable: ExecutableKey) -> String? {
        guard let maps = read("maps") else { return "its memory map, which cannot be read" }
        var checked = Set<[UInt8]>()
        var foreign: String?
        ProcText.forEachLine(Array(maps)) { line in
            guard let mapping = ProcText.executableMapping(line) else { return true }
            foreign = foreignCode(mapping, executable: executable, checked: &checked)
            return foreign == nil
        }
        return foreign
    }

    /// What is foreign about one executable mapping (see `foreignCode(executable:)`), nil when it is the
    /// system's code or the executable's; `checked` holds the files already found to be the system's.
    private func foreignCode(
        _ mapping: ProcText.ExecutableMapping, executable: ExecutableKey, checked: inout Set<[UInt8]>
    ) -> String? {
        if mapping.path.first != UInt8(ascii: "/") {
            // Executable memory that no file backs: code written at run time. A preloaded library
            // can copy itself there and unmap its file, so that no path names it; ordinary programs
            // have none (the kernel's own pages excepted). A program with a JIT cannot be an app.
            let path = mapping.text
            if Self.kernelCode.contains(path) { return nil }
            return path.isEmpty ? "executable memory that no file backs (code written at run time)" : path
        }
        guard checked.insert(mapping.path).inserted else { return nil }
        // The kernel shows a newline in a path as the four characters `\012` and leaves a backslash as
        // it is: a path showing a backslash may name another file than the one mapped (a directory
        // named `a\012` linked to /usr/lib, beside the attacker's `a<newline>`). No system library's
        // path has one: such a mapping counts as foreign.
        guard let inode = mapping.inode, !mapping.path.reversed().starts(with: Self.deleted.reversed()),
            !mapping.path.contains(UInt8(ascii: "\\"))
        else {
            return mapping.text
        }
        // The file is looked up by the bytes the kernel gave, not by their repaired text.
        var info = stat()
        let found = (mapping.path + [0]).withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { name in name.baseAddress.map { lstat($0, &info) } ?? -1 }
        }
        guard found == 0, info.st_mode & S_IFMT == S_IFREG,
            UInt64(info.st_ino) == inode || Self.isOverlay(mapping.path)
        else { return mapping.text }
        if UInt64(info.st_ino) == executable.inode, UInt64(info.st_dev) == executable.device { return nil }
        if info.st_uid != 0 || info.st_mode & 0o022 != 0 { return mapping.text }
        return nil
    }

    /// What the kernel appends to the path of a mapped file that was deleted.
    private static let deleted = Array(" (deleted)".utf8)

    /// Executable mappings the kernel itself provides.
    private static let kernelCode: Set<String> = ["[vdso]", "[vsyscall]", "[vectors]", "[uprobes]", "[sigpage]"]

    /// overlayfs shows a mapped file's underlying inode in `maps` and its own in `stat`: there the
    /// comparison cannot be made, and ownership alone is checked.
    private static func isOverlay(_ path: [UInt8]) -> Bool {
        (path + [0]).withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { name in
                name.baseAddress.map { process_control_filesystem_type($0) == 0x794c_7630 } ?? false
            }
        }
    }

    /// How the process holds the client end of this connection.
    enum ConnectionHolding: Equatable {
        /// Open, and closed on exec: the process opened it for itself.
        case ownedByThisProgram
        /// Open without close-on-exec: it may have come through an `exec`, from another program.
        case inheritable
        /// Not open in this process: another process (a child, or one it was passed to) holds it.
        case notHeld
        /// The kernel would not say which socket is the client's.
        case unknown
    }

    /// Finds the client end of the connection (`socket` is the daemon's end) among the process's
    /// descriptors, and whether it is closed on exec. Each descriptor's `fdinfo` names its file by mount
    /// and inode; the directory of those is readable with the right to look into the process
    /// (CAP_SYS_PTRACE for another user's), whereas `/proc/<pid>/fd` is the process's own 0500 directory
    /// and would also need a DAC override.
    func holding(connection socket: Int32) -> ConnectionHolding {
        let peerInode = process_control_unix_peer_inode(socket)
        guard peerInode > 0, let socketMount = Self.mountID(ofOwnDescriptor: socket) else { return .unknown }
        let descriptors = openat(procDirectory, "fdinfo", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptors >= 0, let directory = fdopendir(descriptors) else {
            if descriptors >= 0 { close(descriptors) }
            return .unknown
        }
        defer { closedir(directory) }
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard Int32(name) != nil, let info = read("fdinfo/\(name)").map(Array.init) else { continue }
            // Kernels before 5.14 do not name the inode in fdinfo: the descriptors' links are read
            // instead, which needs the right to list /proc/<pid>/fd (the same user, or root).
            guard let inode = ProcText.field("ino", in: info), let mount = ProcText.field("mnt_id", in: info) else {
                return holdingByLinks(socketInode: peerInode)
            }
            guard ProcText.decimal(inode) == UInt64(peerInode), ProcText.text(mount) == socketMount else { continue }
            guard let flags = Self.descriptorFlags(info) else { return .unknown }
            return flags & Int(O_CLOEXEC) != 0 ? .ownedByThisProgram : .inheritable
        }
        return .notHeld
    }

    /// The same search through `/proc/<pid>/fd`'s links ("socket:[inode]"), for kernels whose fdinfo
    /// names no inode.
    private func holdingByLinks(socketInode: Int) -> ConnectionHolding {
        let wanted = "socket:[\(socketInode)]"
        let descriptors = openat(procDirectory, "fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptors >= 0, let directory = fdopendir(descriptors) else {
            if descriptors >= 0 { close(descriptors) }
            return .unknown
        }
        defer { closedir(directory) }
        var buffer = [CChar](repeating: 0, count: 64)
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard Int32(name) != nil else { continue }
            let length = readlinkat(dirfd(directory), name, &buffer, buffer.count - 1)
            guard length > 0,
                String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self) == wanted,
                let info = read("fdinfo/\(name)"), let flags = Self.descriptorFlags(Array(info))
            else { continue }
            return flags & Int(O_CLOEXEC) != 0 ? .ownedByThisProgram : .inheritable
        }
        return .notHeld
    }

    /// The open flags an fdinfo file gives (octal), O_CLOEXEC among them.
    private static func descriptorFlags(_ info: [UInt8]) -> Int? {
        ProcText.field("flags", in: info).flatMap { Int(ProcText.text($0), radix: 8) }
    }

    /// The mount of a descriptor of this process (for a socket: the kernel's socket filesystem), so
    /// that an inode number found in another process is known to be a socket's, not a file's that
    /// happens to have the same number on another filesystem.
    private static func mountID(ofOwnDescriptor descriptor: Int32) -> String? {
        // Every socket lives on the kernel's one socket filesystem: asked once.
        if let known = socketMount.withLock({ $0 }) { return known }
        let found = readMountID(ofOwnDescriptor: descriptor)
        if found != nil { socketMount.withLock { $0 = found } }
        return found
    }

    private static let socketMount = Mutex<String?>(nil)

    private static func readMountID(ofOwnDescriptor descriptor: Int32) -> String? {
        ProcFiles.read("/proc/self/fdinfo/\(descriptor)").flatMap { info in
            ProcText.field("mnt_id", in: Array(info)).map(ProcText.text)
        }
    }

    /// Whether a debugger is attached (another process may be steering this one).
    /// Fails closed: a status that cannot be read, or names no tracer field, counts as traced.
    func isTraced() -> Bool {
        guard let status = read("status"), let tracer = ProcText.field("TracerPid", in: Array(status)) else {
            return true
        }
        return !tracer.elementsEqual([UInt8(ascii: "0")])
    }

    /// A whole file of the process's `/proc` directory.
    private func read(_ name: String) -> Data? { ProcFiles.read(name, in: procDirectory) }

    /// When the process started, in clock ticks since boot (field 22 of `/proc/<pid>/stat`).
    private static func startTicks(pid: Int32) -> UInt64? {
        ProcFiles.read("/proc/\(pid)/stat").flatMap { ProcText.statNumber(22, in: Array($0)) }
    }
}
