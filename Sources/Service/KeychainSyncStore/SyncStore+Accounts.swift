import Foundation
import KeychainBytes

/// A device as the server stores it.
public struct StoredDevice: Sendable, Equatable {
    public var id: Data
    public var signingKey: Data
    public var encryptionKey: Data
    public var name: String
    /// 1 waiting for approval, 2 trusted, 3 removed.
    public var status: Int64

    public init(id: Data, signingKey: Data, encryptionKey: Data, name: String, status: Int64) {
        self.id = id
        self.signingKey = signingKey
        self.encryptionKey = encryptionKey
        self.name = name
        self.status = status
    }
}

/// What a recovery secret's check came to.
public enum RecoveryCheck: Sendable, Equatable {
    case accepted
    /// Wrong; this many guesses are left.
    case rejected(remaining: Int64)
    /// The account refuses every guess: too many were wrong.
    case locked
    case noAccount
}

/// Accounts, devices, trust views, zone key shares and heads: what the server keeps of an account's
/// trust, never checking more than the signatures (the devices decide whom they trust).
extension SyncStore {
    public static let trusted: Int64 = 2
    public static let pending: Int64 = 1
    public static let removed: Int64 = 3

    /// What making an account came to.
    public enum CreateOutcome: Sendable, Equatable {
        case made
        case exists
        /// The database took its hour's new accounts already.
        case limited
    }

    /// Makes an account with its first view, its founding device (trusted), its recovery verifier and
    /// its escrow, unless it exists or the hour's new accounts are made (`SyncLimits`).
    public func createAccount(
        _ account: Data, salt: Data, verifier: Data, escrow: Data, genesis: Data, founder: StoredDevice
    ) throws(SyncStoreError) -> CreateOutcome {
        try retrying { () throws(SyncStoreError) in
            try withConnection { (connection) throws(SyncStoreError) in
                try connection.transaction { () throws(SyncStoreError) -> CreateOutcome in
                    if limits.newAccountsPerHour > 0 {
                        // One count over every account (the only statement that does not name one): an
                        // admission limit, serialized so that racing servers do not both pass it.
                        try connection.run("SELECT pg_advisory_xact_lock(7105)")
                        let recent = try connection.run(
                            "SELECT count(*) FROM accounts WHERE created_at > now() - interval '1 hour'")
                        guard try recent.integer(0, 0) < limits.newAccountsPerHour else { return .limited }
                    }
                    let made = try connection.run(
                        """
                        INSERT INTO accounts (account_id, recovery_salt, recovery_verifier, escrow) VALUES ($1, $2, $3, $4)
                        ON CONFLICT (account_id) DO NOTHING
                        """, [.bytes(account), .bytes(salt), .bytes(verifier), .bytes(escrow)])
                    guard made.affected == 1 else { return .exists }
                    _ = try insertView(account: account, epoch: 1, view: genesis, connection)
                    try Self.upsert(founder, account: account, connection)
                    return .made
                }
            }
        }
    }

    private static func upsert(_ device: StoredDevice, account: Data, _ connection: PostgresConnection)
        throws(SyncStoreError)
    {
        try connection.run(
            """
            INSERT INTO devices (account_id, device_id, signing_key, encryption_key, name, status)
            VALUES ($1, $2, $3, $4, $5, $6)
            ON CONFLICT (account_id, device_id) DO UPDATE SET status = EXCLUDED.status
            """,
            [
                .bytes(account), .bytes(device.id), .bytes(device.signingKey), .bytes(device.encryptionKey),
                .text(device.name), .integer(device.status),
            ])
    }

    /// Whether the account exists, and the device's status in it (nil: unknown to it).
    public func standing(account: Data, device: Data) throws(SyncStoreError) -> (exists: Bool, status: Int64?) {
        try withConnection { (connection) throws(SyncStoreError) in
            let rows = try connection.run(
                """
                SELECT (SELECT status FROM devices WHERE account_id = $1 AND device_id = $2)
                FROM accounts WHERE account_id = $1
                """, [.bytes(account), .bytes(device)])
            guard !rows.values.isEmpty else { return (false, nil) }
            return (true, rows.values[0][0] == nil ? nil : try rows.integer(0, 0))
        }
    }

