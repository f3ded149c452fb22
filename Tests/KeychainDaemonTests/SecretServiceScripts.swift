/// Python scripts (jeepney, as any client could send) that give the Secret Service bad input; each
/// prints one line per check, "name: outcome".
enum SecretServiceScripts {
    static let badInput = #"""
        # Bad input for the Secret Service, sent with jeepney as any client could: prints one line per check,
        # "name: outcome", where the outcome is the D-Bus error name or "ok".
        import os, sys
        from jeepney import DBusAddress, new_method_call, MessageType, HeaderFields
        from jeepney.io.blocking import open_dbus_connection

        BUS = 'org.freedesktop.secrets'
        service = DBusAddress('/org/freedesktop/secrets', bus_name=BUS, interface='org.freedesktop.Secret.Service')
        login = DBusAddress('/org/freedesktop/secrets/aliases/default', bus_name=BUS,
                            interface='org.freedesktop.Secret.Collection')
        P = int('FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DD'
                'EF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED'
                'EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE65381FFFFFFFFFFFFFFFF', 16)

        def call(connection, address, method, signature=None, *body, interface=None):
            if interface:
                address = DBusAddress(address.object_path, bus_name=BUS, interface=interface)
            message = new_method_call(address, method, signature, body)
            reply = connection.send_and_get_reply(message, timeout=20)
            if reply.header.message_type == MessageType.error:
                return reply.header.fields[HeaderFields.error_name], reply.body
            return 'ok', reply.body

        def report(name, outcome):
            print(f'{name}: {outcome[0]}', flush=True)

        a = open_dbus_connection(bus='SESSION')
        b = open_dbus_connection(bus='SESSION')
        report('wrong signature', call(a, service, 'OpenSession', 's', 'plain'))
        report('unknown method', call(a, service, 'Frobnicate'))
        report('unknown collection', call(a, DBusAddress('/org/freedesktop/secrets/collection/nope', bus_name=BUS),
                                          'Get', 'ss', 'org.freedesktop.Secret.Collection', 'Label',
                                          interface='org.freedesktop.DBus.Properties'))
        report('unknown item', call(a, DBusAddress('/org/freedesktop/secrets/collection/login/i00ff', bus_name=BUS),
                                    'GetSecret', 'o', '/', interface='org.freedesktop.Secret.Item'))
        report('item path that is no reference', call(a, DBusAddress('/org/freedesktop/secrets/collection/login/xyz',
                                                      bus_name=BUS), 'Delete', interface='org.freedesktop.Secret.Item'))
        report('unknown algorithm', call(a, service, 'OpenSession', 'sv', 'rot13', ('s', '')))
        for name, key in [('DH key 0', 0), ('DH key 1', 1), ('DH key p-1', P - 1), ('DH key p', P)]:
            report(name, call(a, service, 'OpenSession', 'sv', 'dh-ietf1024-sha256-aes128-cbc-pkcs7',
                              ('ay', key.to_bytes(128, 'big'))))
        report('DH key of 129 bytes', call(a, service, 'OpenSession', 'sv', 'dh-ietf1024-sha256-aes128-cbc-pkcs7',
                                           ('ay', b'\x02' * 129)))
        report('DH key as a string', call(a, service, 'OpenSession', 'sv', 'dh-ietf1024-sha256-aes128-cbc-pkcs7',
                                          ('s', 'key')))

