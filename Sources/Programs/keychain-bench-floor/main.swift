// The benchmark's floor for a command's start: the smallest Swift program that does something, a
// static binary (as the release `security` is) that imports nothing and prints one line. What the
// `security` command takes beyond this is the keychain's work and what it links.
print("floor")