    /// The salt a device stretches the recovery secret with.
    public func recoverySalt(account: Data) throws(SyncStoreError) -> Data? {
        try withConnection { (connection) throws(SyncStoreError) in
            let rows = try connection.run(
                "SELECT recovery_salt FROM accounts WHERE account_id = $1", [.bytes(account)])
            return rows.values.first?.first ?? nil
        }
    }

    /// Checks a key derived from the recovery secret against the account's verifier, counting a wrong
    /// one in the database (so every server of the account shares the count) and refusing every
    /// guess once `limit` were wrong. A right one sets the count back to zero.
    ///
    /// - Parameter hashed: SHA-256 of the key the device derived (what the verifier holds).
    public func checkRecovery(account: Data, hashed: Data, limit: Int64) throws(SyncStoreError) -> RecoveryCheck {
        try retrying { () throws(SyncStoreError) in
            try withConnection { (connection) throws(SyncStoreError) in
                try connection.transaction { () throws(SyncStoreError) -> RecoveryCheck in
                    let rows = try connection.run(
                        "SELECT recovery_verifier, recovery_failures FROM accounts WHERE account_id = $1 FOR UPDATE",
                        [.bytes(account)])
                    guard !rows.values.isEmpty, let verifier = rows.values[0][0] ?? nil else { return .noAccount }
                    let failures = try rows.integer(0, 1)
                    guard failures < limit else { return .locked }
                    if ConstantTime.equal(verifier, hashed) {
                        try connection.run(
                            "UPDATE accounts SET recovery_failures = 0 WHERE account_id = $1", [.bytes(account)])
                        return .accepted
                    }
                    try connection.run(
                        "UPDATE accounts SET recovery_failures = recovery_failures + 1 WHERE account_id = $1",
                        [.bytes(account)])
                    return failures + 1 >= limit ? .locked : .rejected(remaining: limit - failures - 1)
                }
            }
        }
    }

    /// Sets the account's count of wrong recovery secrets back to zero; returns what it was.
    public func resetRecoveryFailures(account: Data) throws(SyncStoreError) -> Int64 {
        try withConnection { (connection) throws(SyncStoreError) in
            let rows = try connection.run(
                """
                UPDATE accounts a SET recovery_failures = 0 FROM accounts b
                WHERE a.account_id = $1 AND b.account_id = a.account_id RETURNING b.recovery_failures
                """, [.bytes(account)])
            return rows.values.isEmpty ? 0 : try rows.integer(0, 0)
        }
    }

    /// Adds a device that proved the recovery secret, waiting for approval (one already known keeps its
    /// status). False when the account has as many waiting as it may (`SyncLimits.waitingDevices`).
    public func addPendingDevice(account: Data, _ device: StoredDevice) throws(SyncStoreError) -> Bool {
        try retrying { () throws(SyncStoreError) in
            try withConnection { (connection) throws(SyncStoreError) in
                try connection.transaction { () throws(SyncStoreError) -> Bool in
                    try connection.run("SELECT 1 FROM accounts WHERE account_id = $1 FOR UPDATE", [.bytes(account)])
                    let waiting = try connection.run(
                        "SELECT count(*) FROM devices WHERE account_id = $1 AND status = 1 AND device_id <> $2",
                        [.bytes(account), .bytes(device.id)])
                    guard try waiting.integer(0, 0) < limits.waitingDevices else { return false }
                    try connection.run(
                        """
                        INSERT INTO devices (account_id, device_id, signing_key, encryption_key, name, status)
                        VALUES ($1, $2, $3, $4, $5, 1) ON CONFLICT (account_id, device_id) DO NOTHING
                        """,
                        [
                            .bytes(account), .bytes(device.id), .bytes(device.signingKey),
                            .bytes(device.encryptionKey), .text(device.name),
                        ])
                    return true
                }
            }
        }
    }

    public func devices(account: Data) throws(SyncStoreError) -> [StoredDevice] {
        try withConnection { (connection) throws(SyncStoreError) in
            let rows = try connection.run(
                """
                SELECT device_id, signing_key, encryption_key, convert_to(name, 'UTF8'), status FROM devices
                WHERE account_id = $1 ORDER BY device_id
                """, [.bytes(account)])
            return try rows.values.indices.map { (row) throws(SyncStoreError) in
                StoredDevice(
                    id: try rows.bytes(row, 0), signingKey: try rows.bytes(row, 1),
                    encryptionKey: try rows.bytes(row, 2),
                    name: String(decoding: try rows.bytes(row, 3), as: UTF8.self), status: try rows.integer(row, 4))
            }
        }
    }

