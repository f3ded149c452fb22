import Foundation
import KeychainBytes
import KeychainCore
import KeychainDBus

extension SecretServiceServer {
    // MARK: Collections

    /// The collection `object` names, if it exists.
    func collection(_ context: CallContext) throws(SecretServiceError) -> SecretServiceState.Collection {
        guard case .collection(let id) = context.object,
            let collection = context.document.collections.first(where: { $0.id == id })
        else { throw noSuchObject(context.call.path ?? "") }
        return collection
    }

    func collectionCall(_ context: CallContext) throws(SecretServiceError) -> [DBusValue] {
        let collection = try collection(context)
        let body = context.body
        switch context.member {
        case "SearchItems":
            try expect(context, "a{ss}")
            let attributes = try stringMap(body[0])
            try ensureUnlocked()
            let items = try keychainCall { try context.store.search(attributes, collection: collection.id) }
            return [
                .array(
                    element: "o",
                    items.map {
                        .objectPath(SecretServicePath.item(collection: collection.id, reference: $0.reference))
                    })
            ]
        case "CreateItem":
            try expect(context, "a{sv}(oayays)b")
            let properties = try variantMap(body[0])
            guard case .boolean(let replace) = body[2] else {
                throw SecretServiceError(.invalidArguments, "CreateItem takes (a{sv}(oayays)b)")
            }
            var label = ""
            if let given = properties["org.freedesktop.Secret.Item.Label"] {
                guard case .string(let text) = given else {
                    throw SecretServiceError(.invalidArguments, "an item's Label is a string")
                }
                label = text
            }
            var attributes: [String: String] = [:]
            if let given = properties["org.freedesktop.Secret.Item.Attributes"] {
                attributes = try stringMap(given)
            }
            try ensureUnlocked()
            let (secret, contentType) = try receivedSecret(body[1], sender: context.sender)
            let reference = try keychainCall {
                try context.store.create(
                    collection: collection.id, label: label, attributes: attributes, secret: secret,
                    contentType: contentType, replace: replace)
            }
            let path = SecretServicePath.item(collection: collection.id, reference: reference)
            emit(
                SecretServicePath.collection(collection.id), Self.collectionInterface, "ItemCreated",
                [.objectPath(path)], to: context.sender)
            return [.objectPath(path), .objectPath(SecretServicePath.none)]
        case "Delete":
            try expect(context, "")
            try ensureUnlocked()
            // Only an app of the group that made it deletes a collection (never the default one). Its
            // items of this caller's go with it; other apps' items in it, which this caller cannot see,
            // stay in the keychain and show in the default collection.
            if collection.id != SecretServiceStore.defaultCollection {
                guard let creator = collection.creator, context.store.client.accessGroups.contains(creator) else {
                    throw SecretServiceError(
                        .accessDenied, "only the app that made the collection \(collection.id) deletes it")
                }
            }
            let items = try keychainCall { try context.store.search([:], collection: collection.id) }
            for item in items { try keychainCall { try context.store.delete(item.reference) } }
            if collection.id != SecretServiceStore.defaultCollection {
                try keychainCall {
                    try state.change { document in
                        document.collections.removeAll { $0.id == collection.id }
                        document.aliases = document.aliases.filter { $0.value != collection.id }
                    }
                }
                emit(
                    SecretServicePath.service, Self.serviceInterface, "CollectionDeleted",
                    [.objectPath(SecretServicePath.collection(collection.id))])
            }
            return [.objectPath(SecretServicePath.none)]
        default:
            throw SecretServiceError(.unknownMethod, "no method \(context.member) on a Collection")
        }
    }

    // MARK: Items

    /// The item `object` names, if the caller may see it.
    func item(_ context: CallContext) throws(SecretServiceError) -> SecretServiceItem {
        guard case .item(let collection, let reference) = context.object else {
            throw noSuchObject(context.call.path ?? "")
        }
        try ensureUnlocked()
        guard let item = try keychainCall({ try context.store.item(reference) }), item.collection == collection else {
            throw noSuchObject(context.call.path ?? "")
        }
        return item
    }

