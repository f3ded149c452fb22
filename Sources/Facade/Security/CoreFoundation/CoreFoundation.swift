@_exported import Foundation

// Core Foundation as Darwin clients see it, on top of swift-corelibs-foundation: each CF type is the
// toll-free-bridged Foundation class, so `as CFDictionary`, `as? Data` and friends compile unchanged.

public typealias CFTypeRef = AnyObject
public typealias CFString = NSString
public typealias CFMutableString = NSMutableString
public typealias CFDictionary = NSDictionary
public typealias CFMutableDictionary = NSMutableDictionary
public typealias CFArray = NSArray
public typealias CFMutableArray = NSMutableArray
public typealias CFData = NSData
public typealias CFMutableData = NSMutableData
public typealias CFNumber = NSNumber
public typealias CFBoolean = NSNumber
public typealias CFDate = NSDate
public typealias CFError = NSError
public typealias CFErrorDomain = CFString
public typealias CFTypeID = UInt
public typealias CFIndex = Int
public typealias CFOptionFlags = UInt
public typealias CFAbsoluteTime = Double
public typealias FourCharCode = UInt32
public typealias OSType = FourCharCode

/// `NSErrorPointer` as Darwin's Foundation declares it (corelibs has no such alias).
public typealias NSErrorPointer = UnsafeMutablePointer<NSError?>?

public let noErr: OSStatus = 0

/// Memory allocators do not exist here; the type keeps `kCFAllocatorDefault` arguments compiling.
public final class CFAllocator: @unchecked Sendable {
    private init() {}
}

public let kCFAllocatorDefault: CFAllocator! = nil

public let kCFBooleanTrue: CFBoolean! = NSNumber(value: true)
public let kCFBooleanFalse: CFBoolean! = NSNumber(value: false)

nonisolated(unsafe) public let kCFBundleIdentifierKey: CFString = SecConstantString(string: "CFBundleIdentifier")

/// Type identifiers for `CFGetTypeID`: one per class, stable within a process.
public func CFGetTypeID(_ object: CFTypeRef?) -> CFTypeID {
    guard let object else { return 0 }
    return CFTypeID(UInt(bitPattern: ObjectIdentifier(type(of: object)).hashValue))
}

func typeID(of type: AnyClass) -> CFTypeID {
    CFTypeID(UInt(bitPattern: ObjectIdentifier(type).hashValue))
}

public func CFErrorGetCode(_ error: CFError!) -> CFIndex { error?.code ?? 0 }

public func CFErrorGetDomain(_ error: CFError!) -> CFErrorDomain! { error.map { $0.domain as NSString } }

public func CFErrorCopyUserInfo(_ error: CFError!) -> CFDictionary! { error.map { $0.userInfo as NSDictionary } }

public func CFErrorCopyDescription(_ error: CFError!) -> CFString! { error.map { $0.localizedDescription as NSString } }

/// The error domain of OSStatus codes.
nonisolated(unsafe) public let kCFErrorDomainOSStatus: CFString = SecConstantString(string: "NSOSStatusErrorDomain")
