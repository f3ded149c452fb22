/// Usage texts, in the shape of macOS's `security help`.
package enum Usage {
    /// The match flags of find- and delete-generic-password.
    private static let genericMatchOptions = """
            -a  Match "account" string
            -c  Match "creator" (four-character code)
            -C  Match "type" (four-character code)
            -D  Match "kind" string
            -G  Match "value" string (generic attribute)
            -j  Match "comment" string
            -l  Match "label" string
            -s  Match "service" string
        """

    package static let verbs: [(String, String, String)] = [
        (
            "add-generic-password",
            "Add a generic password item.",
            """
            Usage: add-generic-password [-a account] [-s service] [-w password] [options...] [-A accessibility] [-g group]
                -a  Specify account name (optional; if omitted, the account is empty)
                -c  Specify item creator (optional four-character code)
                -C  Specify item type (optional four-character code)
                -D  Specify kind (optional)
                -G  Specify generic attribute (optional)
                -j  Specify comment string (optional)
                -l  Specify label (if omitted, service name is used as default label)
                -s  Specify service name (required)
                -p  Specify password to be added (legacy option, equivalent to -w)
                -w  Specify password to be added. Put at end of command to be prompted (recommended);
                    when standard input is not a terminal, the password is read from it
                -X  Specify password data to be added as a hexadecimal string
                -U  Update item if it already exists (if omitted, the item cannot already exist)
                -A  Accessibility: WhenUnlocked, AfterFirstUnlock, Always, WhenUnlockedThisDeviceOnly,
                    AfterFirstUnlockThisDeviceOnly, AlwaysThisDeviceOnly, WhenPasscodeSetThisDeviceOnly
                -g  Access group (default: the first of KEYCHAIN_ACCESS_GROUPS)
                -S  Synchronizable: the item syncs to the account's other devices (security sync)
            """
        ),
        (
            "find-generic-password",
            "Find a generic password item.",
            """
            Usage: find-generic-password [-a account] [-s service] [options...] [-g] [-w] [--json]
            \(genericMatchOptions)
                -g  Display the password for the item found (on standard error)
                -w  Display only the password on standard output
                --json           Print the item as a JSON object (data only with -g or -w)
                --access-group   Match items of this access group only
                --synchronizable yes|no|any
                                 Match items that sync, that do not, or either (without it: those that do not)
            """
        ),
        (
            "delete-generic-password",
            "Delete a generic password item.",
            """
            Usage: delete-generic-password [-a account] [-s service] [options...] [--access-group group]
            \(genericMatchOptions)
                --synchronizable yes|no|any
                                 Match items that sync, that do not, or either (without it: those that do not)
            """
        ),
        (
            "add-internet-password",
            "Add an internet password item.",
            """
            Usage: add-internet-password [-a account] [-s server] [-w password] [options...] [-A accessibility] [-g group]
                -a  Specify account name (required)
                -c  Specify item creator (optional four-character code)
                -C  Specify item type (optional four-character code)
                -d  Specify security domain string (optional)
                -D  Specify kind (optional)
                -j  Specify comment string (optional)
                -l  Specify label (if omitted, server name is used as default label)
                -p  Specify path string (optional)
                -P  Specify port number (optional)
                -r  Specify protocol (optional four-character SecProtocolType, e.g. "http", "ftp ")
                -s  Specify server name (required)
                -t  Specify authentication type (optional four-character SecAuthenticationType, e.g. "dflt")
                -w  Specify password to be added. Put at end of command to be prompted (recommended)
                -X  Specify password data to be added as a hexadecimal string
                -U  Update item if it already exists (if omitted, the item cannot already exist)
                -A  Accessibility (see add-generic-password)
                -g  Access group
                -S  Synchronizable: the item syncs to the account's other devices (security sync)
            """
        ),
        (
            "find-internet-password",
            "Find an internet password item.",
            """
            Usage: find-internet-password [-a account] [-s server] [options...] [-g] [-w] [--json]
                -a  Match "account" string
                -c  Match "creator" (four-character code)
                -C  Match "type" (four-character code)
                -d  Match "securityDomain" string
                -D  Match "kind" string
                -j  Match "comment" string
                -l  Match "label" string
                -p  Match "path" string
                -P  Match port number
                -r  Match "protocol" (four-character code)
                -s  Match "server" string
                -t  Match "authenticationType" (four-character code)
                -g  Display the password for the item found (on standard error)
                -w  Display only the password on standard output
                --json           Print the item as a JSON object (data only with -g or -w)
                --access-group   Match items of this access group only
            """
        ),
        (
            "delete-internet-password",
            "Delete an internet password item.",
            """
            Usage: delete-internet-password [-a account] [-s server] [options...] [--access-group group]
                (the match options of find-internet-password)
            """
        ),
        (
            "dump-keychain",
            "Dump the contents of the keychain.",
            """
            Usage: dump-keychain [-d] [--json] [--synchronizable yes|no|any]
                -d  Dump (decrypted) data as well
                --json  Print the items as a JSON array
                --synchronizable  Only items that sync (yes) or that do not (no); every item by default
            """
        ),
        (
            "list-items",
            "List the items, one line each, without secrets (beyond macOS).",
            """
            Usage: list-items [--json]
                Each item's class, service (or server), account, label and access group.
                --json  Print the items as a JSON array
            """
        ),
        (
            "set-keychain-password",
            "Set, change or remove the keychain's passcode.",
            """
            Usage: set-keychain-password [-o oldPassword] [-p newPassword] [-y]
                -o  Old passcode (prompted for when one is set and this is omitted)
                -p  New passcode (prompted for twice when omitted); an empty one removes the passcode,
                    which destroys WhenPasscodeSetThisDeviceOnly items
                -y  Remove without asking for confirmation
            """
        ),
        (
            "find-certificate",
            "Find a certificate item.",
            """
            Usage: find-certificate [-a] [-c name] [-e emailAddress] [-m] [-p] [-Z] [keychain...]
                -a  Find all matching certificates, not just the first one
                -c  Match on "name" when searching (a part of the label or the common name)
                -e  Match on "emailAddress" when searching
                -m  Show the email addresses in the certificate
                -p  Output certificate in pem format
                -Z  Print SHA-256 (and SHA-1) hash of the certificate
            """
        ),
        (
            "add-certificates",
            "Add certificates to the keychain.",
            """
            Usage: add-certificates [-k keychain] file...
                Each file holds one DER certificate or any number of PEM ones.
                -k  Use the specified keychain rather than the default (only this keychain is accepted)
            """
        ),
        (
            "find-identity",
            "Find an identity (certificate + private key).",
            """
            Usage: find-identity [-p policy] [-s string] [-v] [keychain...]
                -p  Specify policy to name (basic, ssl-client, ssl-server, smime, eap, ipsec, ichat, codesigning,
                    sys-default, sys-kerberos-kdc, macappstore, appleID); no policy is evaluated yet
                -s  Specify optional policy-specific string (e.g. a host name; accepted, not evaluated)
                -v  Show valid identities only: those whose certificate is within its validity dates now
                    (without trust evaluation; default is to show all identities)
                Each identity is listed with its certificate's SHA-1 hash and its label.
            """
        ),
        (
            "import",
            "Import certificates, keys or a PKCS#12 file into the keychain.",
            """
            Usage: import inputfile [-f pkcs12|x509|openssl] [-t cert|priv|pub] [-P passphrase] [-k keychain]
                   import gnome-keyring keyringfile [-w password] [-p passcode]
                   import kwallet exportfile [-p passcode]
                -f  The file's format (default: from its name, .p12 or .pfx, else from its contents); openssl
                    is an RSA or EC key in PEM or DER (PKCS#8, PKCS#1, SEC1 or SubjectPublicKeyInfo)
                -t  What the file holds: cert (x509), priv or pub (a key, -f openssl); checked against the file
                -P  The PKCS#12 file's passphrase (prompted for without echo on a terminal, else read from
                    standard input when omitted)
                -k  Import into this keychain (only this keychain is accepted)
                gnome-keyring: a keyring file (~/.local/share/keyrings/login.keyring), opened with its
                    password (-w, else prompted for on a terminal, else a line of standard input)
                kwallet: a wallet exported by KWallet Manager as XML
                    Each secret becomes a Secret Service item of the daemon's keychain, in its collection,
                    in the group of a registered app its access list names, else in the group that
                    unregistered programs share; one already there is left out. -p: the keychain's
                    passcode, which an import needs when one is set (prompted for when omitted)
            """
        ),
        (
            "export",
            "Export certificates, keys or identities from the keychain.",
            """
            Usage: export [-k keychain] [-t certs|keys|identities] [-f pemseq|pkcs12] [-P passphrase] [-o outfile]
                -t  What to export: certs (the default); keys (PKCS#8 private keys, SubjectPublicKeyInfo public
                    keys; an enclave key never leaves the keychain); identities (each certificate, then its
                    private key)
                -f  The format: pemseq (the default; PEM blocks in sequence); pkcs12 is not supported yet
                -P  The passphrase of -f pkcs12
                -o  Write to this file (default: standard output); private keys and identities need one: a new
                    file, mode 0600
            """
        ),
        ("lock-keychain", "Lock the keychain.", "Usage: lock-keychain"),
        (
            "unlock-keychain",
            "Unlock the keychain.",
            """
            Usage: unlock-keychain [-p password] [--session]
                -p         Use the given passcode (prompted for, or read from standard input, when omitted)
                --session  Hold the unlock for the login session: every later process of this user starts
                           unlocked until lock-keychain or a reboot (kept in $XDG_RUNTIME_DIR; see docs/security.md)
                Without --session, an unlock of the embedded keychain lasts for this one process; through the
                daemon an unlock holds for every client until the keychain locks.
            """
        ),
        ("show-keychain-info", "Show the keychain's lock state and passcode status.", "Usage: show-keychain-info"),
        (
            "app",
            "Register, list or remove the apps the keychain daemon serves.",
            """
            Usage: app register <executable> --application-identifier ID [--access-group G]... [--development]
                                [--tool] [--allow-interpreter] [--approval-reuse SECONDS] [-p passcode]
                   app list
                   app remove <executable> [--delete-items] [-p passcode]
                   app policy secret-service ask|allow|deny [-p passcode]
                The daemon (securityd) gives a registered executable its access groups (the first is the default;
                without any, the application identifier); any other executable gets errSecMissingEntitlement.
                The daemon hashes the executable: a changed binary is no longer the registered app.
                --development  trust the path whatever its contents (the daemon must run with --development)
                --tool         a general-purpose program (it runs what its user says): the daemon asks the user
                               (biometry, else the device passcode) before it gives it a secret. This command
                               itself is always registered so
                --allow-interpreter
                               register an interpreter (python3, bash, ...), which the daemon refuses otherwise:
                               every script of the user would be this app; its reads ask the user
                --approval-reuse S
                               how long a tool's approval holds in one terminal session (default 300; 0: ask each time)
                --delete-items with app remove: also delete the items of every access group no other registered
                               app has (iOS keeps an uninstalled app's items; this is the iOS 10.3 beta's rule)
                -p             the keychain's passcode, which a system daemon asks of a user (prompted on a terminal)
                policy secret-service
                               what the Secret Service (securityd --secret-service) does for a program that is
                               not a registered app: ask the user once per executable (path and SHA-256) and
                               keep the answer (ask, the default), let it into the group such programs share
                               (allow), or refuse it (deny)
            """
        ),
        (
            "backup",
            "Back up the keychain to a file, restore it, or show what a backup holds.",
            """
            Usage: backup create <file> [--no-password] [-p passcode]
                   backup restore <file> [-p passcode]
                   backup info <file>
                create   write every item that may leave the device to <file> (a new file, mode 0600), under a
                         backup password: typed twice on a terminal, else one line of standard input. Items of
                         the ThisDeviceOnly classes restore only onto this keychain; the others onto any keychain
                         given the password. Never included: WhenPasscodeSetThisDeviceOnly items, enclave keys,
                         items whose access control asks the user
                --no-password
                         no password: the backup restores only onto this keychain (its device root)
                restore  replace this keychain's non-synchronizable items by the backup's, in one transaction,
                         after checking the whole file; asks for the backup password
                info     what the file's header says (no password needed)
                -p       the keychain's passcode, which a daemon asks before a backup or a restore (prompted on
                         a terminal, else read from standard input before the backup password)
            """
        ),
        (
            "sync",
            "Sync the keychain's synchronizable items with the account's other devices.",
            """
            Usage: sync enroll --server ADDRESS --account NAME [--name DEVICE] [--ca FILE]
                   sync recover --server ADDRESS --account NAME [--name DEVICE] [--ca FILE]
                   sync history -s SERVICE [-a ACCOUNT] [--internet] [--version N]
                   sync devices | approve DEVICE | remove DEVICE | now | status | reset-guesses | leave   [--json]
                enroll   make this keychain a device of the account on keychain-syncd at ADDRESS (a Unix socket
                         path, HOST:PORT on loopback, or tls://HOST:PORT, whose certificate is checked against
                         the CA certificates of --ca FILE, else the system's). The first device creates the account; a later one
                         waits for a trusted device to approve it. The account's recovery secret is typed on a
                         terminal, else read as one line of standard input
                recover  every device lost: take the account onto this keychain (not enrolled) with its recovery
                         secret, then a new one (on a terminal, typed twice; else two lines of standard input).
                         Every other device is removed, the keys change, and the old secret stops working
                devices  the account's devices, each with its id and status (trusted, waiting, removed)
                approve  let a waiting device in (from a trusted device); DEVICE is its whole id, as devices lists it
                remove   take a device out; the keys change, so it reads nothing written afterwards
                now      push and pull until this keychain and the account are both current
                status   last sync, position and chain, pending changes, conflicts resolved
                history  the versions the server keeps of a synchronizable item (deleted ones too): its current
                         one and the last five before, with their dates and writers; --version N prints that
                         version's secret. -s is a generic password's service, or with --internet a server
                reset-guesses  forgive the wrong recovery secrets the account took (after 10 the server
                         refuses every secret, for joining and for recovering); from a trusted device
                leave    forget the enrollment (the items stay)
            """
        ),
        (
            "device",
            "Device scenarios: a reboot, an erase of all content and settings, a restore from a backup, a move to a TPM root.",
            """
            Usage: device reboot
                   device erase [-p passcode] [-y]
                   device restore <file> [-p passcode]
                   device migrate-root tpm [-p passcode]
                reboot   back to "before first unlock": only Always items open until the passcode is given
                         (through the daemon, for every client)
                erase    "Erase All Content and Settings": every item, the keybag and the device root are
                         deleted, and the next use makes a new keychain under a new root, so that no backup
                         made before brings ThisDeviceOnly items back. Asks for the passcode when one is set,
                         and to confirm (-y without a terminal). Through the daemon, the app registry goes too
                restore  the same as backup restore
                migrate-root tpm
                         move a keychain made with the software root to the daemon's TPM (securityd --tpm),
                         every item kept: the keybag is made anew in the chip, every item moves to new class
                         keys, and the software root's file is replaced. Asks for the passcode when one is
                         set. A TPM root never moves back ("migrate-root software" is refused)
            """
        ),
        (
            "biometry",
            "Drive the simulated biometric sensor (as the iOS Simulator's Face ID menu does).",
            """
            Usage: biometry enroll | unenroll | match | nomatch | cancel | policy <match|nomatch|cancel|ask> | status
                enroll    enroll a new set: items bound to the current set (biometryCurrentSet) no longer open
                unenroll  remove the enrolled set (biometryCurrentSet items die with it)
                match, nomatch, cancel
                          answer the next prompt: one an app is waiting on, or the next to come
                policy    answer every prompt this way until "policy ask" (for unattended tests)
                status    show the enrolment, the answers waiting and the standing answer
            """
        ),
        (
            "companion",
            "Drive the simulated companion device (a paired watch) that kSecAccessControlCompanion asks.",
            """
            Usage: companion pair | unpair | match | nomatch | cancel | policy <match|nomatch|cancel|ask> | status
                pair, unpair  pair a companion device, or remove it
                match, nomatch, cancel, policy, status
                              as for biometry: the device approves, refuses, or the user cancels
            """
        ),
        ("error", "Display a descriptive message for the given error code(s).", "Usage: error <error code> [...]"),
        (
            "completion",
            "Print a shell completion script (beyond macOS).",
            """
            Usage: completion bash | zsh
                bash  source <(security completion bash), or save it in bash-completion's directory
                zsh   save it as _security in a directory of $fpath
            """
        ),
        (
            "help",
            "Show all commands, or the usage of one.",
            """
            Usage: help [command] | help --man
                --man  Print this command's manual page (roff): security help --man > security.1
            """
        ),
    ]

    package static func text(for verb: String) -> String? {
        verbs.first { $0.0 == verb }?.2
    }

    package static var overview: String {
        var lines = ["Usage: security <command> [options] [args...]", "       security --version", "", "Commands:"]
        for (name, summary, _) in verbs {
            lines.append("    " + name + String(repeating: " ", count: max(0, 28 - name.count)) + summary)
        }
        return lines.joined(separator: "\n")
    }
}