    /// Every trust view of the account, oldest first.
    public func views(account: Data) throws(SyncStoreError) -> [Data] {
        try withConnection { (connection) throws(SyncStoreError) in
            let rows = try connection.run(
                "SELECT view FROM views WHERE account_id = $1 ORDER BY epoch", [.bytes(account)])
            return try rows.values.indices.map { (row) throws(SyncStoreError) in try rows.bytes(row, 0) }
        }
    }

    /// The account's newest trust view (nil: none), without reading the others.
    public func newestView(account: Data) throws(SyncStoreError) -> Data? {
        try withConnection { (connection) throws(SyncStoreError) in
            let rows = try connection.run(
                "SELECT view FROM views WHERE account_id = $1 ORDER BY epoch DESC LIMIT 1", [.bytes(account)])
            return rows.values.isEmpty ? nil : try rows.bytes(0, 0)
        }
    }

    /// Appends a view at `epoch` (false when another took that epoch first) and sets the devices'
    /// status from it: its members trusted (added when new), every other trusted device removed.
    public func appendView(account: Data, epoch: Int64, view: Data, members: [StoredDevice]) throws(SyncStoreError)
        -> Bool
    {
        try retrying { () throws(SyncStoreError) in
            try withConnection { (connection) throws(SyncStoreError) in
                try connection.transaction { () throws(SyncStoreError) -> Bool in
                    try connection.run("SELECT 1 FROM accounts WHERE account_id = $1 FOR UPDATE", [.bytes(account)])
                    guard try insertView(account: account, epoch: epoch, view: view, connection) else { return false }
                    try connection.run(
                        "UPDATE devices SET status = 3 WHERE account_id = $1 AND status = 2", [.bytes(account)])
                    for member in members {
                        var trusted = member
                        trusted.status = Self.trusted
                        try Self.upsert(trusted, account: account, connection)
                    }
                    return true
                }
            }
        }
    }

    public func putShare(account: Data, recipient: Data, generation: Int64, share: Data) throws(SyncStoreError) {
        try withConnection { (connection) throws(SyncStoreError) in
            try Self.insertShare(
                account: account, recipient: recipient, generation: generation, share: share, connection)
        }
    }

    /// A zone key share, in the caller's transaction (a newer one for the same recipient and generation
    /// replaces it).
    static func insertShare(
        account: Data, recipient: Data, generation: Int64, share: Data, _ connection: PostgresConnection
    ) throws(SyncStoreError) {
        try connection.run(
            """
            INSERT INTO shares (account_id, recipient, generation, share) VALUES ($1, $2, $3, $4)
            ON CONFLICT (account_id, recipient, generation) DO UPDATE SET share = EXCLUDED.share
            """, [.bytes(account), .bytes(recipient), .integer(generation), .bytes(share)])
    }

    /// The view at `epoch`, in the caller's transaction (which holds the account row's lock): false
    /// when the account's newest view is not the one before it. Views count in the account's quota, so
    /// a device of its own account cannot grow it without end by publishing.
    func insertView(account: Data, epoch: Int64, view: Data, _ connection: PostgresConnection)
        throws(SyncStoreError) -> Bool
    {
        let latest = try connection.run(
            "SELECT coalesce(max(epoch), 0) FROM views WHERE account_id = $1", [.bytes(account)])
        guard try latest.integer(0, 0) == epoch - 1 else { return false }
        try connection.run(
            "INSERT INTO views (account_id, epoch, view) VALUES ($1, $2, $3)",
            [.bytes(account), .integer(epoch), .bytes(view)])
        try checkQuota(account: account, adding: Int64(view.count), connection)
        return true
    }

    public func shares(account: Data, recipient: Data) throws(SyncStoreError) -> [Data] {
        try withConnection { (connection) throws(SyncStoreError) in
            let rows = try connection.run(
                "SELECT share FROM shares WHERE account_id = $1 AND recipient = $2 ORDER BY generation",
                [.bytes(account), .bytes(recipient)])
            return try rows.values.indices.map { (row) throws(SyncStoreError) in try rows.bytes(row, 0) }
        }
    }