        # A real DH session, for secrets with bad IVs and padding.
        from secretstorage.dhcrypto import Session as DHSession, int_to_bytes
        dh = DHSession()
        status, (output, session) = call(a, service, 'OpenSession', 'sv', 'dh-ietf1024-sha256-aes128-cbc-pkcs7',
                                         ('ay', int_to_bytes(dh.my_public_key)))
        dh.set_server_public_key(int.from_bytes(output[1], 'big'))
        report('DH session', (status,))
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
        def encrypt(plain, iv, pad=True):
            if pad:
                count = 16 - len(plain) % 16
                plain = plain + bytes([count]) * count
            encryptor = Cipher(algorithms.AES(dh.aes_key), modes.CBC(iv)).encryptor()
            return encryptor.update(plain) + encryptor.finalize()
        props = {'org.freedesktop.Secret.Item.Label': ('s', 'bad'),
                 'org.freedesktop.Secret.Item.Attributes': ('a{ss}', {'bad-input': 'yes'})}
        iv = os.urandom(16)
        report('IV of 15 bytes', call(a, login, 'CreateItem', 'a{sv}(oayays)b', props,
                                      (session, iv[:15], encrypt(b'x', iv), 'text/plain'), False))
        report('ciphertext not whole blocks', call(a, login, 'CreateItem', 'a{sv}(oayays)b', props,
                                                   (session, iv, encrypt(b'x', iv)[:15], 'text/plain'), False))
        report('bad padding', call(a, login, 'CreateItem', 'a{sv}(oayays)b', props,
                                   (session, iv, encrypt(b'0123456789abcdef', iv, pad=False), 'text/plain'), False))
        report('secret in a session of another connection', call(b, login, 'CreateItem', 'a{sv}(oayays)b', props,
                                                                 (session, iv, encrypt(b'x', iv), 'text/plain'), False))
        report('no such session', call(a, login, 'CreateItem', 'a{sv}(oayays)b', props,
                                       ('/org/freedesktop/secrets/session/s999999', b'', b'x', 'text/plain'), False))
        huge = {'org.freedesktop.Secret.Item.Attributes': ('a{ss}', {f'k{n}': 'v' for n in range(300)})}
        report('300 attributes', call(a, login, 'CreateItem', 'a{sv}(oayays)b', huge,
                                      (session, iv, encrypt(b'x', iv), 'text/plain'), False))
        long_value = {'org.freedesktop.Secret.Item.Attributes': ('a{ss}', {'k': 'v' * 5000})}
        report('attribute of 5000 bytes', call(a, login, 'CreateItem', 'a{sv}(oayays)b', long_value,
                                               (session, iv, encrypt(b'x', iv), 'text/plain'), False))
        big = b'x' * ((1 << 20) + 1)
        report('secret over 1 MiB', call(a, login, 'CreateItem', 'a{sv}(oayays)b', props,
                                         (session, iv, encrypt(big, iv), 'text/plain'), False))
        report('search with 300 attributes', call(a, service, 'SearchItems', 'a{ss}', {f'k{n}': 'v' for n in range(300)}))
        report('GetSecrets of 1001 objects', call(a, service, 'GetSecrets', 'aoo', [f'/o/{n}' for n in range(1001)], session))
        report('SetAlias of default', call(a, service, 'SetAlias', 'so', 'default', '/org/freedesktop/secrets/collection/login'))
        carrier = open_dbus_connection(bus='SESSION', enable_fds=True)
        descriptor = os.open('/dev/null', os.O_RDONLY)
        report('a descriptor to OpenSession', call(carrier, service, 'OpenSession', 'sv', 'plain', ('h', descriptor)))
        os.close(descriptor)
        carrier.close()
        status, (found, locked) = call(a, service, 'SearchItems', 'a{ss}', {'bad-input': 'yes'})
        print(f'items written by bad input: {len(found) + len(locked)}', flush=True)

        # Thousands of sessions opened and closed by one client; then one more than the limit left open.
        for n in range(2000):
            status, (_, path) = call(a, service, 'OpenSession', 'sv', 'plain', ('s', ''))
            assert status == 'ok', status
            assert call(a, DBusAddress(path, bus_name=BUS), 'Close', interface='org.freedesktop.Secret.Session')[0] == 'ok'
        print('2000 sessions opened and closed: ok', flush=True)
        opened = []
        outcome = ('ok',)
        while outcome[0] == 'ok' and len(opened) < 1000:
            outcome = call(a, service, 'OpenSession', 'sv', 'plain', ('s', ''))
            if outcome[0] == 'ok':
                opened.append(outcome[1][1])
        print(f'sessions left open before refusal: {len(opened)} then {outcome[0]}', flush=True)
        report('closing another connection\'s session', call(b, DBusAddress(opened[0], bus_name=BUS), 'Close',
                                                             interface='org.freedesktop.Secret.Session'))
        a.close()
        # The service serves everyone else.
        report('another client afterwards', call(b, service, 'OpenSession', 'sv', 'plain', ('s', '')))
        """#

    static let prompts = #"""
        # A prompt, from the connection that asked for it and from another; its connection leaves mid-prompt.
        import time
        from jeepney import DBusAddress, new_method_call, MessageType, HeaderFields
        from jeepney.io.blocking import open_dbus_connection

        BUS = 'org.freedesktop.secrets'
        service = DBusAddress('/org/freedesktop/secrets', bus_name=BUS, interface='org.freedesktop.Secret.Service')

        def call(connection, address, method, signature=None, *body, interface=None):
            if interface:
                address = DBusAddress(address.object_path, bus_name=BUS, interface=interface)
            reply = connection.send_and_get_reply(new_method_call(address, method, signature, body), timeout=20)
            if reply.header.message_type == MessageType.error:
                return reply.header.fields[HeaderFields.error_name], reply.body
            return 'ok', reply.body

        a = open_dbus_connection(bus='SESSION')
        b = open_dbus_connection(bus='SESSION')
        status, (unlocked, prompt) = call(a, service, 'Unlock', 'ao', ['/org/freedesktop/secrets/collection/login'])
        print(f'unlock: {status} {len(unlocked)} {prompt.startswith("/org/freedesktop/secrets/prompt/")}', flush=True)
        address = DBusAddress(prompt, bus_name=BUS)
        print(f'prompt of another connection: {call(b, address, "Prompt", "s", "", interface="org.freedesktop.Secret.Prompt")[0]}', flush=True)
        print(f'prompt: {call(a, address, "Prompt", "s", "", interface="org.freedesktop.Secret.Prompt")[0]}', flush=True)
        a.close()
        started = time.monotonic()
        outcome = call(b, service, 'SearchItems', 'a{ss}', {})
        print(f'another client while the prompt runs: {outcome[0]} in under a second: {time.monotonic() - started < 1}', flush=True)
        """#
}