    func itemCall(_ context: CallContext) throws(SecretServiceError) -> [DBusValue] {
        let item = try item(context)
        let path = SecretServicePath.item(collection: item.collection, reference: item.reference)
        switch context.member {
        case "GetSecret":
            try expect(context, "o")
            guard case .objectPath(let sessionPath) = context.body[0] else {
                throw SecretServiceError(.invalidArguments, "GetSecret takes (o)")
            }
            let session = try session(sessionPath, of: context.sender)
            let secret = try keychainCall { try context.store.secret(item.reference) }
            return [try secretValue(secret, item: item, session: session, path: sessionPath)]
        case "SetSecret":
            try expect(context, "(oayays)")
            let (secret, contentType) = try receivedSecret(context.body[0], sender: context.sender)
            try keychainCall { try context.store.change(item.reference, secret: secret, contentType: contentType) }
            emitChanged(path, collection: item.collection, to: context.sender)
            return []
        case "Delete":
            try expect(context, "")
            try keychainCall { try context.store.delete(item.reference) }
            emit(
                SecretServicePath.collection(item.collection), Self.collectionInterface, "ItemDeleted",
                [.objectPath(path)], to: context.sender)
            return [.objectPath(SecretServicePath.none)]
        default:
            throw SecretServiceError(.unknownMethod, "no method \(context.member) on an Item")
        }
    }

    /// Item signals go to the connection that made the change alone: a broadcast would tell every
    /// program on the bus which items of other apps come and go.
    private func emitChanged(_ path: String, collection: String, to sender: String) {
        emit(
            SecretServicePath.collection(collection), Self.collectionInterface, "ItemChanged", [.objectPath(path)],
            to: sender)
    }

    // MARK: Properties

    func properties(_ context: CallContext) throws(SecretServiceError) -> [DBusValue] {
        let body = context.body
        switch context.member {
        case "Get":
            try expect(context, "ss")
            guard case .string(let interface) = body[0], case .string(let name) = body[1] else {
                throw SecretServiceError(.invalidArguments, "Get takes (ss)")
            }
            let all = try propertyValues(context, interface: interface)
            guard let value = all[name] else {
                throw SecretServiceError(.unknownProperty, "no property \(name) on \(interface)")
            }
            return [.variant(value)]
        case "GetAll":
            try expect(context, "s")
            guard case .string(let interface) = body[0] else {
                throw SecretServiceError(.invalidArguments, "GetAll takes (s)")
            }
            let all = try propertyValues(context, interface: interface)
            return [
                .array(
                    element: "{sv}",
                    all.sorted { $0.key < $1.key }.map { .dictEntry(key: .string($0.key), value: .variant($0.value)) })
            ]
        case "Set":
            try expect(context, "ssv")
            guard case .string(let interface) = body[0], case .string(let name) = body[1],
                case .variant(let value) = body[2]
            else { throw SecretServiceError(.invalidArguments, "Set takes (ssv)") }
            try setProperty(context, interface: interface, name: name, value: value)
            return []
        default:
            throw SecretServiceError(.unknownMethod, "no method \(context.member) on org.freedesktop.DBus.Properties")
        }
    }

    private func seconds(_ date: Date) -> DBusValue { .uint64(UInt64(max(0, date.timeIntervalSince1970))) }

