/// The sync server's schema, as numbered migrations: the server applies, in one transaction each, those
/// its database has not had yet, and never changes one that shipped.
///
/// The server stores only what it must: account ids, opaque record ids, versions, sequence numbers,
/// sizes padded to buckets, and ciphertext. No service, account, label, group or secret is ever in a
/// column. Every primary key and index starts with `account_id`, so that an account's rows sit
/// together and the tables can be distributed by it (Citus's `create_distributed_table(…,
/// 'account_id')`, CockroachDB's and YugabyteDB's primary-key ranges; docs/sync.md).
enum Migrations {
    static let all: [(version: Int64, sql: String)] = [
        (
            1,
            """
            CREATE TABLE accounts (
                account_id bytea PRIMARY KEY,
                created_at timestamptz NOT NULL DEFAULT now(),
                -- The last sequence number given to one of the account's changes.
                last_seq bigint NOT NULL DEFAULT 0
            );
            CREATE TABLE records (
                account_id bytea NOT NULL,
                record_id bytea NOT NULL,
                version bigint NOT NULL CHECK (version > 0),
                seq bigint NOT NULL,
                padded_size integer NOT NULL,
                deleted boolean NOT NULL,
                ciphertext bytea NOT NULL,
                PRIMARY KEY (account_id, record_id)
            );
            -- What changed after a device's cursor, in order.
            CREATE INDEX records_by_seq ON records (account_id, seq);
            -- The durable change log devices pull from, by cursor: NOTIFY only wakes them.
            CREATE TABLE changes (
                account_id bytea NOT NULL,
                seq bigint NOT NULL,
                record_id bytea NOT NULL,
                version bigint NOT NULL,
                PRIMARY KEY (account_id, seq)
            );
            CREATE TABLE cursors (
                account_id bytea NOT NULL,
                device_id bytea NOT NULL,
                seq bigint NOT NULL,
                PRIMARY KEY (account_id, device_id)
            );
            """
        )
    ]
}
