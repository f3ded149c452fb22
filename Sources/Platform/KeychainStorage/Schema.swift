/// The database layout. Only bookkeeping is in clear: the row's random identity, its item class and
/// protection class numbers, and the synchronizable and tombstone flags. Every attribute value, the
/// access group included, is either sealed or reduced to a keyed digest.
enum Schema {
    static let version: Int64 = 1

    static let statements = [
        """
        CREATE TABLE IF NOT EXISTS keychain_info(
            name TEXT PRIMARY KEY NOT NULL,
            value INTEGER NOT NULL)
        """,
        """
        CREATE TABLE IF NOT EXISTS items(
            rowid INTEGER PRIMARY KEY,
            persistref BLOB NOT NULL UNIQUE,
            class INTEGER NOT NULL,
            keyclass INTEGER NOT NULL,
            agrp BLOB NOT NULL,
            sync INTEGER NOT NULL,
            tomb INTEGER NOT NULL,
            pk BLOB NOT NULL UNIQUE,
            lookup BLOB NOT NULL,
            metadata BLOB NOT NULL,
            secret BLOB NOT NULL)
        """,
        "CREATE INDEX IF NOT EXISTS items_lookup ON items(lookup)",
        "CREATE INDEX IF NOT EXISTS items_class ON items(class, tomb)",
        "CREATE INDEX IF NOT EXISTS items_keyclass ON items(keyclass)",
        """
        CREATE TABLE IF NOT EXISTS attribute_index(
            digest BLOB NOT NULL,
            item INTEGER NOT NULL,
            PRIMARY KEY(digest, item)) WITHOUT ROWID
        """,
        "CREATE INDEX IF NOT EXISTS attribute_index_item ON attribute_index(item)",
        """
        CREATE TRIGGER IF NOT EXISTS items_delete_index AFTER DELETE ON items BEGIN
            DELETE FROM attribute_index WHERE item = old.rowid;
        END
        """,
    ]
}
