/// A status code of Apple's API: 0 for success, a negative code for each failure (`errSec...`).
public typealias OSStatus = Int32
