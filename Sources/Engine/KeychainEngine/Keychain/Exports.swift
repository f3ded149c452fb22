// The engine's requests, answers and errors are KeychainCore's types: whoever uses the engine uses them.
@_exported import KeychainCore
