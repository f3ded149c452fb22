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
        ),
        (
            2,
            """
            -- How a joining device proves the account's recovery secret: the salt it stretches the
            -- secret with, SHA-256 of the key it derives, and the wrong guesses so far (the server
            -- refuses every guess once they reach the limit). The escrow is the account's keys sealed
            -- under another key derived from the same secret, for a device that lost every other.
            ALTER TABLE accounts
                ADD COLUMN recovery_salt bytea,
                ADD COLUMN recovery_verifier bytea,
                ADD COLUMN recovery_failures bigint NOT NULL DEFAULT 0,
                ADD COLUMN escrow bytea;
            -- Devices by their public keys; status 1 waiting, 2 trusted, 3 removed.
            CREATE TABLE devices (
                account_id bytea NOT NULL,
                device_id bytea NOT NULL,
                signing_key bytea NOT NULL,
                encryption_key bytea NOT NULL,
                name text NOT NULL,
                status bigint NOT NULL,
                PRIMARY KEY (account_id, device_id)
            );
            -- The chain of trust views, each attested by a device of the one before.
            CREATE TABLE views (
                account_id bytea NOT NULL,
                epoch bigint NOT NULL,
                view bytea NOT NULL,
                PRIMARY KEY (account_id, epoch)
            );
            -- Zone keys sealed to each device, by generation.
            CREATE TABLE shares (
                account_id bytea NOT NULL,
                recipient bytea NOT NULL,
                generation bigint NOT NULL,
                share bytea NOT NULL,
                PRIMARY KEY (account_id, recipient, generation)
            );
            -- Each device's newest signed position in the log.
            CREATE TABLE heads (
                account_id bytea NOT NULL,
                device_id bytea NOT NULL,
                seq bigint NOT NULL,
                head bytea NOT NULL,
                PRIMARY KEY (account_id, device_id)
            );
            -- Each push's signed statement, over the consecutive sequence numbers it took.
            CREATE TABLE batches (
                account_id bytea NOT NULL,
                first_seq bigint NOT NULL,
                last_seq bigint NOT NULL,
                writer bytea NOT NULL,
                batch bytea NOT NULL,
                PRIMARY KEY (account_id, first_seq)
            );
            CREATE INDEX batches_by_last ON batches (account_id, last_seq);
            -- The ciphertexts of the last versions a record had before its current one.
            CREATE TABLE history (
                account_id bytea NOT NULL,
                record_id bytea NOT NULL,
                version bigint NOT NULL,
                ciphertext bytea NOT NULL,
                PRIMARY KEY (account_id, record_id, version)
            );
            """
        ),
        (
            3,
            """
            -- What each account stores (records, history, the log, views): its quota is checked against
            -- this. A change row counts for 64 bytes.
            ALTER TABLE accounts ADD COLUMN stored_bytes bigint NOT NULL DEFAULT 0;
            UPDATE accounts a SET stored_bytes =
                coalesce((SELECT sum(padded_size) FROM records r WHERE r.account_id = a.account_id), 0)
                + coalesce((SELECT sum(octet_length(ciphertext)) FROM history h WHERE h.account_id = a.account_id), 0)
                + coalesce((SELECT sum(octet_length(batch)) FROM batches b WHERE b.account_id = a.account_id), 0)
                + 64 * (SELECT count(*) FROM changes c WHERE c.account_id = a.account_id)
                + coalesce((SELECT sum(octet_length(view)) FROM views v WHERE v.account_id = a.account_id), 0);
            """
        ),
        (
            4,
            """
            -- The newest checkpoint a trusted device signed, and how far the log was dropped.
            CREATE TABLE checkpoints (
                account_id bytea NOT NULL,
                seq bigint NOT NULL,
                checkpoint bytea NOT NULL,
                PRIMARY KEY (account_id, seq)
            );
            ALTER TABLE accounts ADD COLUMN compacted_through bigint NOT NULL DEFAULT 0;
            """
        ),
    ]
}