    public func putHead(account: Data, device: Data, seq: Int64, head: Data) throws(SyncStoreError) {
        _ = try withConnection { (connection) throws(SyncStoreError) in
            try connection.run(
                """
                INSERT INTO heads (account_id, device_id, seq, head) VALUES ($1, $2, $3, $4)
                ON CONFLICT (account_id, device_id) DO UPDATE SET seq = EXCLUDED.seq, head = EXCLUDED.head
                """, [.bytes(account), .bytes(device), .integer(seq), .bytes(head)])
            try connection.run(
                "SELECT pg_notify($1, $2)", [.text(Self.notifyChannel), .text(Hex.encode(account))])
        }
    }

    public func heads(account: Data) throws(SyncStoreError) -> [Data] {
        try withConnection { (connection) throws(SyncStoreError) in
            let rows = try connection.run(
                "SELECT head FROM heads WHERE account_id = $1 ORDER BY device_id", [.bytes(account)])
            return try rows.values.indices.map { (row) throws(SyncStoreError) in try rows.bytes(row, 0) }
        }
    }

    public func lastSeq(account: Data) throws(SyncStoreError) -> Int64 {
        try withConnection { (connection) throws(SyncStoreError) in
            let rows = try connection.run("SELECT last_seq FROM accounts WHERE account_id = $1", [.bytes(account)])
            return rows.values.isEmpty ? 0 : try rows.integer(0, 0)
        }
    }

    public func escrow(account: Data) throws(SyncStoreError) -> Data? {
        try withConnection { (connection) throws(SyncStoreError) in
            let rows = try connection.run("SELECT escrow FROM accounts WHERE account_id = $1", [.bytes(account)])
            return rows.values.first?.first ?? nil
        }
    }

    /// What a recovery came to.
    public enum RecoveryOutcome: Sendable, Equatable {
        case done
        /// Another view took the epoch first.
        case staleView
        /// The log is no longer where the recovering device read it.
        case logMoved
    }

    /// A recovery, in one transaction: the recovery view at `epoch`, `device` its only trusted member
    /// (every device trusted or waiting before is removed), the new generation's shares, and the
    /// account's new recovery salt, verifier and escrow, its guess count back at zero.
    public func recoverAccount(
        _ account: Data, epoch: Int64, view: Data, device: StoredDevice, salt: Data, verifier: Data, escrow: Data,
        lastSeq: Int64, shares: [(recipient: Data, generation: Int64, share: Data)]
    ) throws(SyncStoreError) -> RecoveryOutcome {
        try retrying { () throws(SyncStoreError) in
            try withConnection { (connection) throws(SyncStoreError) in
                try connection.transaction { () throws(SyncStoreError) -> RecoveryOutcome in
                    let now = try connection.run(
                        "SELECT last_seq FROM accounts WHERE account_id = $1 FOR UPDATE", [.bytes(account)])
                    guard !now.values.isEmpty, try now.integer(0, 0) == lastSeq else { return .logMoved }
                    guard try insertView(account: account, epoch: epoch, view: view, connection) else {
                        return .staleView
                    }
                    // Every device trusted or waiting is out: those waiting proved the spent secret.
                    try connection.run(
                        "UPDATE devices SET status = 3 WHERE account_id = $1 AND status IN (1, 2)", [.bytes(account)])
                    for share in shares {
                        try Self.insertShare(
                            account: account, recipient: share.recipient, generation: share.generation,
                            share: share.share, connection)
                    }
                    var member = device
                    member.status = Self.trusted
                    try Self.upsert(member, account: account, connection)
                    try connection.run(
                        """
                        UPDATE accounts SET recovery_salt = $2, recovery_verifier = $3, escrow = $4, recovery_failures = 0
                        WHERE account_id = $1
                        """, [.bytes(account), .bytes(salt), .bytes(verifier), .bytes(escrow)])
                    return .done
                }
            }
        }
    }
}