    private func propertyValues(_ context: CallContext, interface: String) throws(SecretServiceError) -> [String:
        DBusValue]
    {
        switch context.object {
        case .service:
            guard interface == Self.serviceInterface || interface.isEmpty else { return [:] }
            return [
                "Collections": .array(
                    element: "o", context.document.collections.map { .objectPath(SecretServicePath.collection($0.id)) })
            ]
        case .collection:
            let collection = try collection(context)
            guard interface == Self.collectionInterface || interface.isEmpty else { return [:] }
            var items: [DBusValue] = []
            if !isLocked {
                items = try keychainCall { try context.store.search([:], collection: collection.id) }.map {
                    .objectPath(SecretServicePath.item(collection: collection.id, reference: $0.reference))
                }
            }
            return [
                "Items": .array(element: "o", items), "Label": .string(collection.label), "Locked": .boolean(isLocked),
                "Created": seconds(collection.created), "Modified": seconds(collection.modified),
            ]
        case .item:
            let item = try item(context)
            guard interface == Self.itemInterface || interface.isEmpty else { return [:] }
            return [
                "Locked": .boolean(isLocked), "Label": .string(item.label),
                "Attributes": .array(
                    element: "{ss}",
                    item.attributes.sorted { $0.key < $1.key }.map {
                        .dictEntry(key: .string($0.key), value: .string($0.value))
                    }),
                "Created": seconds(item.created), "Modified": seconds(item.modified),
                "Type": .string(item.attributes["xdg:schema"] ?? ""),
            ]
        case .session, .prompt:
            return [:]
        case .unknown:
            throw noSuchObject(context.call.path ?? "")
        }
    }

    private func setProperty(_ context: CallContext, interface: String, name: String, value: DBusValue)
        throws(SecretServiceError)
    {
        switch (context.object, name) {
        case (.collection, "Label"):
            let collection = try collection(context)
            let label = try labelValue(value)
            try ensureUnlocked()
            try keychainCall {
                try state.change { document in
                    guard let index = document.collections.firstIndex(where: { $0.id == collection.id }) else { return }
                    document.collections[index].label = label
                    document.collections[index].modified = Date()
                }
            }
            emit(
                SecretServicePath.service, Self.serviceInterface, "CollectionChanged",
                [.objectPath(SecretServicePath.collection(collection.id))])
        case (.item, "Label"):
            let item = try item(context)
            let label = try labelValue(value)
            try keychainCall { try context.store.change(item.reference, label: label) }
            emitChanged(
                SecretServicePath.item(collection: item.collection, reference: item.reference),
                collection: item.collection, to: context.sender)
        case (.item, "Attributes"):
            let item = try item(context)
            let attributes = try stringMap(value)
            try keychainCall { try context.store.change(item.reference, attributes: attributes) }
            emitChanged(
                SecretServicePath.item(collection: item.collection, reference: item.reference),
                collection: item.collection, to: context.sender)
        case (.unknown, _):
            throw noSuchObject(context.call.path ?? "")
        default:
            throw SecretServiceError(.propertyReadOnly, "\(name) cannot be set on this object")
        }
    }

    /// A Label being set: a string of at most 4,096 bytes.
    private func labelValue(_ value: DBusValue) throws(SecretServiceError) -> String {
        guard case .string(let label) = value, label.utf8.count <= 4_096 else {
            throw SecretServiceError(.invalidArguments, "a Label is a string of at most 4096 bytes")
        }
        return label
    }

    // MARK: Introspection