/// Checkpoints and compaction: the log up to where every trusted device has read, and no further
/// than the newest checkpoint, is dropped; a device that joins later starts from that checkpoint.
extension SyncStore {
    /// Keeps `checkpoint` (at `seq`) as the account's newest, then drops the log up to the lowest of
    /// `seq` and the cursors of the trusted devices. Returns where the log now starts (what was dropped).
    public func putCheckpoint(account: Data, seq: Int64, checkpoint: Data) throws(SyncStoreError) -> Int64 {
        try retrying { () throws(SyncStoreError) in
            try withConnection { (connection) throws(SyncStoreError) in
                try connection.transaction { () throws(SyncStoreError) -> Int64 in
                    let account = PostgresConnection.Parameter.bytes(account)
                    try connection.run("SELECT 1 FROM accounts WHERE account_id = $1 FOR UPDATE", [account])
                    try connection.run(
                        """
                        INSERT INTO checkpoints (account_id, seq, checkpoint) VALUES ($1, $2, $3)
                        ON CONFLICT (account_id, seq) DO UPDATE SET checkpoint = EXCLUDED.checkpoint
                        """, [account, .integer(seq), .bytes(checkpoint)])
                    // One checkpoint an account: a newer one replaces it, an older one is refused.
                    let newest = try connection.run(
                        "SELECT coalesce(max(seq), 0) FROM checkpoints WHERE account_id = $1 AND seq <> $2",
                        [account, .integer(seq)])
                    guard try newest.integer(0, 0) <= seq else {
                        throw SyncStoreError(.refused, "a checkpoint older than the account's newest")
                    }
                    try connection.run(
                        "DELETE FROM checkpoints WHERE account_id = $1 AND seq <> $2", [account, .integer(seq)])
                    // Every trusted device has read up to its cursor; one that never pulled, from 0.
                    let lowest = try connection.run(
                        """
                        SELECT coalesce(min(coalesce(c.seq, 0)), 0) FROM devices d
                        LEFT JOIN cursors c ON c.account_id = d.account_id AND c.device_id = d.device_id
                        WHERE d.account_id = $1 AND d.status = 2
                        """, [account])
                    let through = min(seq, try lowest.integer(0, 0))
                    // What the log stops storing stops counting in the quota.
                    let droppedBatches = try connection.run(
                        """
                        DELETE FROM batches WHERE account_id = $1 AND last_seq <= $2
                        RETURNING octet_length(batch)::bigint
                        """, [account, .integer(through)])
                    let droppedChanges = try connection.run(
                        "DELETE FROM changes WHERE account_id = $1 AND seq <= $2", [account, .integer(through)])
                    var freed = Self.changeRowBytes * Int64(droppedChanges.affected)
                    for row in droppedBatches.values.indices { freed += try droppedBatches.integer(row, 0) }
                    try connection.run(
                        "UPDATE accounts SET stored_bytes = stored_bytes - $2 WHERE account_id = $1",
                        [account, .integer(freed)])
                    let done = try connection.run(
                        """
                        UPDATE accounts SET compacted_through = greatest(compacted_through, $2) WHERE account_id = $1
                        RETURNING compacted_through
                        """, [account, .integer(through)])
                    return try done.integer(0, 0)
                }
            }
        }
    }

    /// Where the newest checkpoint stands (0: none) and how far the log was dropped.
    public func checkpointPosition(account: Data) throws(SyncStoreError) -> (seq: Int64, compactedThrough: Int64) {
        try withConnection { (connection) throws(SyncStoreError) in
            let rows = try connection.run(
                """
                SELECT a.compacted_through,
                       coalesce((SELECT max(seq) FROM checkpoints c WHERE c.account_id = a.account_id), 0)
                FROM accounts a WHERE a.account_id = $1
                """, [.bytes(account)])
            guard !rows.values.isEmpty else { return (0, 0) }
            return (try rows.integer(0, 1), try rows.integer(0, 0))
        }
    }

    /// The newest checkpoint (nil: none).
    public func checkpoint(account: Data) throws(SyncStoreError) -> Data? {
        try withConnection { (connection) throws(SyncStoreError) in
            let rows = try connection.run(
                "SELECT checkpoint FROM checkpoints WHERE account_id = $1 ORDER BY seq DESC LIMIT 1", [.bytes(account)])
            return rows.values.isEmpty ? nil : try rows.bytes(0, 0)
        }
    }

    /// Records as they are now, by id (those the account has).
    public func records(account: Data, ids: [Data]) throws(SyncStoreError) -> [SyncRecord] {
        try withConnection { (connection) throws(SyncStoreError) in
            try Self.records(
                try connection.run(
                    """
                    SELECT record_id, version, seq, deleted, ciphertext FROM records
                    WHERE account_id = $1 AND record_id IN (SELECT decode(unnest(string_to_array($2, ',')), 'hex'))
                    """, [.bytes(account), .text(ids.map { Hex.encode($0) }.joined(separator: ","))]))
        }
    }
}