    /// Describes the objects for tools (`busctl introspect`, GDBus proxies made without interface
    /// information); answered to everyone, since it says nothing about any item.
    func handleIntrospection(_ call: DBusMessage) -> Result<[DBusValue], SecretServiceError> {
        guard call.member == "Introspect", call.signature.isEmpty else {
            return .failure(SecretServiceError(.unknownMethod, "Introspectable has Introspect() only"))
        }
        let path = call.path ?? "/"
        let interface: String
        switch SecretServicePath.parse(path, aliases: ["default": SecretServiceStore.defaultCollection]) {
        case .service: interface = Self.serviceXML
        case .collection: interface = Self.collectionXML
        case .item: interface = Self.itemXML
        case .session:
            interface = #"<interface name="org.freedesktop.Secret.Session"><method name="Close"/></interface>"#
        case .prompt: interface = Self.promptXML
        case .unknown: interface = ""
        }
        var children = ""
        if path == "/" { children = #"<node name="org"/>"# }
        if path == "/org" { children = #"<node name="freedesktop"/>"# }
        if path == "/org/freedesktop" { children = #"<node name="secrets"/>"# }
        let xml = """
            <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN" "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
            <node>\(interface)\(children)</node>
            """
        return .success([.string(xml)])
    }

    private static let serviceXML = """
        <interface name="org.freedesktop.Secret.Service">\
        <method name="OpenSession"><arg type="s" direction="in"/><arg type="v" direction="in"/><arg type="v" direction="out"/><arg type="o" direction="out"/></method>\
        <method name="CreateCollection"><arg type="a{sv}" direction="in"/><arg type="s" direction="in"/><arg type="o" direction="out"/><arg type="o" direction="out"/></method>\
        <method name="SearchItems"><arg type="a{ss}" direction="in"/><arg type="ao" direction="out"/><arg type="ao" direction="out"/></method>\
        <method name="Unlock"><arg type="ao" direction="in"/><arg type="ao" direction="out"/><arg type="o" direction="out"/></method>\
        <method name="Lock"><arg type="ao" direction="in"/><arg type="ao" direction="out"/><arg type="o" direction="out"/></method>\
        <method name="GetSecrets"><arg type="ao" direction="in"/><arg type="o" direction="in"/><arg type="a{o(oayays)}" direction="out"/></method>\
        <method name="ReadAlias"><arg type="s" direction="in"/><arg type="o" direction="out"/></method>\
        <method name="SetAlias"><arg type="s" direction="in"/><arg type="o" direction="in"/></method>\
        <property name="Collections" type="ao" access="read"/>\
        <signal name="CollectionCreated"><arg type="o"/></signal><signal name="CollectionDeleted"><arg type="o"/></signal>\
        <signal name="CollectionChanged"><arg type="o"/></signal></interface>
        """

    private static let collectionXML = """
        <interface name="org.freedesktop.Secret.Collection">\
        <method name="Delete"><arg type="o" direction="out"/></method>\
        <method name="SearchItems"><arg type="a{ss}" direction="in"/><arg type="ao" direction="out"/></method>\
        <method name="CreateItem"><arg type="a{sv}" direction="in"/><arg type="(oayays)" direction="in"/><arg type="b" direction="in"/><arg type="o" direction="out"/><arg type="o" direction="out"/></method>\
        <property name="Items" type="ao" access="read"/><property name="Label" type="s" access="readwrite"/>\
        <property name="Locked" type="b" access="read"/><property name="Created" type="t" access="read"/>\
        <property name="Modified" type="t" access="read"/>\
        <signal name="ItemCreated"><arg type="o"/></signal><signal name="ItemDeleted"><arg type="o"/></signal>\
        <signal name="ItemChanged"><arg type="o"/></signal></interface>
        """

    private static let itemXML = """
        <interface name="org.freedesktop.Secret.Item">\
        <method name="Delete"><arg type="o" direction="out"/></method>\
        <method name="GetSecret"><arg type="o" direction="in"/><arg type="(oayays)" direction="out"/></method>\
        <method name="SetSecret"><arg type="(oayays)" direction="in"/></method>\
        <property name="Locked" type="b" access="read"/><property name="Attributes" type="a{ss}" access="readwrite"/>\
        <property name="Label" type="s" access="readwrite"/><property name="Created" type="t" access="read"/>\
        <property name="Modified" type="t" access="read"/></interface>
        """

    private static let promptXML = """
        <interface name="org.freedesktop.Secret.Prompt">\
        <method name="Prompt"><arg type="s" direction="in"/></method><method name="Dismiss"/>\
        <signal name="Completed"><arg type="b"/><arg type="v"/></signal></interface>
        """
}
